"""stage=probe: what a model's layers know (`probe=<suite> backbone=<ref>`).

`build_probe(cfg)` reads and checks everything (suite, data files, labels, layer indices, the
backbone, its randomly initialised twin, a masked-LM head for cloze probes) before any
extraction; `run_probe(cfg)` extracts every layer's word states once per model and dataset
(lightning_modules.probing.activations, cached across jobs) and runs each task of the suite
(one probe family per file in lightning_modules/probing/) on the model and on its baselines:
layer 0 (the embedding layer) and the same architecture randomly initialised.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from lightning_modules.artifacts.backbone_reference import (
    ResolvedBackbone,
    backbone_summary,
    record_backbone,
    resolve_backbone,
    with_record,
)
from lightning_modules.artifacts.saved_task_model import load_task_model, source_summary
from lightning_modules.data.conllu import Treebank, read_conllu
from lightning_modules.models.hf import HFBackbone
from lightning_modules.probing import attention as attention_probe
from lightning_modules.probing import cloze as cloze_probe
from lightning_modules.probing import geometry as geometry_probe
from lightning_modules.probing import sentence as sentence_probe
from lightning_modules.probing import structural as structural_probe
from lightning_modules.probing import token as token_probe
from lightning_modules.probing.activations import Activations, PreparedInputs, extract, model_hash, tokenized_max_length
from lightning_modules.probing.fit import FitSettings, one_thread
from lightning_modules.runtime.stage_run import StageRun, tracking_uri
from ptmlab.contracts import BackboneError, ConfigError, DataError, ProbeSummary

# task name -> probe family (the file in lightning_modules/probing/ that runs it)
FAMILY_OF = {
    **{t: "token" for t in token_probe.TOKEN_TASKS},
    **{t: "structural" for t in structural_probe.STRUCTURAL_TASKS},
    **{t: "sentence" for t in sentence_probe.SENTENCE_TASKS},
    **{t: "geometry" for t in geometry_probe.GEOMETRY_TASKS},
    "attention": "attention",
    "lama": "cloze",
}
CONLLU_FAMILIES = ("token", "structural", "sentence", "attention", "geometry")
# Families that train nothing and score no skill: no layer of theirs is the best one.
UNRANKED_FAMILIES = ("geometry",)
RANDOM_INIT = "random-init"


@dataclass
class ProbeModel:
    label: str  # "<model>" or RANDOM_INIT
    backbone: torch.nn.Module
    tokenizer: object
    digest: str = ""


@dataclass
class ProbePlan:
    suite: str
    tasks: list[str]
    resolved: ResolvedBackbone
    models: list[ProbeModel]
    layers: list[int]
    train: Treebank | None = None
    eval: Treebank | None = None
    lama: cloze_probe.LamaData | None = None
    mlm: cloze_probe.MaskedLM | None = None
    extraction: dict = field(default_factory=dict)
    # "train"/"eval" -> gold trees, built once for every model (their gold Spearman ranks too)
    trees: dict[str, structural_probe.TreeData] = field(default_factory=dict)
    # dataset name -> its sentences tokenised and aligned, once for the model and its random-init twin
    inputs: dict[str, PreparedInputs] = field(default_factory=dict)

    @property
    def families(self) -> set[str]:
        return {FAMILY_OF[t] for t in self.tasks}

    def tree_data(self, split: str) -> structural_probe.TreeData:
        if split not in self.trees:
            self.trees[split] = structural_probe.tree_data((self.train if split == "train" else self.eval).sentences)
        return self.trees[split]


def resolve_probe_backbone(cfg: DictConfig) -> ResolvedBackbone:
    """A backbone reference, or a fine-tuned/compressed task model's backbone (its task model
    folder, run folder or `mlflow:` run)."""
    try:
        return resolve_backbone(cfg, tracking_uri(cfg))
    except BackboneError as first:
        ref = OmegaConf.select(cfg, "backbone", default=None)
        if ref is None:
            raise

        try:
            loaded = load_task_model(str(ref), tracking_uri=tracking_uri(cfg))
        except BackboneError:
            raise first from None
        manifest = loaded.manifest
        model_cfg = dict(manifest.get("model") or {})
        # what its backbone was pre-trained as (objective, tokenizer, corpus), where the source's run recorded it
        recorded = source_summary(loaded)
        objective = recorded.get("objective") or "task_model"
        resolved = ResolvedBackbone(
            loaded.model.backbone,
            loaded.tokenizer,
            task_model_label(model_cfg, loaded.folder),
            str(objective),
            str(ref),
            model_cfg,
        )
        pretrained = recorded.get("backbone") if isinstance(recorded.get("backbone"), dict) else {}
        return with_record(
            resolved,
            **{k: pretrained.get(k) for k in ("family", "tokenizer", "data")},
            source_stage=recorded.get("stage"),
            source_run=recorded.get("mlflow_run_id"),
            source_run_dir=recorded.get("run_dir"),
        )


def task_model_label(model_cfg: dict, folder: Path) -> str:
    """ "minilm (distill)", "minilm (fine-tuned sst2)": a teacher and its student stay apart on the
    dashboard. Read from the run's summary.json next to export/task_model/, where there is one."""
    name = str(model_cfg.get("name", "?"))
    for candidate in (folder.parent.parent / "summary.json", folder.parent / "summary.json"):
        if candidate.is_file():
            summary = json.loads(candidate.read_text())
            if summary.get("method"):
                return f"{name} ({summary['method']})"
            if summary.get("task"):
                return f"{name} (fine-tuned {summary['task']})"
    return name


