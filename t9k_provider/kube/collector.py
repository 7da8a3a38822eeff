"""The cyclic garbage collector's pace in the long-running API clients and servers (the controller, the
local cluster's API server and node agents).

Their heaps are mostly the informers' caches: plain JSON dicts and strings, freed by reference counting as
objects change, which the cyclic collector scans without finding anything to free. Python starts a full
collection when the objects that survived into the oldest generation since the last one exceed a quarter of
those counted there, so the fewer long-lived objects a process holds, the more often it scans its caches.
When these processes stopped importing ``kubernetes_asyncio`` (its thousands of generated classes had
counted there), a burst of 200 jobs reached all its pods later (p99 1.19 s against 0.79 s, run side by side
from the commit before) and its components used 20-40 % more CPU; with that import added back as mere
weight the p99 was 1.07 s, and with young and full collections ten times rarer than Python's defaults
0.82 s (docs/benchmarks.md#2-controller-latency-and-scale; one run of three bursts each, so the CPU
figures, whose spread is wider, are not settled). The cycles that do occur (an exception's traceback, a
cancelled task) are still freed, mostly young.
"""

from __future__ import annotations

import gc

#: Allocations before a young collection, young collections before a middle one, middle before a full one:
#: ten times Python's defaults (700, 10, 10) for the first and the last.
SERVER_THRESHOLDS = (7_000, 10, 100)


def pace_for_a_server() -> None:
    """Set the collector's thresholds for a process that holds caches for its life."""
    gc.set_threshold(*SERVER_THRESHOLDS)
