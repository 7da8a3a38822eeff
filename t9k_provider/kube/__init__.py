"""The Kubernetes API client and list+watch machinery shared by the controller and the local node agents.

It imports nothing from Airflow, the controller or the local cluster, so both install it from the base
dependencies alone.
"""
