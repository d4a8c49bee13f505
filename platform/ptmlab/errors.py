"""Kept so that `from ptmlab.errors import ...` goes on working: the hierarchy lives in
`ptmlab.contracts.errors` (the torch-free leaf both halves import)."""

from ptmlab.contracts.errors import *  # noqa: F403 - the one error hierarchy, re-exported whole
from ptmlab.contracts.errors import __all__  # noqa: F401 - star re-export names the same list
