"""Kept so that `from ptmlab.errors import ...` goes on working: the hierarchy lives in
`ptmlab.contracts.errors` (the torch-free leaf both halves import)."""

from ptmlab.contracts.errors import *  # noqa: F403
from ptmlab.contracts.errors import __all__  # noqa: F401
