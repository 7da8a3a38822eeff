"""Where the local Flink comes from: a Java runtime and a Flink distribution on this machine.

Pods run host programs, so the host is the Flink image: `java` (``$JAVA_HOME/bin/java`` first) and the jars of
``$FLINK_HOME`` or, by default, of the ``apache-flink-libraries`` wheel (``pyflink/lib``, no PyFlink needed).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

JAVA_HINT = "install a Java 11+ runtime, e.g. `apt-get install openjdk-17-jre-headless` (`make env` does)"
FLINK_HINT = (
    "install the Flink jars: `pip install apache-flink-libraries==2.3.0` (`make env` does), or set FLINK_HOME"
)


def java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(Path(home) / "bin" / "java", os.X_OK):
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


def _has_dist(home: Path) -> bool:
    return any((home / "lib").glob("flink-dist*.jar"))


def flink_home() -> Path | None:
    """``$FLINK_HOME`` when set (it must hold ``lib/flink-dist*.jar``), else apache-flink-libraries' jars."""
    configured = os.environ.get("FLINK_HOME")
    if configured:
        return Path(configured) if _has_dist(Path(configured)) else None
    spec = importlib.util.find_spec("pyflink")
    for location in (spec.submodule_search_locations or []) if spec else []:
        if _has_dist(Path(location)):
            return Path(location)
    return None


def missing_prerequisites() -> str | None:
    """What to install before a FlinkCluster can run here, or None when nothing is missing."""
    problems = []
    if java() is None:
        problems.append(f"java not found ({JAVA_HINT})")
    if flink_home() is None:
        where = (
            f"FLINK_HOME={os.environ['FLINK_HOME']} has no lib/flink-dist*.jar"
            if os.environ.get("FLINK_HOME")
            else "no Flink distribution found"
        )
        problems.append(f"{where} ({FLINK_HINT})")
    return "; ".join(problems) or None


def host_env() -> dict[str, str]:
    """What a Flink pod needs to find this machine's Flink and Java (pods do not inherit our environment)."""
    env = {"FLINK_HOME": str(flink_home())}
    if os.environ.get("JAVA_HOME"):
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    return env
