"""The science half of ptmlab: everything a job computes (models, objectives, tasks,
adaptation, compression, probing, data, and the Lightning stages). Knows nothing of queues,
HTTP or the database. Importing this package imports no torch; the submodules do."""
