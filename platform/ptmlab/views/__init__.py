"""The dashboard's view models: torch-free queries and aggregations behind `/api/v1/views/...`.

Every view reads the platform's `results` table (never MLflow), so it stays fast at tens of
thousands of runs; only the run-detail/comparison curves come from MLflow's metric history.

    leaderboard_view(session, *, sweep_id=None, tags=None, group_by=..., adaptations=None) -> dict
                                                     (ptmlab.leaderboard; rows with their footprint)
    leaderboard_export(session, fmt, ...) -> str                                     csv | latex
    leaderboard_compare(session, label_a, label_b, ...) -> dict   two rows over seeds (ptmlab.stats)
    compression_view(session, *, task=None, sweep_id=None, tags=None) -> dict        points, Pareto fronts
    pareto_front(points, x, y="score") -> set of point ids                           lower x, higher y
    probing_view(session, *, sweep_id=None, tags=None) -> dict                       per-layer curves, heatmaps
    robustness_view(session, *, pipeline_id=None, task=None, ...) -> dict            attacked models × recipes
    compare_view(session, result_ids) -> dict                                        configs side by side
    metric_curves(session, result_ids, keys=None) -> dict                            MLflow metric history
    overview_view(session) -> dict                                                   counts, recent results
    prediction_samples_view(session, job_id, split, limit, offset) -> dict           a fine-tune's predictions, a page

Summary formats read here (the `summary` JSON of a results row; the keys every stage writes —
stage, mlflow_run_id, run_dir, seed, wall_time_s — are assumed):

finetune (written by the finetune stage; grouped by ptmlab.leaderboard):
    model, objective, adaptation, task, metrics {name: value}, main_score, ...

compress (one row per compressed model; ptmlab.contracts.summaries.CompressSummary):
    {"stage": "compress",
     "method": "prune_magnitude",       # a conf/compression option; one colour per method
     "source_ref": "job:12",            # what was compressed (labelled by its job when it is one)
     "task": "sst2",                    # the task `score` is measured on (scores of different
                                        # tasks never share a chart or a Pareto front)
     "compressed": {                    # the compressed model measured (a Measurement):
        "score": 0.871,                 #   the task's main score (0-1)
        "params": 3_800_000,            #   parameters (non-zero ones for pruning)
        "size_bytes": 14_000_000,       #   on-disk size of the saved model
        "latency_ms": 4.2},             #   measured inference latency per batch
     "source": {"score": 0.902, ...},   # optional: the uncompressed model, the same Measurement:
                                        # retention = score/source score, the reference point drawn
     "config": {"sparsity": 0.5},       # optional: the method's settings, shown on hover
     "source_run": "<mlflow run id>"}   # optional: the uncompressed model's run
    Rows stored in the earlier flat shape (`score`, `source_score`, ..., `source` the reference)
    read the same (`lift_flat_measurements`).
    A row with method "none" is the uncompressed source itself (a reference point, not part of
    the Pareto front), for stages that measure the source in a run of its own.

probe (one row per probed model and probe task):
    {"stage": "probe",
     "model": "bert_tiny",              # display label of what was probed; runs that should be
                                        # overlaid (trained vs random-init, before/after
                                        # compression) differ here, e.g. "bert_tiny (random)"
     "probe_task": "pos",               # the probe suite's task (pos, dep_arc, structural, ...)
     "layers": [                        # one entry per layer, embedding layer = 0; keys optional
        {"layer": 0, "accuracy": 0.71, "control_accuracy": 0.55, "selectivity": 0.16,
         "uuas": 0.52, "spearman": 0.61}, ...],
     "attention_heads": {"statistic": "entropy",        # optional; a list of such objects for
                         "values": [[...], ...]}}       # several statistics; values[layer][head]
    Selectivity (Hewitt & Liang 2019) = accuracy - control_accuracy; computed here when a layer
    has both and omits it. Several runs (seeds) of one model × probe task are averaged per layer.
"""

from ptmlab.views.compare import compare_view, metric_curves
from ptmlab.views.compression import compression_view, pareto_front
from ptmlab.views.leaderboard import leaderboard_compare, leaderboard_export, leaderboard_view
from ptmlab.views.overview import overview_view
from ptmlab.views.probing import probing_view
from ptmlab.views.robustness import robustness_view
from ptmlab.views.runs import runs_view

__all__ = [
    "compare_view",
    "compression_view",
    "leaderboard_compare",
    "leaderboard_export",
    "leaderboard_view",
    "metric_curves",
    "overview_view",
    "pareto_front",
    "probing_view",
    "robustness_view",
    "runs_view",
]
