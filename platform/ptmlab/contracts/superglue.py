"""SuperGLUE's task table (torch-free, shared); the leaderboard's benchmarks (this one among them)
are ptmlab.contracts.benchmarks.

A task's SuperGLUE score is the mean of its metrics as the official leaderboard shows them (CB:
accuracy and macro-F1; MultiRC: F1a and exact match); the SuperGLUE average is the unweighted mean
of the task scores present. ReCoRD and the diagnostics (AX-b, AX-g) are not in ptmlab's data, so a
ptmlab average is over at most these seven tasks (the count is always shown beside it). Task names
are the `name` of conf/task/superglue/*.yaml; RTE is `superglue_rte`, apart from GLUE's `rte`
(different training data) so each run counts in one benchmark only.
"""

from __future__ import annotations

# task -> (display name, the metrics whose mean is its score). Kept in step with
# conf/task/superglue/*.yaml `superglue_metrics` (tests/lightning_modules/test_superglue.py checks it).
# COPA (a multiple-choice task, accuracy) counts once its runs exist.
SUPERGLUE_TASKS: dict[str, tuple[str, tuple[str, ...]]] = {
    "boolq": ("BoolQ", ("accuracy",)),
    "cb": ("CB", ("accuracy", "macro_f1")),
    "copa": ("COPA", ("accuracy",)),
    "multirc": ("MultiRC", ("f1a", "exact_match")),
    "superglue_rte": ("RTE", ("accuracy",)),
    "wic": ("WiC", ("accuracy",)),
    "wsc": ("WSC", ("accuracy",)),
}
