"""stage=compress: a task model (`source=`) + a method (`compression=<name>`) → the compressed
task model (export/task_model/, loadable like any other, so methods chain: distill → prune →
quantize), and the compressed model and its source measured side by side (summary.json).

    python -m ptmlab.run stage=compress compression=quantize_dynamic source=<run folder>

`task=` is optional: the source's task model records its task (`task=` naming another is refused).

`build_compress(cfg)` loads the source, the task and the method and runs the method's checks,
so bad input fails before any MLflow run opens; `run_compress(cfg)` compresses, saves, reloads
the saved model and measures it beside the source (lightning_modules/compression/measure.py).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict

from lightning_modules.artifacts.saved_task_model import (
    LoadedTaskModel,
    check_task_matches,
    load_task_model,
    record_source,
    save_task_model,
    source_task_node,
    task_configs_of,
)
from lightning_modules.artifacts.task_model_manifest import TASK_MODEL_ARTIFACT, TASK_MODEL_DIR
from lightning_modules.compression.base import CompressContext, Compressed, CompressionMethod, copy_model
from lightning_modules.compression.control import extra_training, train_control
from lightning_modules.compression.measure import MeasureSettings, measure_side_by_side
from lightning_modules.runtime.stage_run import StageRun, tracking_uri
from lightning_modules.tasks.spec import LoadedTask, load_task
from ptmlab.contracts import BackboneError, ConfigError
from ptmlab.contracts.summaries import CompressSummary
from ptmlab.methods.validation import declared


@dataclass
class CompressParts:
    source: LoadedTaskModel
    task: LoadedTask
    method: CompressionMethod
    ctx: CompressContext
    settings: MeasureSettings
    source_fields: dict  # what the source's backbone is (artifacts/saved_task_model.py `record_source`)


def load_source(ref: str, cfg: DictConfig) -> LoadedTaskModel:
    try:
        return load_task_model(ref, tracking_uri=tracking_uri(cfg))
    except BackboneError as exc:
        raise ConfigError(
            f"source={ref}: not a task model that loads ({exc}); compress takes a finetune or "
            f"compress run (a pretrain export is a backbone: fine-tune it first)"
        ) from None


def use_source_task(cfg: DictConfig, source: LoadedTaskModel, ref: str) -> None:
    """`task=` is optional: the source's own task (its manifest records it) goes into `cfg.task`,
    so the stored config says what ran; a `task=` for another task than the source's head is
    refused naming both, before any work."""
    if cfg.get("task") is None:
        with open_dict(cfg):
            cfg.task = source_task_node(source, ref)
        return
    labels = cfg.task.get("labels")
    check_task_matches(source, str(cfg.task.name), None if labels is None else list(labels), ref)


def build_method(node: DictConfig) -> CompressionMethod:
    """The method a `compression` node names, given the node validated into its declaration (not
    instantiated recursively: a distillation student's model node is data until the method builds it)."""
    from hydra.utils import get_class

    values = OmegaConf.to_container(node, resolve=True)
    method = get_class(values["_target_"])
    if not (isinstance(method, type) and issubclass(method, CompressionMethod)):
        raise ConfigError(f"compression._target_={node._target_}: not a lightning_modules.compression method")
    return method(declared(method.declaration, values, "compression"))


def build_compress(cfg: DictConfig) -> CompressParts:
    import lightning.pytorch as pl

    ref = cfg.get("source")
    if not ref:
        raise ConfigError(
            "source=null: stage=compress needs source=<job:<id> | mlflow:<run_id> | run or export folder>"
        )
    if cfg.get("compression") is None:
        raise ConfigError(
            "compression=null: stage=compress needs a method (compression=distill, quantize_dynamic, ...)"
        )
    pl.seed_everything(int(cfg.seed), workers=True, verbose=False)
    source = load_source(str(ref), cfg)
    use_source_task(cfg, source, str(ref))
    source_fields = record_source(cfg, source, str(ref))
    task = load_task(cfg.task)
    if task.spec.is_multiple_choice:  # scored as the source scores its choices (finetune resolved `auto`)
        task = dataclasses.replace(task, spec=dataclasses.replace(task.spec, choice_scoring=source.model.scoring))
    method = build_method(cfg.compression)
    stage = cfg.stage
    ctx = CompressContext(
        task=task,
        seed=int(cfg.seed),
        batch_size=int(stage.batch_size),
        eval_batch_size=int(stage.eval_batch_size),
        lr=float(stage.lr),
        warmup_ratio=float(stage.warmup_ratio),
        group_by_length=bool(stage.get("group_by_length", False)),
        cache_dir=Path(str(cfg.paths.cache_dir)) / "compression",
    )
    if task.spec.is_generation and not method.takes_generators:
        raise ConfigError(
            f"compression={method.name} does not apply to task.kind=generation (task {task.spec.name}): "
            f"quantize_dynamic, drop_layers, prune_magnitude and distill do"
        )
    method.check(source, ctx)
    return CompressParts(
        source, task, method, ctx, MeasureSettings.from_cfg(OmegaConf.to_container(stage.measure)), source_fields
    )


def source_run_id(source: LoadedTaskModel) -> str | None:
    """The MLflow run of the source, from the summary.json of the run folder it was saved in."""
    for folder in (source.folder.parent.parent, source.folder.parent):
        path = folder / "summary.json"
        if path.is_file():
            try:
                return json.loads(path.read_text()).get("mlflow_run_id")
            except (OSError, json.JSONDecodeError):
                return None
    return None


def _ratio(a, b):
    return round(a / b, 6) if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else None


def comparison(src: dict, out: dict) -> dict:
    """The `source` and `compressed` measurements (each with the headline latency) and the ratios."""
    # the headline setting: one thread, batch 32 (else the fewest threads, the largest batch)
    headline = min(
        out["latency"], key=lambda k: (out["latency"][k]["threads"], -out["latency"][k]["batch_size"]), default=None
    )
    source, compressed = (
        {**row, "latency_ms": row["latency"][headline]["latency_ms"] if headline else None} for row in (src, out)
    )
    return {
        "source": source,
        "compressed": compressed,
        "retention": _ratio(out.get("score"), src.get("score")),
        "size_ratio": _ratio(out["size_bytes"], src["size_bytes"]),
        "non_embedding_size_ratio": _ratio(out["non_embedding_size_bytes"], src["non_embedding_size_bytes"]),
        "param_ratio": _ratio(out["params"], src["params"]),
        "flops_ratio": _ratio(out["flops"], src["flops"]),
        "latency_ratio": {
            k: _ratio(v["latency_ms"], src["latency"][k]["latency_ms"]) for k, v in out["latency"].items()
        },
        "speedup": {k: _ratio(src["latency"][k]["latency_ms"], v["latency_ms"]) for k, v in out["latency"].items()},
        "headline_latency": headline,
    }


def compare_with_control(
    method: CompressionMethod, source: LoadedTaskModel, ctx: CompressContext, result: Compressed, run: StageRun
) -> dict:
    """The summary fields that make a method that trained comparable (compression/control.py):
    the extra training it did, then its control's score, or the "with extra training" mark when
    `compression.control=false`. A method that did not train has nothing to control or mark."""
    extra = extra_training(result.training, ctx.task)
    if extra is None:
        return {"retention_with_extra_training": False}
    if not method.control:
        return {"extra_training": extra, "retention_with_extra_training": True}
    run.progress.phase("training the control (the same extra training, no compression)")
    start = result.control_start if result.control_start is not None else copy_model(source)
    return {
        "extra_training": extra,
        "retention_with_extra_training": False,
        **train_control(start, source.tokenizer, ctx, result.training),
    }


def run_compress(cfg: DictConfig) -> dict:
    parts = build_compress(cfg)
    source, task, method, ctx = parts.source, parts.task, parts.method, parts.ctx
    with StageRun(cfg) as run:
        run.log_data_files([Path(s.source) for s in task.data.splits.values() if Path(s.source).is_file()])
        ctx.log = lambda metrics, step: run.logger.log_metrics(metrics, step=step)
        # `series`: the training loop's prefix (distill, control, recovery, qat ...), one curve each.
        ctx.progress = lambda step, total, metrics, series=None: run.progress.update(
            step, total=total, metrics=metrics, series=series
        )
        run.progress.phase(f"compressing ({method.name})")
        result = method.compress(source, ctx)
        fairness = compare_with_control(method, source, ctx, result, run)
        edits = list(source.manifest.get("compression") or []) + list(result.edits)
        task_dir = save_task_model(
            result.model,
            run.run_dir / "export" / TASK_MODEL_DIR,
            model_cfg=result.model_cfg or source.manifest["model"],
            tokenizer=source.tokenizer,
            tasks=source.tasks,
            adaptation=source.manifest["adaptation"],
            compression=edits,
            task_configs=source.manifest.get("task_configs") or task_configs_of(cfg, source.tasks),
        )
        run.log_artifacts(task_dir, TASK_MODEL_ARTIFACT)
        compressed = load_task_model(task_dir)  # measure what was saved, as the next stage loads it
        run.progress.phase("measuring the source and the compressed model")
        src, out, settings = measure_side_by_side(source, compressed, task, parts.settings)
        numbers = comparison(src, out)
        if "control_score" in fairness:
            numbers["retention_vs_control"] = _ratio(out.get("score"), fairness["control_score"])
            numbers["control_retention"] = _ratio(fairness["control_score"], src.get("score"))
        split = task.eval_splits[0].name
        flat = {**numbers, **{f"source_{k}": v for k, v in numbers["source"].items()}, **numbers["compressed"]}
        run.logger.log_metrics(
            {f"compress/{k}": v for k, v in flat.items() if isinstance(v, (int, float)) and not isinstance(v, bool)},
            step=0,
        )
        summary = run.summary(
            CompressSummary,
            method=method.name,
            config=method.settings(),
            source_ref=str(cfg.source),
            source_run=source_run_id(source),
            source_dir=source.folder,
            task=task.spec.name,
            main_metric=task.spec.metric_key(task.spec.main_metric, split),
            # the source's record names its model; a source saved before records did, its manifest
            **{"model": str(source.manifest["model"].get("name", "")), **parts.source_fields},
            edits=[e.get("op") for e in edits],
            **numbers,
            **result.numbers,
            **fairness,
            measurement=settings,
            task_model_dir=task_dir,
        )
        run.write_summary(summary)
    return summary.model_dump(mode="json", exclude_unset=True)
