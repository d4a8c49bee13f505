"""`hydra/launcher=ptmlab`: a Hydra multirun becomes one sweep of queued ptmlab jobs.

    python -m ptmlab.run -m hydra/launcher=ptmlab model=bert_tiny,gpt_tiny objective=mlm,clm

Hydra finds this package by scanning the `hydra_plugins` namespace (platform/hydra_plugins has no
__init__.py on purpose). Importing it stays light: Hydra scans plugins on every run, jobs included.
"""
