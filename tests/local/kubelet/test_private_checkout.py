"""A container that runs as another user reaches what it needs of the host from a private checkout (a clone
under a 0700 directory, as `mktemp -d` and many home directories are), and is refused, naming the path and
the fix, where that user could not read it at all."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kubernetes import client

from t9k_provider.testing import wait_for
from tests.support.builders import make_container, make_pod
from tests.support.clusters import ClusterFactory
from tests.support.pods import container_state, pod_log, terminated

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(os.geteuid() != 0, reason="changing a process's credentials needs root"),
]


def _private_package(tmp_path: Path) -> Path:
    """``<tmp>/private`` (0700, root's) holding ``checkout/probe_pkg``, as a checkout's package would be."""
    private = tmp_path / "private"
    package = private / "checkout" / "probe_pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("WHERE = __file__\n")
    for path in (package, package.parent):
        path.chmod(0o755)
    (package / "__init__.py").chmod(0o644)
    private.chmod(0o700)
    return package.parent


def test_a_run_as_user_container_imports_from_a_checkout_under_a_private_directory(
    cluster_factory: ClusterFactory, tmp_path: Path
) -> None:
    """The kubelet's import path holds a directory only root may reach: a container running as uid 1000
    imports from it (the kubelet lays a read-only view of it over the private ancestor, in the container's
    mount namespace only), and the directory stays closed to everyone else on the host. Once the checkout
    itself is unreadable for that uid, the next container is refused with CreateContainerConfigError and an
    event naming the directory and the fix, instead of dying with an ImportError."""
    checkout = _private_package(tmp_path)
    cluster = cluster_factory(env={"PYTHONPATH": str(checkout)})
    core = client.CoreV1Api(cluster.api_client())
    ns = "private-checkout"
    core.create_namespace({"metadata": {"name": ns}})
    env = [{"name": "PYTHONPATH", "value": str(checkout)}]
    probe = "import os, probe_pkg; print(os.getuid(), probe_pkg.WHERE)"
    pod = make_pod("reader", make_container(py=probe, env=env), securityContext={"runAsUser": 1000})
    core.create_namespaced_pod(ns, pod)
    done = wait_for("reader ended", lambda: terminated(core, "reader", ns))
    log = pod_log(core, "reader", ns)
    assert done.exit_code == 0, log
    assert log.strip() == f"1000 {checkout / 'probe_pkg' / '__init__.py'}"
    assert (tmp_path / "private").stat().st_mode & 0o777 == 0o700  # nothing opened on the host

    checkout.chmod(0o700)  # a checkout made with umask 077: the uid cannot read it, whatever is laid over it
    refused_pod = make_pod("refused", make_container(py=probe, env=env), securityContext={"runAsUser": 1000})
    core.create_namespaced_pod(ns, refused_pod)

    def refused() -> client.V1ContainerStateWaiting | None:
        state = container_state(core, "refused", ns)
        waiting = state.waiting if state is not None else None
        return waiting if waiting is not None and waiting.reason == "CreateContainerConfigError" else None

    waiting = wait_for("the container refused", refused)
    assert f"cannot read {checkout} (mode 0700, owner uid 0)" in waiting.message
    assert f"chmod -R go+rX {checkout}" in waiting.message and "runs as uid 1000" in waiting.message
    events = core.list_namespaced_event(ns, field_selector="involvedObject.name=refused").items
    assert any(str(checkout) in (e.message or "") and e.type == "Warning" for e in events), events
