"""Benchmarks: what a job costs the cluster and the scheduler, measured side by side (docs/benchmarks.md).

``make bench`` (``python -m benchmarks``) runs all but the heavy ones (``run.OPT_IN``) and rewrites
``docs/benchmarks.md``.
"""
