"""`objective`: the objective node (one `module`, or weighted `objectives`); each `module` is
declared by its objective class in ptmlab.methods.objectives."""

from __future__ import annotations

from typing import Literal

from pydantic import model_validator

from ptmlab.methods.fields import NODE, Name, Node, NonNegativeFloat, TargetSlot


class WeightedObjective(Node):
    weight: NonNegativeFloat = 1.0
    module: TargetSlot


class ObjectiveNode(Node):
    name: Name
    compatible_families: list[Name] | None = None
    # data keys the objective needs (ptmlab.contracts.objective_checks compares them with `data`)
    requires_data: dict[Literal["name", "construction", "pair_negative"], str] | None = None
    module: TargetSlot | None = None
    objectives: dict[str, WeightedObjective] | None = None

    @model_validator(mode="after")
    def _one_loss(self):
        if not self.module and not self.objectives:
            raise ValueError(f"{NODE} needs `module` (one loss) or `objectives` (weighted losses)")
        if self.objectives and not any(part.weight > 0 for part in self.objectives.values()):
            raise ValueError(f"{NODE}.objectives: every weight is 0")
        return self