def random_twin(resolved: ResolvedBackbone, seed: int) -> torch.nn.Module:
    """The same architecture with random weights (seeded: every job with this seed probes the
    same random model, so its activations are cached too)."""
    from hydra.utils import instantiate

    torch.manual_seed(seed)
    backbone = resolved.backbone
    if backbone.hf_native:
        return HFBackbone(backbone.name_or_path, pretrained=False)
    node = dict((resolved.model_cfg or {}).get("backbone") or {})
    if not node:
        raise BackboneError(f"backbone={resolved.source}: no model config to build its random twin from")
    return instantiate(node)


def choose_layers(cfg: DictConfig, num_layers: int) -> list[int]:
    chosen = OmegaConf.select(cfg, "stage.layers", default=None)
    if chosen is None:
        return list(range(num_layers + 1))
    layers = [int(x) for x in chosen]
    for layer in layers:
        if not 0 <= layer <= num_layers:
            raise ConfigError(
                f"stage.layers: layer {layer} is beyond the model, which has layers 0 (embeddings) to {num_layers}"
            )
    if 0 not in layers:
        layers = [0, *layers]  # the embedding layer is a baseline of every run
    return sorted(set(layers))


def read_split(cfg: DictConfig, split: str) -> Treebank:
    data = cfg.probe.data
    path = data.get(split)
    if not path:
        raise ConfigError(f"probe.data.{split}: a CoNLL-U file is needed for probe={cfg.probe.name}")
    limit = data.get(f"max_{split}_sentences")
    bank = read_conllu(str(path), int(limit) if limit else None)
    max_words = data.get("max_sentence_words")
    if max_words:
        bank.sentences = [s for s in bank.sentences if len(s) <= int(max_words)]
    if not bank.sentences:
        raise DataError(f"probe.data.{split}={path}: no sentences")
    return bank


def build_probe(cfg: DictConfig) -> ProbePlan:
    import lightning.pytorch as pl

    if cfg.get("probe") is None:
        raise ConfigError("stage=probe needs a probe suite (probe=upos, probe=structural, probe=linguistic ...)")
    pl.seed_everything(int(cfg.seed), workers=True, verbose=False)  # a fresh architecture's weights follow cfg.seed
    suite = cfg.probe
    tasks = [str(t) for t in suite.tasks]
    unknown = [t for t in tasks if t not in FAMILY_OF]
    if unknown:
        raise ConfigError(f"probe.tasks: unknown task {unknown[0]!r} (known: {', '.join(FAMILY_OF)})")
    families = {FAMILY_OF[t] for t in tasks}
    train = eval_ = None
    if families & {"token", "structural", "sentence"}:
        train = read_split(cfg, "train")
    if families & set(CONLLU_FAMILIES):
        eval_ = read_split(cfg, "eval")
    for t in tasks:
        if FAMILY_OF[t] == "token":
            for bank in (train, eval_):
                token_probe.check_labels(t, bank.sentences, str(bank.path))
        if FAMILY_OF[t] in ("structural", "attention") or t == "deprel":
            for bank in (b for b in (train, eval_) if b is not None):
                if all(h < 0 for s in bank.sentences for h in s.heads):
                    raise DataError(f"{bank.path}: probe task {t!r} needs the HEAD column, which is '_' on every word")
    if eval_ is not None:
        geometry_probe.check_treebank(tasks, words_of(eval_), str(eval_.path))
    lama = cloze_probe.read_lama(str(suite.data.path), suite.data.get("relations")) if "lama" in tasks else None
    resolved = resolve_probe_backbone(cfg)
    mlm = cloze_probe.load_masked_lm(resolved, cfg) if "lama" in tasks else None
    layers = choose_layers(cfg, int(resolved.backbone.num_layers))
    if "attention" in tasks:
        attention_probe.ensure_eager_attention(resolved.backbone)
    label = OmegaConf.select(cfg, "stage.label", default=None) or resolved.model_name
    models = [ProbeModel(str(label), resolved.backbone, resolved.tokenizer)]
    if bool(cfg.stage.random_init_baseline) and resolved.source != "random" and families - {"cloze"}:
        twin = random_twin(resolved, int(cfg.seed))
        if "attention" in tasks:
            attention_probe.ensure_eager_attention(twin)
        models.append(ProbeModel(RANDOM_INIT, twin, resolved.tokenizer))
    record_backbone(cfg, resolved)  # the stored config and MLflow params say which backbone is probed
    return ProbePlan(str(suite.name), tasks, resolved, models, layers, train, eval_, lama, mlm)


