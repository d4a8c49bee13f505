"""Training on attack-augmented data (`defence=augment defence.source=<attack run folder>`): a
fine-tune whose training split is extended with the adversarial examples an attack found on the
task's training split, each with its original (gold) label — adversarial data augmentation
(Jin et al. 2020 §5; TextAttack's `augment`/adversarial training), the data-level counterpart of
FreeLB's embedding-space defence.

    python -m ptmlab.run stage=attack attack=deepwordbug source=<plain fine-tune> attack.split=train \
        attack.num_examples=2000                         # -> runs/attack-train
    python -m ptmlab.run stage=finetune task=glue/sst2 defence=augment defence.source=runs/attack-train

The added examples are the records whose attack succeeded (`include_failed`: every attacked
record's perturbed text too), in the records file's order, at most `max_examples`; appended after
`task.max_train_samples` is applied. A pair's records keep their first text and the perturbed
second one. The fine-tune records the defence (`settings()`: source, recipe, how many added) in its
summary and task model, so an attack on the augmented model reports `source_defence.name: augment`.

Refused in one line before any run opens: a source that is not a stage=attack run folder, an
attack on another task or on a split this fine-tune evaluates on (the examples would leak into its
own evaluation), records that do not fit the task (pair vs single text, a label it does not have),
and an attack that found nothing to add.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from lightning_modules.attacks.recipe import RECORDS_FILE
from lightning_modules.data.task_data import TextExample
from lightning_modules.tasks.spec import LoadedTask
from ptmlab.contracts import ConfigError
from ptmlab.methods.defences import AttackAugmentationParams
from ptmlab.methods.validation import declared_in_code

SUMMARY_FILE = "summary.json"
MANIFEST_FILE = "task_model.json"  # the attacked task model's (artifacts/saved_task_model.py)


class AttackAugmentation:
    """`_target_` of conf/defence/augment.yaml."""

    declaration = AttackAugmentationParams

    name = "augment"

    def __init__(self, params: AttackAugmentationParams | None = None, **values: Any):
        """`params`: the validated declaration; in code (and from `build_defence`'s node), its values
        as keywords (`AttackAugmentation(source=...)`), validated by the same declaration."""
        self.params: AttackAugmentationParams = (
            params if params is not None else declared_in_code(self, values, "defence")
        )
        self.summary: dict = {}
        self.added = 0

    def settings(self) -> dict:
        """What the run's summary and the task model's manifest record."""
        return {
            "name": self.name,
            "source": self.params.source,
            "recipe": self.summary.get("recipe"),
            "attack_split": self.summary.get("split"),
            "include_failed": self.params.include_failed,
            "max_examples": self.params.max_examples,
            "added": self.added,
        }

    def check(self, adaptation) -> None:
        if not adaptation.trains:
            raise ConfigError(
                f"defence={self.name} with adaptation={adaptation.name}: the adaptation does not "
                f"train, so there is nothing to train on the adversarial examples"
            )

    def read(self) -> tuple[dict, list[dict]]:
        """The attack run's summary and records; ConfigError when the source is not one."""
        where = f"defence.source={self.params.source}"
        if self.params.source.startswith("job:"):
            raise ConfigError(
                f"{where} is resolved by a platform worker; run it through the queue (ptmlab submit) "
                f"or pass the attack's run folder"
            )
        folder = Path(self.params.source)
        summary_file = folder / SUMMARY_FILE
        try:
            summary = json.loads(summary_file.read_text())
        except (OSError, ValueError):
            summary = None
        if not isinstance(summary, dict) or summary.get("stage") != "attack":
            raise ConfigError(
                f"{where}: not a stage=attack run folder (no {SUMMARY_FILE} of an attack); "
                f"defence=augment takes the run folder of an attack on the training split"
            )
        records_file = folder / RECORDS_FILE
        if not records_file.is_file():
            raise ConfigError(f"{where}: the attack run has no {RECORDS_FILE}")
        return summary, [json.loads(line) for line in records_file.read_text().splitlines() if line.strip()]

    def source_labels(self, summary: dict) -> list[str] | None:
        """The attacked model's label names in class-index order (its manifest), None when unknown."""
        try:
            manifest = json.loads((Path(str(summary.get("source_dir"))) / MANIFEST_FILE).read_text())
            return [str(label) for label in manifest["tasks"][summary["task"]]["labels"]]
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def augment(self, task: LoadedTask) -> LoadedTask:
        """`task` with the attack's adversarial examples appended to its training split."""
        summary, records = self.read()
        where, spec = f"defence.source={self.params.source}", task.spec
        if summary.get("task") != spec.name:
            raise ConfigError(f"{where}: an attack on task {summary.get('task')}; this fine-tune's task is {spec.name}")
        if summary.get("split") in task.data.eval_splits:
            raise ConfigError(
                f"{where}: the attack ran on split '{summary.get('split')}', which this fine-tune "
                f"evaluates on; attack the training split (attack.split={task.data.train_split})"
            )
        self.summary = summary
        labels = [str(label) for label in spec.labels]
        names = self.source_labels(summary) or labels
        pair = len(task.train.examples[0].texts) == 2
        statuses = ("succeeded", "failed") if self.params.include_failed else ("succeeded",)
        added = []
        for r in records:
            if r.get("status") not in statuses or r.get("perturbed") is None:
                continue
            if (r.get("context") is not None) != pair:
                raise ConfigError(
                    f"{where}: record {r.get('index')} is a {'pair' if r.get('context') is not None else 'single text'}"
                    f" but task {spec.name} takes {'pairs' if pair else 'single texts'}"
                )
            name = names[int(r["label"])] if 0 <= int(r["label"]) < len(names) else None
            if name not in labels:
                raise ConfigError(
                    f"{where}: record {r.get('index')} has label {name or r['label']}, not a label of "
                    f"task {spec.name} ({', '.join(labels)})"
                )
            texts = (r["context"], r["perturbed"]) if pair else (r["perturbed"],)
            added.append(TextExample(texts=texts, label=labels.index(name), row=int(r["index"]), id=f"{r['id']}-adv"))
            if self.params.max_examples is not None and len(added) == self.params.max_examples:
                break
        if not added:
            raise ConfigError(f"{where}: the attack has no {' or '.join(statuses)} adversarial examples to add")
        self.added = len(added)
        train = task.data.train
        splits = {
            **task.data.splits,
            task.data.train_split: dataclasses.replace(train, examples=[*train.examples, *added]),
        }
        return dataclasses.replace(task, data=dataclasses.replace(task.data, splits=splits))
