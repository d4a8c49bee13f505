"""The compression trade-off view: score against parameters, size, latency and FLOPs, the Pareto
front per x axis, the uncompressed source as reference, retention relative to the source.

Rows are compress results (`ptmlab.contracts.summaries.CompressSummary`): each carries its
source measured beside it (source_* fields), which becomes the reference point; the latency is
the summary's headline one (`headline_latency`, batch 32 on one thread when measured) and the
measurement settings travel with every point (a latency without its settings is not a result).

With `study_id`, the compress results of one multi-objective study's trials (issue 26 item 5):
each point carries its trial number and whether the trial is on the study's Pareto front
(Optuna's `best_trials` over the study's own objectives), and `study` names the objectives and
the Pareto trials with their jobs.

Robustness (issue 25 item 4): each point and reference carries `robustness`, recipe -> the latest
attack result whose `source` is that model (the compress job, by its run folder or `job:<id>`;
the reference by the compress summary's `source`), so accuracy under attack can replace the
score on the y axis; `robustness_fronts` are the Pareto fronts against it and
`robustness_missing` counts, per recipe, the models without such a result.

The y axis is the task's main metric, named (`metric`, `metric_label`: the compress summaries'
`main_metric`, the most common one of the task's rows): accuracy for SST-2, F1 for SQuAD, BLEU for a
translation task, ROUGE-L for a summarization one (generation scores on sacreBLEU's and rouge-score's
0-100 scale, `metric_scale` says which; retention is a ratio either way)."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable
from typing import Any

from sqlalchemy.orm import Session

from ptmlab.config_groups import CONF_DIR
from ptmlab.contracts.benchmarks import KIND_COLUMNS
from ptmlab.contracts.summaries import CompressSummary, Measurement
from ptmlab.results import cached_view, filter_options, folded, number
from ptmlab.views.encoded import EncodedList, dumps, encode
from ptmlab.views.robustness import KIND as ATTACK_KIND
from ptmlab.views.robustness import attacks_by_model, model_jobs, model_ref

KIND = "compress"
AXES = {
    "params": "Parameters",
    "size_bytes": "Size on disk",
    "latency_ms": "Latency (ms)",
    "flops": "FLOPs per example",
}
UNCOMPRESSED_METHODS = {"none", "uncompressed", "identity", "source"}
# How the y axis names a main metric (others: the key with spaces).
METRIC_LABELS = {
    "bleu": "BLEU",
    "chrf": "chrF",
    "rouge1": "ROUGE-1",
    "rouge2": "ROUGE-2",
    "rougeL": "ROUGE-L",
    "rougeLsum": "ROUGE-Lsum",
    "f1": "F1",
    "entity_f1": "entity F1",
    "exact_match": "exact match",
    "matthews_correlation": "Matthews correlation",
    "spearmanr": "Spearman",
}


def metric_axis(metric: str | None) -> dict[str, Any]:
    """The score axis of a task whose main metric is `metric`: its name, label and scale."""
    if metric is None:
        return {"metric": None, "metric_label": "score", "metric_scale": "0-1"}
    # a metric key may carry a split suffix (bleu_test): the metric is its stem
    stem = next((m for m in METRIC_LABELS if metric == m or metric.startswith(f"{m}_")), metric)
    scale = KIND_COLUMNS["generation"].stored_scale if stem in KIND_COLUMNS["generation"].metrics else 1.0
    return {
        "metric": metric,
        "metric_label": METRIC_LABELS.get(stem, stem.replace("_", " ")),
        "metric_scale": "0-100" if scale == 100 else "0-1",
    }


def pareto_front(points: Iterable[dict], x: str, y: str = "score", key: str = "id") -> set:
    """Keys of the points no other point dominates, where smaller `x` and larger `y` are better
    (q dominates p: q.x <= p.x and q.y >= p.y, one of them strictly). Points missing x or y are
    left out. Exact duplicates are both on the front (neither dominates the other).

    Sorted by x, then y descending, a point is on the front iff its y beats every y seen at a
    smaller x: O(n log n)."""
    usable = sorted(
        (
            (number(p.get(x)), number(p.get(y)), p[key])
            for p in points
            if number(p.get(x)) is not None and number(p.get(y)) is not None
        ),
        key=lambda t: (t[0], -t[1]),
    )
    front: set = set()
    best_y = float("-inf")  # the best y at any x strictly smaller than the current group's
    i = 0
    while i < len(usable):
        j = i
        while j < len(usable) and usable[j][0] == usable[i][0]:
            j += 1
        group = usable[i:j]  # same x; the first has the largest y
        top = group[0][1]
        if top > best_y:
            front.update(k for _, yy, k in group if yy == top)
            best_y = top
        i = j
    return front


def _settings(s: CompressSummary) -> str:
    m = s.measurement
    if m is None:
        return ""
    where = f"{m.device}" + (f" {m.cpu}" if m.cpu else "")
    return f"{s.headline_latency or ''} seq {m.seq_len}, median of {m.repeats}, {where}".strip()


@functools.cache
def method_defaults(method: str) -> dict[str, Any]:
    """The settings conf/compression/<method>.yaml gives (without name and _target_); {} for a
    method with no file here."""
    path = CONF_DIR / "compression" / f"{method}.yaml"
    if not path.is_file():
        return {}
    from omegaconf import OmegaConf

    node = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    return {k: v for k, v in node.items() if k not in ("name", "_target_", "defaults")}


def changed_settings(method: str, config: dict[str, Any]) -> dict[str, Any]:
    """The settings a run chose differently from its method's defaults: what tells two points of
    one method apart (the whole config repeated the defaults in every row)."""
    defaults = method_defaults(method)
    return {
        k: v for k, v in config.items() if k not in ("name", "_target_") and (k not in defaults or defaults[k] != v)
    }


def source_labels(session: Session, sources: set[str]) -> dict[str, str]:
    """`job:<id>` or a job's run folder -> "<job name or job id> (<stage>)"; other references
    (an MLflow run, a Hugging Face folder) stay as they are. The jobs are found as the robustness
    view finds attacked models (`model_jobs`: one query, folders compared without a trailing slash)."""
    refs = {src: model_ref(src) for src in sources}
    jobs = model_jobs(session, set(refs.values()))
    return {
        src: f"{job.name or f'job {job.id}'} ({job.stage})" if (job := jobs.get(ref)) else src
        for src, ref in refs.items()
    }


def _point(row, s: CompressSummary) -> dict[str, Any]:
    measured, source = s.compressed or Measurement(), s.source or Measurement()
    score, source_score = number(measured.score), number(source.score)
    retention = number(s.retention)
    if retention is None and score is not None and source_score:
        retention = score / source_score
    method = s.method or "-"
    return {
        "id": row.id,
        "job_id": row.job_id,
        "mlflow_run_id": row.mlflow_run_id,
        "sweep_id": row.sweep_id,
        "method": method,
        "source": s.source_ref or "-",
        "task": s.task or "-",
        "score": score,
        "params": number(measured.params),
        "size_bytes": number(measured.size_bytes),
        "latency_ms": number(measured.latency_ms),
        "flops": number(measured.flops),
        "source_score": source_score,
        "retention": retention,
        "size_ratio": number(s.size_ratio),
        "speedup": number((s.speedup or {}).get(s.headline_latency or "")),
        "control_score": number(s.control_score),
        "measured": _settings(s),
        # a method that trained after compressing: retention against its control, or the mark
        # that its retention mixes compression with extra training (no control was trained)
        "retention_vs_control": number(s.retention_vs_control),
        "with_extra_training": s.retention_with_extra_training,
        "config": s.config,
        "changed": changed_settings(method, s.config),
        "seed": s.seed,
        "run_dir": s.run_dir,
    }


def compression_view(
    session: Session,
    *,
    task: str | None = None,
    sweep_id: str | None = None,
    tags: dict[str, str] | None = None,
    study_id: str | None = None,
) -> dict[str, Any]:
    if study_id is not None:
        # Its trials' results carry the study's id as a tag (a job's tags travel to its results row).
        tags = {**(tags or {}), "study_id": study_id}
        front = study_front(session, study_id)  # NotFoundError first; never cached: trials are told later
    key = ("compression", task, sweep_id, tuple(sorted((tags or {}).items())))
    # attack rows too: a new attack result changes the robustness axis
    view = cached_view(session, (KIND, ATTACK_KIND), key, lambda: _compression(session, task, sweep_id, tags))
    return view if study_id is None else _with_study(view, front)


def study_front(session: Session, study_id: str) -> dict[str, Any]:
    """A study's objectives and its Pareto-optimal trials (number, job, values)."""
    from ptmlab.studies import study_status
    from ptmlab.studies.spec import stored_spec

    status = study_status(session, study_id, url=session.get_bind().url.render_as_string(hide_password=False))
    spec = stored_spec(status["spec"])
    trials = status["trials"]
    return {
        "id": status["id"],
        "name": status["name"],
        "status": status["status"],
        "stage": spec.stage,
        "objectives": spec.objectives or [spec.objective],
        "directions": spec.directions or [spec.direction],
        "trials": {t["job_id"]: t["number"] for t in trials if t["job_id"] is not None},
        "pareto_trials": [
            {"number": t["number"], "job_id": t["job_id"], "values": t.get("values")} for t in trials if t.get("pareto")
        ],
    }


