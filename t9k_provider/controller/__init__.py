"""The T9k Job controller: the pure decision (`reconcile` over `engine` and `kinds`) and the runtime (I/O).

Nothing under this package imports Airflow: the controller image installs without it.
"""
