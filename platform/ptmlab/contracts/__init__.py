"""The one torch-free leaf both halves import: the error hierarchy and the typed stage summaries.

`lightning_modules` may import `ptmlab.contracts` and nothing else of ptmlab (a test walks its
imports); this package imports nothing else of ptmlab either.
"""

from ptmlab.contracts.errors import *  # noqa: F403 - the one error hierarchy, re-exported whole
from ptmlab.contracts.errors import __all__ as _errors
from ptmlab.contracts.summaries import (
    ATTACK_RECORDS_FILE,
    SUMMARY_BY_KIND,
    AttackSummary,
    CompressSummary,
    FinetuneSummary,
    PretrainSummary,
    ProbeSummary,
    SleepSummary,
    StageSummary,
    validate_summary,
)

__all__ = [
    *_errors,
    "ATTACK_RECORDS_FILE",
    "SUMMARY_BY_KIND",
    "AttackSummary",
    "CompressSummary",
    "FinetuneSummary",
    "PretrainSummary",
    "ProbeSummary",
    "SleepSummary",
    "StageSummary",
    "validate_summary",
]
