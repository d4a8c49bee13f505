"""`stage`: one schema per stage function (`stage.entry`), which reads the node's keys."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from ptmlab.methods.fields import (
    Dropout,
    Name,
    Node,
    NonNegativeFloat,
    NonNegativeInt,
    OpenNode,
    PositiveFloat,
    PositiveInt,
    in_range,
)


class Stage(Node):
    name: Name
    entry: Name  # module.function that ptmlab.run calls
    preflight: Name | None = None  # module.function ptmlab.run calls first: reads the inputs for the entry


class Pretrain(Stage):
    export_hf: bool = True


Pooling = Literal["pool_index", "mean"]  # lightning_modules/heads/pooling.py POOLINGS


class Finetune(Stage):
    epochs: PositiveInt = 3
    max_steps: PositiveInt | None = None
    batch_size: PositiveInt = 32
    eval_batch_size: PositiveInt = 128
    group_by_length: bool = False  # training batches of similar lengths (less padding)
    lr: PositiveFloat = 5e-5
    pooling: Pooling = "pool_index"
    head_dropout: Dropout = 0.1
    val_every_n_epochs: PositiveInt = 1
    export_backbone: bool = False
    write_predictions: bool = True


class Multitask(Stage):
    tasks: list[Name]  # task config names; ptmlab.contracts.task_checks resolves each
    # Typed as a string, not a Literal: the multitask stage reports an unknown mode itself, and
    # tests/lightning_modules/test_multitask.py composes one to check that it does so before any run.
    sampling: Name = "proportional"  # proportional | temperature | uniform
    temperature: PositiveFloat | None = 2.0
    max_steps: PositiveInt = 1000
    val_every_n_steps: PositiveInt | None = None
    batch_size: PositiveInt = 32
    eval_batch_size: PositiveInt = 128
    lr: PositiveFloat = 5e-5
    pooling: Pooling = "pool_index"
    head_dropout: Dropout = 0.1
    max_train_samples: PositiveInt | None = None
    max_eval_samples: PositiveInt | None = None
    # per task name, keys of its task node: each merged node is typed as `task` is (stage.tasks[<name>])
    task_overrides: dict[str, dict[str, Any]] | None = None
    export_backbone: bool = False


class Measure(Node):
    """stage=compress: how the compressed model and its source are measured side by side."""

    seq_len: PositiveInt = 64
    batch_sizes: list[PositiveInt] = [1, 32]
    threads: list[NonNegativeInt] = [1, 0]
    warmup: NonNegativeInt = 5
    repeats: PositiveInt = 30
    score: bool = True


class Compress(Stage):
    batch_size: PositiveInt = 32
    eval_batch_size: PositiveInt = 128
    lr: PositiveFloat = 5e-5
    warmup_ratio: Annotated[float, in_range(0.0, 1.0, hi_open=True)] = 0.1
    group_by_length: bool = False  # training batches of similar lengths (less padding)
    measure: Measure = Measure()


class Attack(Stage):
    """stage=attack: its recipe is the `attack` group (ptmlab.methods.attacks)."""


class Sleep(OpenNode):
    """The platform's test stage takes keys it does not read (`+stage.input=job:<name>` makes a
    pipeline dependency, `+stage.message=...`), so only its own keys are typed."""

    name: Name
    entry: Name
    seconds: NonNegativeFloat = 0.1
    fail: bool = False
    exit_code: Annotated[int, in_range(0, 255, what="an exit code")] = 0


class AnyStage(OpenNode):
    """A stage function this schema does not know (a new stage before its schema is written)."""

    name: Name
    entry: Name


STAGES = {
    "lightning_modules.stages.pretrain.run_pretrain": Pretrain,
    "lightning_modules.stages.finetune.run_finetune": Finetune,
    "lightning_modules.stages.multitask.run_multitask": Multitask,
    "lightning_modules.stages.compress.run_compress": Compress,
    "lightning_modules.stages.attack.run_attack": Attack,
    "ptmlab.stages.sleep.run_sleep": Sleep,
}
