"""Run the Kubernetes clients' own e2e suites, unmodified, against fresh local clusters; classify failures.

The suites are kubernetes-client/python's `kubernetes/e2e_test/` and kubernetes_asyncio's
`kubernetes_asyncio/e2e_test/`. Nothing is fetched: pass the directory that holds each one (a checkout, or
`git archive <tag> kubernetes/e2e_test | tar -x -C DIR`), at the tag matching the installed client. Each suite
runs in a child pytest against its own fresh `t9k-local` (node agents, no T9k controller), found through
`KUBECONFIG` as the suites' `base.py` finds a cluster; the suites import themselves as `<client>.e2e_test`,
so the child appends the directory to the installed client package's `__path__` (no file of theirs changes).

A failed test is classified as:
- (a) image: a pod the test created waits in `CreateContainerError` because it names no `command`; the local
  kubelet runs `command` as a host process and cannot know the image's ENTRYPOINT/CMD (busybox with `args`
  only, nginx with neither);
- unclassified otherwise: a local-server gap or bug until shown otherwise (or a newer client's need, which
  can only be judged by reading the failure). Any unclassified failure makes the exit status 1.

    .venv/bin/python scripts/client_e2e.py --python DIR --asyncio DIR [--timeout 60]

Logs (each suite's pytest output, the clusters' state directories) stay under a printed temporary directory.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from t9k_provider.testing import LocalCluster

SUITES = {"python": "kubernetes", "asyncio": "kubernetes_asyncio"}  # option -> the client package


@dataclass
class Outcome:
    nodeid: str
    outcome: str  # passed, failed, skipped
    message: str = ""
    cls: str = ""  # a failure's class: "a" or "" (unclassified)


class _Recorder:
    """pytest plugin of the child: each test's outcome; a failure's class is read from the cluster's pods."""

    def __init__(self) -> None:
        self.outcomes: dict[str, Outcome] = {}
        self._started = datetime.now(timezone.utc)
        self._core = client.CoreV1Api(config.new_client_from_config(os.environ["KUBECONFIG"]))

    def pytest_runtest_logstart(self, nodeid: str, location: object) -> None:
        # creationTimestamp has whole seconds: a pod made in the test's first second still counts
        self._started = datetime.now(timezone.utc).replace(microsecond=0)

    def pytest_runtest_logreport(self, report: Any) -> None:
        known = self.outcomes.get(report.nodeid)
        if known is not None and known.outcome != "passed":
            return  # the first failure or skip (setup, call, teardown) decides
        if report.passed:
            if report.when == "call":
                self.outcomes[report.nodeid] = Outcome(report.nodeid, "passed")
            return
        if report.skipped:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            self.outcomes[report.nodeid] = Outcome(report.nodeid, "skipped", reason)
            return
        crash = getattr(report.longrepr, "reprcrash", None)
        message = (crash.message if crash is not None else str(report.longrepr)).splitlines()[0]
        image_reason = self._pod_without_command()
        self.outcomes[report.nodeid] = Outcome(
            report.nodeid, "failed", image_reason or message, "a" if image_reason else ""
        )

    def _pod_without_command(self) -> str:
        """Why a pod created since the test began cannot start here, if it waits for lack of a command."""
        try:
            pods = self._core.list_pod_for_all_namespaces().items
        except (ApiException, urllib3.exceptions.HTTPError):
            return ""  # a server that no longer answers is no image's fault
        for pod in pods:
            if pod.metadata.creation_timestamp < self._started:
                continue
            waiting = {
                s.name
                for s in pod.status.container_statuses or []
                if s.state.waiting is not None and s.state.waiting.reason == "CreateContainerError"
            }
            for container in pod.spec.containers:
                if container.name in waiting and not container.command:
                    given = "args only" if container.args else "neither command nor args"
                    return (
                        f"pod {pod.metadata.name}: image {container.image} with {given} needs the image's "
                        "ENTRYPOINT/CMD, which the local kubelet does not have"
                    )
        return ""


def _child(package: str, root: Path, report: Path, timeout: int) -> int:
    """Runs one suite in this process and writes its outcomes to ``report``."""
    importlib.import_module(package).__path__.append(str(root / package))
    recorder = _Recorder()
    args = ["-q", "-p", "no:cacheprovider", f"--timeout={timeout}", str(root / package / "e2e_test")]
    code = pytest.main(args, plugins=[recorder])
    report.write_text(json.dumps([vars(o) for o in recorder.outcomes.values()]))
    return int(code)


def _run_suite(package: str, root: Path, work: Path, timeout: int) -> list[Outcome]:
    report, log = work / f"{package}.json", work / f"{package}.log"
    with LocalCluster(work / f"{package}-cluster") as cluster, log.open("w") as out:
        subprocess.run(
            [sys.executable, __file__, "--child", package, str(root), str(report), str(timeout)],
            cwd=root,
            env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        )
    if not report.exists():
        raise SystemExit(f"client_e2e: the {package} suite did not run; see {log}")
    return [Outcome(**o) for o in json.loads(report.read_text())]


def _summary(package: str, outcomes: list[Outcome]) -> list[str]:
    count = {k: sum(o.outcome == k for o in outcomes) for k in ("passed", "failed", "skipped")}
    failed = [o for o in outcomes if o.outcome == "failed"]
    image = sum(o.cls == "a" for o in failed)
    lines = [
        f"{package} {importlib.metadata.version(package)}: {count['passed']} passed, "
        f"{count['failed']} failed ((a) image: {image}, unclassified: {len(failed) - image}), "
        f"{count['skipped']} skipped, of {len(outcomes)}"
    ]
    for o in failed:
        lines.append(f"  FAILED {o.nodeid} [{o.cls or 'unclassified'}] {o.message}")
    for o in outcomes:
        if o.outcome == "skipped":
            lines.append(f"  SKIPPED {o.nodeid}: {o.message}")
    return lines


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        package, root, report, timeout = argv[1:]
        return _child(package, Path(root), Path(report), int(timeout))
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    for option, package in SUITES.items():
        parser.add_argument(f"--{option}", type=Path, metavar="DIR", help=f"holds {package}/e2e_test")
    parser.add_argument("--timeout", type=int, default=60, help="seconds per test (pytest-timeout)")
    args = parser.parse_args(argv)
    roots = {p: getattr(args, o) for o, p in SUITES.items() if getattr(args, o) is not None}
    if not roots:
        parser.error("give --python and/or --asyncio")
    for package, root in roots.items():
        if not (root / package / "e2e_test").is_dir():
            parser.error(f"{root} holds no {package}/e2e_test")
    work = Path(tempfile.mkdtemp(prefix="client-e2e-"))
    unclassified = 0
    for package, root in roots.items():
        outcomes = _run_suite(package, root.resolve(), work, args.timeout)
        print("\n".join(_summary(package, outcomes)), flush=True)
        unclassified += sum(o.outcome == "failed" and not o.cls for o in outcomes)
    print(f"logs: {work}")
    return 1 if unclassified else 0


if __name__ == "__main__":
    sys.exit(main())
