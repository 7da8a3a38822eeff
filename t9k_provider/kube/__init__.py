"""The async Kubernetes API client and list+watch machinery of the controller, the local node agents and the
Airflow triggers.

It imports nothing from Airflow, the controller or the local cluster, so the controller and the local cluster
install it from the base dependencies alone.
"""
