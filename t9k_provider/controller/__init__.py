"""The T9k Job controller: a pure engine (`engine`), one compiler per kind (`kinds`) and the runtime (I/O).

Nothing under this package imports Airflow: the controller image installs without it.
"""
