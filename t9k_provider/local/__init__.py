"""The embedded local cluster: a Kubernetes-compatible API server on SQLite and a process kubelet.

Run it with the ``t9k-local`` CLI (:mod:`t9k_provider.local.cli`) or, in tests, with
:class:`t9k_provider.testing.LocalCluster`. See docs/local-cluster.md. Nothing here imports Airflow.
"""
