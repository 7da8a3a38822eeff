"""What the controller's informer cache holds per object, against the object's JSON size.

``python -m benchmarks.informer_memory KUBECONFIG``: in a fresh process with ``tracemalloc`` on, one
informer per resource type the controller caches in bulk (GenericJobs; pods, owner-indexed as the
controller's children informer is) lists and syncs; the memory still traced once it is synced, divided by
the objects cached, is the cost of one cached object (dicts, strings and index entries, the watch's own
buffers included). The JSON size is that of each cached object re-encoded compactly. Prints one JSON line.
"""

from __future__ import annotations

import asyncio
import gc
import json
import sys
import tracemalloc
from typing import Any

from t9k_provider.jobs import API_VERSION, KINDS
from t9k_provider.kube.api import KubeApi, api_client
from t9k_provider.kube.informer import OWNER_INDEX, Informer, by_owner
from t9k_provider.kube.resources import PODS, ResourceType

TYPES: dict[str, tuple[ResourceType, dict[str, Any]]] = {
    "GenericJob": (ResourceType(API_VERSION, "GenericJob", KINDS["GenericJob"].PLURAL), {}),
    "Pod": (PODS, {"indexers": {OWNER_INDEX: by_owner}}),
}


async def measure(kubeconfig: str) -> dict[str, dict[str, float]]:
    client = await api_client(kubeconfig)
    results: dict[str, dict[str, float]] = {}
    kept: list[Informer] = []
    tasks: list[asyncio.Task[None]] = []
    async with client:
        api = KubeApi(client)
        for kind, (rt, options) in TYPES.items():
            gc.collect()
            before = tracemalloc.get_traced_memory()[0]
            informer = Informer(api, rt, **options)
            tasks.append(asyncio.create_task(informer.run()))
            await asyncio.wait_for(informer.synced.wait(), 600)
            await asyncio.sleep(1.0)  # the watch is open: its buffers count too
            gc.collect()
            traced = tracemalloc.get_traced_memory()[0] - before
            items = informer.items()
            encoded = sum(len(json.dumps(obj, separators=(",", ":"))) for obj in items)
            results[kind] = {
                "objects": len(items),
                "bytes_per_object": traced / max(1, len(items)),
                "json_bytes_per_object": encoded / max(1, len(items)),
            }
            kept.append(informer)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return results


def main() -> None:
    tracemalloc.start()
    print(json.dumps(asyncio.run(measure(sys.argv[1]))), flush=True)


if __name__ == "__main__":
    main()
