"""The async Kubernetes API client and list+watch machinery of the controller, the local node agents and the
Airflow triggers, and the RFC 3339 timestamps (``timestamps``) and resumable log reads (``podlogs``) all of
them and the hooks share.

It imports nothing from Airflow, the controller or the local cluster, so the controller and the local cluster
install it from the base dependencies alone.
"""
