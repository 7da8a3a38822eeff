"""Benchmarks of issues 7, 14 and 16: what a job costs the cluster and the scheduler, measured side by side.

``make bench`` (``python -m benchmarks``) runs all but the heavy ones (``run.OPT_IN``) and rewrites
``docs/benchmarks.md``.
"""
