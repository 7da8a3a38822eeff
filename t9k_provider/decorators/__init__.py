"""TaskFlow for T9k Jobs: ``@task.t9k``, ``@task.t9k_pytorch``, ``@task.t9k_tensorflow``,
``@task.t9k_xgboost`` and ``@task.t9k_deepspeed`` (``tasks``) run a Python function as a T9k Job.

``source`` checks and extracts what is shipped, ``transport`` carries the call in and the result out,
``runner`` is the program the replicas run, ``manifests`` builds each kind's job, ``operator`` ties them
to the kind's operator.
"""
