"""Benchmarks of issue 7: what a job costs the cluster and the scheduler, measured side by side.

``make bench`` (``python -m benchmarks``) runs them all and rewrites ``docs/benchmarks.md``.
"""