def activations(
    plan: ProbePlan,
    model: ProbeModel,
    cfg: DictConfig,
    name: str,
    sentences: list[list[str]],
    run: StageRun | None = None,
) -> Activations:
    stage = cfg.stage
    if not model.digest:
        model.digest = model_hash(model.backbone, model.tokenizer)
    progress = None
    if run is not None:
        run.progress.phase(f"extracting {model.label} {name}", step=0, total=None)
        progress = lambda done, total: run.progress.update(done, total=total)  # noqa: E731 - shards written
    settings = dict(
        alignment=str(stage.alignment), batch_size=int(stage.batch_size), shard_sentences=int(stage.shard_sentences)
    )
    inputs = plan.inputs.setdefault(
        name, PreparedInputs(model.tokenizer, sentences, **settings, max_length=tokenized_max_length(model.backbone))
    )
    acts = extract(
        model.backbone,
        model.tokenizer,
        sentences,
        cache_dir=cfg.paths.cache_dir,
        **settings,
        model_label=model.label,
        model_digest=model.digest,
        data_label=name,
        progress=progress,
        inputs=inputs,
    )
    record = plan.extraction.setdefault(model.label, {"forward_passes": 0, "cache_hits": 0, "datasets": {}})
    record["forward_passes"] += acts.forward_passes
    record["cache_hits"] += int(acts.cache_hit)
    record["datasets"][name] = {
        "key": acts.key,
        "sentences": int(len(acts.lengths)),
        "cache_hit": acts.cache_hit,
        "bytes": int(acts.states.numel() * 2),
    }
    return acts


def words_of(bank: Treebank) -> list[list[str]]:
    return [s.words for s in bank.sentences]


def run_model(plan: ProbePlan, model: ProbeModel, cfg: DictConfig, run: StageRun | None) -> dict[str, dict]:
    """Every task of the suite on one model: {task: result}."""
    stage, seed = cfg.stage, int(cfg.seed)
    results: dict[str, dict] = {}
    families = plan.families
    train_acts = eval_acts = None
    if families & {"token", "structural", "sentence"}:
        train_acts = activations(
            plan, model, cfg, f"{plan.train.path.name}[:{len(plan.train)}]", words_of(plan.train), run
        )
    if families & {"token", "structural", "sentence", "geometry"}:
        eval_acts = activations(plan, model, cfg, f"{plan.eval.path.name}[:{len(plan.eval)}]", words_of(plan.eval), run)
    token_settings = FitSettings.from_cfg(stage.token, seed)
    for task in plan.tasks:
        family = FAMILY_OF[task]
        if run is not None:
            run.progress.phase(f"probing {model.label} {task}")
        if family == "token":
            with one_thread():
                results[task] = token_probe.run_token_task(
                    task,
                    train_acts,
                    eval_acts,
                    token_probe.token_data(task, plan.train.sentences),
                    token_probe.token_data(task, plan.eval.sentences),
                    plan.layers,
                    stage.token,
                    token_settings,
                    control=bool(stage.token.control),
                    scalar_mix=bool(stage.token.scalar_mix),
                )
        elif family == "structural":
            with one_thread():
                results[task] = structural_probe.run_structural_task(
                    task,
                    train_acts,
                    eval_acts,
                    plan.tree_data("train"),
                    plan.tree_data("eval"),
                    plan.layers,
                    int(stage.structural.rank),
                    FitSettings.from_cfg(stage.structural, seed),
                )
        elif family == "sentence":
            results[task] = sentence_probe.run_sentence_task(
                task,
                plan.train.sentences,
                plan.eval.sentences,
                train_acts,
                eval_acts,
                plan.layers,
                stage.token,
                token_settings,
                extract_shifted=lambda name, words: activations(plan, model, cfg, name, words, run),
            )
        elif family == "geometry":
            results[task] = geometry_probe.run_geometry_task(task, eval_acts, words_of(plan.eval), plan.layers, seed)
        elif family == "attention":
            results[task] = attention_probe.run_attention_analysis(
                model.backbone,
                model.tokenizer,
                plan.eval.sentences[: int(stage.attention.max_sentences)],
                batch_size=int(stage.batch_size),
            )
        elif family == "cloze":
            results[task] = cloze_probe.run_cloze(plan.mlm, plan.lama, batch_size=int(stage.batch_size))
    return results


