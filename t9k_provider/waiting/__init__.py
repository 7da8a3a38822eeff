"""How a task waits for its job, in the worker and in the triggerer alike: the job's status read as an
outcome (`status`), the wait's limits (`limits`), the one decision each look at the job ends in (`step`), and
why a pending job waits (`notes`). Pure and import-free: no Airflow, no Kubernetes client."""