def _with_study(view: dict[str, Any], front: dict[str, Any]) -> dict[str, Any]:
    """The cached view with the study's marks on new point dicts (the cached ones stay as they are)."""
    on_front = {t["job_id"] for t in front["pareto_trials"]}
    points = [
        {**p, "trial": front["trials"].get(p["job_id"]), "study_pareto": p["job_id"] in on_front}
        for p in view["points"]
    ]
    study = {k: v for k, v in front.items() if k != "trials"}
    return {**view, "points": points, "study": study, "filters": {**view["filters"], "study": front["id"]}}


def _front_add(front: dict, pid: int, x: float | None, y: float | None) -> list:
    """Put a new point on a Pareto front (`front`: id -> (x, y), smaller x and larger y better)
    if nothing on it dominates the point; returns the ids it pushed off. A point off the front is
    dominated by one on it, so the front alone decides: what `pareto_front` over every point gives."""
    if x is None or y is None:
        return []
    if any(qx <= x and qy >= y and (qx < x or qy > y) for qx, qy in front.values()):
        return []
    gone = [q for q, (qx, qy) in front.items() if x <= qx and y >= qy and (x < qx or y > qy)]
    for q in gone:
        del front[q]
    front[pid] = (x, y)
    return gone


class _TaskPoints:
    """One task's points, references and Pareto fronts, and each point's finished dict and JSON."""

    def __init__(self) -> None:
        self.points: list[dict] = []  # as `_point` made them (never changed: `finished` copies)
        self.place: dict[int, int] = {}  # point id -> its index in `points`
        self.references: dict[str, dict] = {}
        self.fronts: dict[str, dict] = {axis: {} for axis in AXES}
        self.methods: set[str] = set()
        self.sources: set[str] = set()
        self.shown: list[dict] = []  # each point as shown, in `points` order
        self.texts: list[bytes] = []  # and its JSON
        self.dirty: set[int] = set()  # points whose dict must be made again
        self.context: str | None = None  # what every point's dict depends on besides itself
        self.metrics: Counter = Counter()  # main metrics of the task's rows: the score axis is the commonest

    def add(self, row, s: CompressSummary, task: str) -> None:
        if s.main_metric:
            self.metrics[s.main_metric] += 1
        p = _point(row, s)
        if p["method"].lower() in UNCOMPRESSED_METHODS:
            self.references[p["source"]] = {**p, "from": "run"}
            return
        self.place[p["id"]] = len(self.points)
        self.points.append(p)
        self.shown.append(p)
        self.texts.append(b"")
        self.methods.add(p["method"])
        self.sources.add(p["source"])
        self.dirty.add(p["id"])
        for axis, front in self.fronts.items():
            self.dirty.update(_front_add(front, p["id"], number(p.get(axis)), number(p.get("score"))))
        source = s.source or Measurement()
        if p["source"] not in self.references and any(
            v is not None for v in (source.params, source.size_bytes, source.latency_ms)
        ):
            self.references[p["source"]] = {
                "id": None,
                "method": "uncompressed",
                "source": p["source"],
                "task": task,
                "from": "summary",
                "score": p["source_score"],
                "params": number(source.params),
                "size_bytes": number(source.size_bytes),
                "latency_ms": number(source.latency_ms),
                "flops": number(source.flops),
                "mlflow_run_id": s.source_run,
            }

    def finish(self, labels: dict[str, str], attacks: dict) -> tuple[list[dict], list[bytes]]:
        """Every point as shown (retention against a measured reference, source label, attack
        results, Pareto marks) with its JSON; made again only for a new point, one whose Pareto
        mark changed, or all of them when a reference, a label or an attack result changed."""
        context = dumps([{k: r["score"] for k, r in self.references.items()}, labels, attacks])
        if context != self.context:
            self.context, self.dirty = context, set(self.place)
        for pid in self.dirty:
            p = dict(self.points[self.place[pid]])
            ref = self.references.get(p["source"])
            # Retention against a measured reference when the summary did not carry the source score.
            if p["retention"] is None and ref and ref["score"] and p["score"] is not None:
                p["source_score"], p["retention"] = ref["score"], p["score"] / ref["score"]
            p["source_label"] = labels.get(p["source"], p["source"])
            keys = [f"job:{p['job_id']}"] if p["job_id"] is not None else []
            keys += [model_ref(p["run_dir"])] if p.get("run_dir") else []
            p["robustness"] = next((attacks[k] for k in keys if k in attacks), {})
            p["pareto"] = {axis: pid in front for axis, front in self.fronts.items()}
            self.shown[self.place[pid]], self.texts[self.place[pid]] = p, encode(p)
        self.dirty = set()
        return list(self.shown), list(self.texts)


