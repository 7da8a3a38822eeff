"""Airflow hooks for T9k Jobs.

The hook lives in ``t9k_provider.hooks.t9k``; this package stays import-free so that modules such as
``t9k_provider.hooks.job_status`` can be used without loading the Kubernetes clients.
"""
