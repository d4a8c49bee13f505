"""ptmlab: the orchestration half (queue, workers, API, dashboard back end, tracking, CLI).

Importing ptmlab must stay cheap: nothing here imports torch or lightning_modules at import
time, so the API process starts fast and stays small.
"""

__version__ = "0.1.0"
