-- The official postgres image runs this once, on an empty data volume: MLflow's backend store
-- lives next to the platform database, in the same server.
CREATE DATABASE mlflow OWNER ptmlab;