class CompressionFold:
    """The view's points per task kept up to date as compress results arrive (ptmlab.results
    `folded`): a new result is one more point, checked against the Pareto fronts alone."""

    def __init__(self) -> None:
        self.tasks: dict[str, _TaskPoints] = {}
        self.result_count = 0

    def add(self, rows: list) -> None:
        for row in rows:
            self.result_count += 1
            summary = row.model  # rows stored before the measurements were nested read in the same shape
            if not isinstance(summary, CompressSummary):
                continue  # not a compress summary (a field of the wrong type): nothing to plot
            task = summary.task or "-"
            self.tasks.setdefault(task, _TaskPoints()).add(row, summary, task)


def _compression(
    session: Session, task: str | None, sweep_id: str | None, tags: dict[str, str] | None
) -> dict[str, Any]:
    fold, lock = folded(
        session, KIND, ("compression",), CompressionFold, CompressionFold.add, sweep_id=sweep_id, tags=tags
    )
    attacks = attacks_by_model(session)
    with lock:
        tasks = sorted(fold.tasks)
        if task is None and tasks:
            task = tasks[0]  # one task at a time: scores of different tasks do not compare
        one = fold.tasks.get(task) or _TaskPoints()
        references = {k: dict(r) for k, r in one.references.items()}
        labels = source_labels(session, one.sources | set(references))
        points, texts = one.finish(labels, attacks)
        # each front by its x, ties in point order (as a stable sort of the points)
        fronts = {
            axis: [pid for _, _, pid in sorted((x, one.place[pid], pid) for pid, (x, _) in front.items())]
            for axis, front in one.fronts.items()
        }
        methods, result_count = sorted(one.methods), fold.result_count
        axis = metric_axis(one.metrics.most_common(1)[0][0] if one.metrics else None)
    for r in references.values():
        r["source_label"] = labels.get(r["source"], r["source"])
    recipes, robustness_fronts, missing = _robustness_axis(points, list(references.values()), attacks)
    return {
        "task": task,
        "tasks": tasks,
        "axes": [{"key": k, "label": v} for k, v in AXES.items()],
        **axis,
        "methods": methods,
        "points": EncodedList(points, texts),
        "references": list(references.values()),
        "fronts": fronts,
        "recipes": recipes,
        "robustness_fronts": robustness_fronts,
        "robustness_missing": missing,
        "result_count": result_count,
        "options": filter_options(session, KIND),
        "filters": {"sweep_id": sweep_id, "tags": dict(tags or {})},
    }


def _robustness_axis(points: list[dict], references: list[dict], attacks: dict) -> tuple[list, dict, dict]:
    """Each reference's attack results by recipe (`robustness`; the points have theirs); per recipe
    and x axis the Pareto front of accuracy under attack; per recipe how many models have no attack result."""
    for r in references:
        r["robustness"] = attacks.get(model_ref(r["source"]), {})
    models = [*points, *references]
    # no attack results: no model has any (the common case, and no walk over 25,000 points)
    recipes = sorted({recipe for m in models for recipe in m["robustness"]}) if attacks else []
    fronts: dict[str, dict[str, list]] = {}
    for recipe in recipes:
        under = [
            {
                "id": p["id"],
                **{a: p[a] for a in AXES},
                "y": p["robustness"].get(recipe, {}).get("accuracy_under_attack"),
            }
            for p in points
        ]
        fronts[recipe] = {}
        for axis in AXES:
            front = pareto_front(under, axis, "y")
            fronts[recipe][axis] = [
                p["id"] for p in sorted((p for p in under if p["id"] in front), key=lambda p: p[axis])
            ]
    missing = {recipe: sum(recipe not in m["robustness"] for m in models) for recipe in recipes}
    return recipes, fronts, missing
