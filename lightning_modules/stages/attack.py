"""stage=attack: an adversarial attack (`attack=<recipe>`) on a task model (`source=`), on a
seeded sample of `attack.num_examples` examples of the task's dev split (`attack.split`; `train`
makes adversarial training data for `defence=augment`), optionally of one gold class
(`attack.label`, as universal triggers are searched per class).

    python -m ptmlab.run stage=attack attack=pwws source=<job:<id> | mlflow:<run_id> | run folder>

`task=` is optional, as for stage=compress (the source's manifest records its task). For a pair
task the second text is attacked (the hypothesis of an entailment pair), the first held fixed.

`build_attack(cfg)` loads the source, the task and the recipe (a masked LM for bae) and refuses
what cannot be attacked (a regression or token-level head, a sample of 0, an MLM reference that is
not a masked LM) in one line before any MLflow run opens. `run_attack(cfg)` attacks every sampled
example the model classifies correctly (a universal recipe, triggers, first searches its trigger on
them) and writes the numbers attack papers report
(`ptmlab.contracts.AttackSummary`) and one record per example (attack/records.jsonl).

Determinism: the sample is drawn from `seed`, and each example's random choices (DeepWordBug's
edit positions) from its own generator seeded by (`seed`, row), so the same model and seed give
the same perturbed examples; a second job with the same settings recomputes them (the attack is
not cached) and gets identical records.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from lightning_modules.artifacts.saved_task_model import LoadedTaskModel, load_task_model, record_source
from lightning_modules.attacks.read_ahead import check_attackable
from lightning_modules.attacks.recipe import RECORDS_FILE, SKIPPED, SUCCEEDED, AttackRecipe, AttackRecord
from lightning_modules.attacks.victim import Victim
from lightning_modules.runtime.stage_run import StageRun, tracking_uri
from lightning_modules.stages.compress import source_run_id, use_source_task
from lightning_modules.tasks.read_ahead import ReadAhead
from lightning_modules.tasks.spec import LoadedTask
from ptmlab.contracts import AttackSummary, BackboneError, ConfigError
from ptmlab.methods.validation import declared

# keys of the `attack` node the stage reads (the recipe's settings leave them out)
SAMPLE_KEYS = ("num_examples", "split", "batch_size", "label")


@dataclass
class AttackParts:
    source: LoadedTaskModel
    task: LoadedTask
    split: str
    rows: list[int]  # the sampled rows of the split, in order
    recipe: AttackRecipe
    victim: Victim
    label: str | None = None  # `attack.label`: only examples of this gold class are sampled
    source_fields: dict = field(default_factory=dict)  # what the source's backbone is (`record_source`)


def build_recipe(node: DictConfig) -> AttackRecipe:
    """The recipe an `attack` node names, given the whole node validated into its declaration (the
    sample keys included: the stage reads them from the node)."""
    from hydra.utils import get_class

    values = OmegaConf.to_container(node, resolve=True)
    recipe = get_class(values["_target_"])
    if not (isinstance(recipe, type) and issubclass(recipe, AttackRecipe)):
        raise ConfigError(f"attack._target_={node._target_}: not a lightning_modules.attacks recipe")
    return recipe(declared(recipe.declaration, values, "attack"))


def sample_rows(rows: range | list[int], num_examples: int, seed: int) -> list[int]:
    """`num_examples` of `rows` (a split's, or those of one label), drawn from `seed` (all of them
    when there are fewer)."""
    return sorted(random.Random(seed).sample(rows, min(num_examples, len(rows))))


def label_rows(task: LoadedTask, split: str, label) -> tuple[range | list[int], str | None]:
    """The rows of `split` whose gold class is `label` (a label of the task; None: every row)."""
    examples = task.data.splits[split].examples
    if label is None:
        return range(len(examples)), None
    labels = [str(name) for name in task.spec.labels]
    if str(label) not in labels:
        raise ConfigError(f"attack.label={label}: not a label of task {task.spec.name} ({', '.join(labels)})")
    index = labels.index(str(label))
    return [i for i, ex in enumerate(examples) if int(ex.label) == index], str(label)


def build_attack(cfg: DictConfig, read_ahead: ReadAhead | None = None) -> AttackParts:
    """Everything `run_attack` runs; bad input fails here, before an MLflow run opens.
    `read_ahead`: what the preflight read (None: read here)."""
    ref = cfg.get("source")
    if not ref:
        raise ConfigError("source=null: stage=attack needs source=<job:<id> | mlflow:<run_id> | run or export folder>")
    node = cfg.get("attack")
    if node is None:
        raise ConfigError("attack=null: stage=attack needs a recipe (attack=deepwordbug, pwws, bae, triggers)")
    num_examples = int(node.get("num_examples", 0))
    if num_examples < 1:
        raise ConfigError(f"attack.num_examples={num_examples}: expected a positive number of examples")
    try:
        source = load_task_model(str(ref), tracking_uri=tracking_uri(cfg))
    except BackboneError as exc:
        raise ConfigError(
            f"source={ref}: not a task model that loads ({exc}); attack takes a finetune or compress run"
        ) from None
    use_source_task(cfg, source, str(ref))
    source_fields = record_source(cfg, source, str(ref))
    spec = source.tasks[str(cfg.task.name)]
    check_attackable(spec, str(ref))
    task = (read_ahead or ReadAhead()).task(cfg.task)
    split = node.get("split") or task.eval_splits[0].name
    if split not in task.data.splits or not task.data.splits[split].has_labels:
        raise ConfigError(
            f"attack.split={split}: task {spec.name} has no labelled split of that name "
            f"(splits: {', '.join(task.data.splits)})"
        )
    candidates, label = label_rows(task, split, node.get("label"))
    recipe = build_recipe(node)
    victim = Victim(source, spec.name, batch_size=int(node.get("batch_size") or 64))
    recipe.prepare(victim)
    rows = sample_rows(candidates, num_examples, int(cfg.seed))
    return AttackParts(source, task, split, rows, recipe, victim, label, source_fields)


def attack_examples(parts: AttackParts, seed: int, progress=None) -> list[AttackRecord]:
    """One record per sampled row: the clean prediction, then the attack on those it gets right."""
    examples = [parts.task.data.splits[parts.split].examples[r] for r in parts.rows]
    victim, recipe = parts.victim, parts.recipe
    clean = []
    for ex in examples:
        victim.start(ex.texts, None)
        clean.append(victim.probabilities([ex.texts[victim.side].split()], count=False)[0])
    # a universal recipe (triggers) searches once, on the examples it will attack
    recipe.search(
        victim,
        [(ex.texts, int(ex.label)) for ex, probs in zip(examples, clean) if int(probs.argmax()) == int(ex.label)],
    )
    records = []
    for k, (row, ex, probs) in enumerate(zip(parts.rows, examples, clean)):
        words = victim.start(ex.texts, None)
        gold, before = int(ex.label), int(probs.argmax())
        record = AttackRecord(
            index=row,
            id=str(ex.id),
            original=" ".join(words),
            context=ex.texts[0] if len(ex.texts) == 2 else None,
            label=gold,
            prediction_before=before,
            status=SKIPPED,
            words=len(words),
        )
        if before == gold:
            rng = random.Random(f"{seed}:{row}")
            perturbed, changed, after, status = recipe.attack(victim, ex.texts, gold, probs, rng)
            record.status, record.queries, record.changed_indices = status, victim.queries, changed
            record.perturbed, record.inserted = " ".join(perturbed), len(perturbed) - len(words)
            record.prediction_after = before if after is None else int(after.argmax())
        records.append(record)
        if progress is not None:
            progress(k + 1, len(examples))
    return records


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 6) if values else None


def attack_numbers(records: list[AttackRecord]) -> dict:
    """TextAttack's report: success rate over the attacked (correct before) examples; perturbed
    ratio over the successful ones; queries over the attacked ones."""
    n = len(records)
    attacked = [r for r in records if r.status != SKIPPED]
    succeeded = [r for r in attacked if r.status == SUCCEEDED]
    return {
        "clean_accuracy": round(len(attacked) / n, 6),
        "accuracy_under_attack": round((len(attacked) - len(succeeded)) / n, 6),
        "success_rate": round(len(succeeded) / len(attacked), 6) if attacked else None,
        "perturbed_word_ratio": _mean([r.perturbed_ratio for r in succeeded]),
        "queries": _mean([float(r.queries) for r in attacked]),
        "counts": {"succeeded": len(succeeded), "failed": len(attacked) - len(succeeded), "skipped": n - len(attacked)},
    }


def write_records(records: list[AttackRecord], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in records))
    return path


def run_attack(cfg: DictConfig, read_ahead: ReadAhead | None = None) -> dict:
    parts = build_attack(cfg, read_ahead)
    with StageRun(cfg) as run:
        split = parts.task.data.splits[parts.split]
        if Path(split.source).is_file():
            run.log_data_files([Path(split.source)])
        run.progress.phase(f"attacking ({parts.recipe.name})", step=0, total=len(parts.rows))
        started = time.perf_counter()
        records = attack_examples(
            parts, int(cfg.seed), progress=lambda step, total: run.progress.update(step, total=total)
        )
        seconds = time.perf_counter() - started
        numbers = attack_numbers(records)
        path = write_records(records, run.run_dir / RECORDS_FILE)
        run.log_artifact(path, "attack")
        run.logger.log_metrics({f"attack/{k}": v for k, v in numbers.items() if isinstance(v, (int, float))}, step=0)
        summary = run.summary(
            AttackSummary,
            recipe=parts.recipe.name,
            source=str(cfg.source),
            source_run=source_run_id(parts.source),
            source_dir=parts.source.folder,
            task=parts.task.spec.name,
            split=parts.split,
            # the source's record names its model; a source saved before records did, its manifest
            **{"model": str(parts.source.manifest["model"].get("name", "")), **parts.source_fields},
            # how the source was adapted and defended, so attacks on plain and adversarial fine-tunes compare
            source_adaptation=str((parts.source.manifest.get("adaptation") or {}).get("name", "full")),
            source_defence=parts.source.manifest.get("defence"),
            num_examples=len(records),
            attacked_text="second" if any(r.context is not None for r in records) else "only",
            constraints=parts.recipe.settings(),
            label=parts.label,
            class_labels=[str(name) for name in parts.task.spec.labels],
            **parts.recipe.report(),
            **numbers,
            seconds_per_example=round(seconds / len(records), 6),
            records_file=path,
        )
        run.write_summary(summary)
    return summary.model_dump(mode="json", exclude_unset=True)
