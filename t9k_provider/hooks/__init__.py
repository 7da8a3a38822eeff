"""Airflow hooks for T9k Jobs: ``t9k.T9kHook`` (the worker's client, from an Airflow connection),
``async_t9k.AsyncT9kClient`` (the triggers' shared client) and ``errors`` (how an API failure ends a task).
Import-free, so that importing a submodule loads no Kubernetes client it does not need."""
