"""Importing the provider's API client without paying the garbage collector for it.

In a process that already holds Airflow's heap (a task process, ``dag.test()``, the triggerer), a large
import runs the cyclic collector's full collections over that whole heap meanwhile and right after. When the
hook still imported the generated Kubernetes clients (about a thousand modules each), that cost the first T9k
task of a ``dag.test()`` up to 0.6 s
(docs/benchmarks.md#7-per-task-overhead-against-the-cncf-kubernetes-operators).
What such an import builds lives as long as the process, so none of those collections could free any of it;
the client is now ``t9k_provider.kube`` on aiohttp (about 80 modules), imported under the same guard.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_spared(module: str) -> Iterator[None]:
    """Runs the block, the first import of ``module``, with the collector paused, then moves what the process
    holds into the permanent generation (``gc.freeze``, after a young collection frees the young garbage), so
    no later collection scans it again; a block whose ``module`` is already imported runs as it is."""
    if module in sys.modules:
        yield
        return
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.collect(1)
        gc.freeze()
        if enabled:
            gc.enable()
