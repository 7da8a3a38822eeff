"""What the figures were measured on: hardware, software versions, load."""

from __future__ import annotations

import functools
import json
import os
import platform
import subprocess
import sys
import time
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

PACKAGES = (
    "t9k-airflow-provider",
    "apache-airflow",
    "apache-airflow-providers-cncf-kubernetes",
    "kubernetes",
    "kubernetes_asyncio",
    "aiohttp",
    "pydantic",
)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) / 2**20
    return 0.0


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def _commit() -> str:
    out = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent
    )
    return out.stdout.strip() or "unknown"


@functools.cache
def cpu_speed() -> float:
    """CPU seconds to JSON-encode and decode a pod-sized object 2,000 times (best of 3): one CPU model name
    stands for hosts of quite different speed here, so runs of different days compare only through this."""
    env = [{"name": f"E{j}", "value": "x" * 20} for j in range(20)]
    containers = [{"name": f"c{i}", "env": env} for i in range(4)]
    pod = {
        "metadata": {"name": "p", "labels": {f"k{i}": f"v{i}" for i in range(20)}},
        "spec": {"containers": containers},
    }
    best = float("inf")
    for _ in range(3):
        began = time.process_time()
        for _ in range(2_000):
            json.loads(json.dumps(pod))
        best = min(best, time.process_time() - began)
    return best


def describe() -> dict[str, str]:
    return {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "CPU": f"{_cpu_model()}, {os.cpu_count()} logical cores",
        "CPU speed": f"{cpu_speed():.2f} CPU s to JSON-encode and decode a pod-sized object 2,000 times",
        "memory": f"{_memory_gib():.1f} GiB",
        "OS": f"{platform.system()} {platform.release()}",
        "Python": sys.version.split()[0],
        "packages": ", ".join(f"{p} {_version(p)}" for p in PACKAGES),
        "commit": _commit(),
    }


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f}"