def best_of(layers: list[dict], metric: str) -> tuple[int | None, float | None]:
    scored = [(e[metric], e["layer"]) for e in layers if e.get(metric) is not None]
    if not scored:
        return None, None
    score, layer = max(scored)
    return layer, score


def merge_task(trained: dict, random_init: dict | None) -> dict:
    """The trained model's result with its baselines: layer 0 and the random-init model."""
    out = dict(trained)
    metric = None if out.get("family") in UNRANKED_FAMILIES else out.get("metric")
    layers = out.get("layers") or []
    baselines = dict(out.get("baselines") or {})
    if layers and metric:
        out["best_layer"], out["best_score"] = best_of(layers, metric)
        layer0 = next((e for e in layers if e["layer"] == 0), None)
        if layer0 is not None:
            baselines["layer0"] = layer0.get(metric)
            if layer0.get("selectivity") is not None:
                baselines["layer0_selectivity"] = layer0["selectivity"]
        best = next((e for e in layers if e["layer"] == out["best_layer"]), {})
        if best.get("selectivity") is not None:
            out["best_selectivity"] = best["selectivity"]
    if random_init is not None and random_init.get("layers"):
        r_best_layer, r_best = best_of(random_init["layers"], metric)
        out["random_init"] = {"layers": random_init["layers"], "best_layer": r_best_layer, "best_score": r_best}
        if r_best is not None:
            baselines["random_init_best"] = r_best
        r_entry = next((e for e in random_init["layers"] if e["layer"] == r_best_layer), {})
        if r_entry.get("selectivity") is not None:
            baselines["random_init_selectivity"] = r_entry["selectivity"]
        if random_init.get("scalar_mix"):
            out["random_init"]["scalar_mix"] = random_init["scalar_mix"]
    elif random_init is not None and random_init.get("best_heads"):  # attention: no layers, best heads
        out["random_init"] = {"best_heads": random_init["best_heads"]}
    out["baselines"] = baselines
    return out


def write_artifacts(run: StageRun, results: dict[str, dict]) -> None:
    folder = run.run_dir / "probing"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps(results, indent=1))
    attention = results.get("attention")
    if attention:
        attention_probe.write_heatmaps(attention, folder / "attention")
    run.log_artifacts(folder, "probing")


def run_probe(cfg: DictConfig) -> dict:
    plan = build_probe(cfg)
    with StageRun(cfg) as run:
        data_files = [Path(b.path) for b in (plan.train, plan.eval) if b is not None]
        if plan.lama is not None:
            data_files += plan.lama.files
        run.log_data_files(data_files)
        started = time.time()
        by_model = {m.label: run_model(plan, m, cfg, run) for m in plan.models}
        trained = by_model[plan.models[0].label]
        random_results = by_model.get(RANDOM_INIT, {})
        tasks = [merge_task(trained[t], random_results.get(t)) for t in plan.tasks]
        write_artifacts(run, {t: r for t, r in zip(plan.tasks, tasks)})
        metrics = {}
        for t in tasks:
            if t.get("best_score") is not None:
                metrics[f"probe/{t['probe_task']}/best"] = t["best_score"]
            for e in t.get("layers") or []:
                if e.get(t.get("metric")) is not None:
                    metrics[f"probe/{t['probe_task']}/layer{e['layer']}"] = e[t["metric"]]
        if metrics:
            run.logger.log_metrics(metrics)
        headline = tasks[0]
        attention = next((t for t in tasks if t["probe_task"] == "attention"), None)
        fields = dict(
            model=plan.models[0].label,
            probe_task=plan.suite,
            suite=plan.suite,
            backbone_source=plan.resolved.source,
            alignment=str(cfg.stage.alignment),
            metric=headline.get("metric"),
            layers=headline.get("layers") or [],
            baselines=headline.get("baselines") or {},
            tasks=tasks,
            attention_heads=attention.get("heatmaps") if attention else None,
            train_sentences=len(plan.train) if plan.train is not None else None,
            eval_sentences=len(plan.eval) if plan.eval is not None else None,
            extraction=plan.extraction,
            probe_time_s=round(time.time() - started, 3),
            objective=plan.resolved.objective,
            **backbone_summary(plan.resolved),
        )
        # a field without a value is left unset: the file holds only what was measured
        summary = run.summary(ProbeSummary, **{k: v for k, v in fields.items() if v is not None})
        run.write_summary(summary)
    return summary.model_dump(mode="json", exclude_unset=True)
