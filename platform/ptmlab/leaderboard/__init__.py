"""The GLUE leaderboard: `grouping` (results rows -> a `Leaderboard`: configurations × tasks, mean
± std over seeds, the footprint, the A/B comparison of two rows) and `rendering` (the board as a
plain-text table, CSV or LaTeX). Rows come from the one results store, `ptmlab.results`
(`load_rows` in the API and the dashboard, `read_rows` in the `ptmlab results` commands)."""

from ptmlab.leaderboard.grouping import (
    DEFAULT_GROUP_BY,
    GLUE_TASKS,
    LEADERBOARD_KINDS,
    METRIC_ABBREV,
    MISSING,
    Footprint,
    Leaderboard,
    LeaderboardRow,
    Stat,
    TaskCell,
    TaskRun,
    build_leaderboard,
    compare_rows,
    count_text,
    parse_adaptation_filter,
    per_seed_glue_average,
    percent_text,
    r_label,
    run_identity,
    task_runs,
)
from ptmlab.leaderboard.rendering import FORMATS, latex_text, render, render_csv, render_latex, render_table

__all__ = [
    "DEFAULT_GROUP_BY",
    "FORMATS",
    "GLUE_TASKS",
    "LEADERBOARD_KINDS",
    "METRIC_ABBREV",
    "MISSING",
    "Footprint",
    "Leaderboard",
    "LeaderboardRow",
    "Stat",
    "TaskCell",
    "TaskRun",
    "build_leaderboard",
    "compare_rows",
    "count_text",
    "latex_text",
    "parse_adaptation_filter",
    "per_seed_glue_average",
    "percent_text",
    "r_label",
    "render",
    "render_csv",
    "render_latex",
    "render_table",
    "run_identity",
    "task_runs",
]
