"""The JSON of every /api/v1/views route (ptmlab.views builds it), one module per view: the routes'
`response_model`s. Most routes send pre-encoded bytes FastAPI does not validate, so
tests/platform/test_view_models.py validates every view against its model (an undeclared key fails)."""

from ptmlab.api.view_models.compare import CompareOut, CurvesOut
from ptmlab.api.view_models.compression import CompressionOut
from ptmlab.api.view_models.drift import DriftSourcesOut, ProbeDriftOut
from ptmlab.api.view_models.jobs import JobViewOut
from ptmlab.api.view_models.leaderboard import LeaderboardCompareOut, LeaderboardOut
from ptmlab.api.view_models.overview import OverviewOut
from ptmlab.api.view_models.probing import ProbingOut
from ptmlab.api.view_models.robustness import RobustnessOut
from ptmlab.api.view_models.runs import RunsOut
from ptmlab.api.view_models.study import StudyViewOut
from ptmlab.api.view_models.sweep import SweepViewOut

__all__ = [
    "CompareOut",
    "CompressionOut",
    "CurvesOut",
    "DriftSourcesOut",
    "JobViewOut",
    "LeaderboardCompareOut",
    "LeaderboardOut",
    "OverviewOut",
    "ProbeDriftOut",
    "ProbingOut",
    "RobustnessOut",
    "RunsOut",
    "StudyViewOut",
    "SweepViewOut",
]
