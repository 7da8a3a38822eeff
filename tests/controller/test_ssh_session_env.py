"""A worker's SSH sessions see its container's environment: the compiled worker commands, run for real.

`colossalai run` (ColossalAIJob) and pdsh (DeepSpeedJob) start every training process in an SSH session, and
sshd gives a session a fresh environment. Here each compiled worker command runs in a subprocess with the
environment Kubernetes gives the container (`valueFrom` resolved by the local kubelet's `podenv`, as on the
local cluster), its in-memory volume played by a temporary directory and sshd by a stand-in that serves one
session as sshd does: a fresh environment, the `-o ForceCommand=` command if one was given (the client's in
`SSH_ORIGINAL_COMMAND`), else the client's, through the login shell with `-c`. The session's command is
shaped like the launchers' (exports, `cd`, the program) and prints the environment the program got.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from t9k_provider.local.kubelet.podenv import PodContext, container_argv, container_env
from tests.controller.engine_sim import Sim, job
from tests.support.builders import make_container, make_template

SSHD = "/usr/sbin/sshd"
#: Every character a shell or a launcher could trip on: quotes, `$`, backquotes, backslashes, pdsh's `%h`,
#: spaces at both ends, newlines (a trailing one too), a tab, non-ASCII.
NASTY = ' it\'s "quoted" $HOME $(id) `id` \\ %h ;|&<> *\n\tsecond line\nü\n'
SECRET = "s3cr3t 'with' \"quotes\" and $dollars\nand a second line"
SECRET_OBJ = {"metadata": {"name": "creds"}, "data": {"token": base64.b64encode(SECRET.encode()).decode()}}
CONFIGMAP = {"metadata": {"name": "proxy"}, "data": {"url": "http://proxy.example:3128"}}
WORKER_ENV = [
    {"name": "ENV_DIRECT", "value": "env-value"},
    {"name": "NASTY", "value": NASTY},
    {"name": "ENV_REFERENCED", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
    {"name": "HTTPS_PROXY", "valueFrom": {"configMapKeyRef": {"name": "proxy", "key": "url"}}},
    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
    {"name": "PYTHONPATH", "value": "/workspace/lib:$(POD_NAME)"},
]
#: What each worker's container must hand its sessions (`PYTHONPATH` as Kubernetes expanded it).
EXPECTED = {
    "ENV_DIRECT": "env-value",
    "NASTY": NASTY,
    "ENV_REFERENCED": SECRET,
    "HTTPS_PROXY": "http://proxy.example:3128",
    "POD_IP": "10.1.0.7",
}
DUMP = "import json, os; print(json.dumps(dict(os.environ)))"

# Serves one session the way sshd does, then exits (the stand-in's constants are filled in per test).
FAKE_SSHD = """
import json, subprocess, sys
args = sys.argv[1:]
force = [a.split("=", 1)[1] for a in args if a.startswith("ForceCommand=")]
env = {"HOME": HOME, "USER": "root", "LOGNAME": "root", "SHELL": SHELL, "PATH": "/usr/bin:/bin",
       "SSH_CONNECTION": "10.1.0.1 40000 10.1.0.7 22"}
if force:
    env["SSH_ORIGINAL_COMMAND"] = CLIENT
done = subprocess.run([SHELL, "-c", force[0] if force else CLIENT], env=env, capture_output=True, text=True)
with open(RESULT, "w") as f:
    json.dump({"argv": args, "rc": done.returncode, "out": done.stdout, "err": done.stderr}, f)
"""


def colossalai_job() -> dict[str, Any]:
    worker = make_container("worker", image="hpcaitech/colossalai:0.3.0", env=WORKER_ENV)
    return job(
        "ColossalAIJob",
        {
            "ssh": {"authMountPath": "/root/.ssh", "sshdPath": SSHD},
            "launcher": {"image": "hpcaitech/colossalai:0.3.0", "workingDir": "/workspace"},
            "worker": {
                "replicas": 2,
                "procPerWorker": 1,
                "command": ["t.py"],
                "template": make_template(worker),
            },
        },
    )


def deepspeed_job() -> dict[str, Any]:
    worker = make_container("worker", image="deepspeed/deepspeed:v072", env=WORKER_ENV)
    return job(
        "DeepSpeedJob",
        {
            "worker": {"replicas": 2, "template": make_template(worker)},
            "config": {"run": {"python": ["t.py"]}},
        },
    )


def compiled_pods(manifest: dict[str, Any]) -> Sim:
    sim = Sim(manifest)
    for _ in range(4):
        sim.step()
        sim.run_all()
    return sim


def worker_container(pod: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in pod["spec"]["containers"] if c["name"] == "worker")


def memory_volume_paths(pod: dict[str, Any]) -> list[str]:
    """The mount paths of the worker's pod-private emptyDir volumes (a temporary directory each here)."""
    empty = {v["name"] for v in pod["spec"].get("volumes") or [] if "emptyDir" in v}
    return [m["mountPath"] for m in worker_container(pod).get("volumeMounts") or [] if m["name"] in empty]


def run_worker(pod: dict[str, Any], tmp: Path, client: str, shell: str) -> dict[str, Any]:
    """Start the worker's container as the local kubelet would, sshd played by the stand-in serving
    `client`; returns the session's outcome, the container's own output and the volumes' files."""
    bindir = tmp / "bin"
    bindir.mkdir()
    result = tmp / "session.json"
    fake = bindir / "sshd"
    home = tmp / "session-home"
    home.mkdir()
    constants = f"HOME, SHELL, CLIENT, RESULT = {str(home)!r}, {shell!r}, {client!r}, {str(result)!r}\n"
    fake.write_text(f"#!{sys.executable}\n{constants}{FAKE_SSHD}")
    fake.chmod(0o755)
    (bindir / "deepspeed").write_text("#!/bin/sh\nexit 0\n")  # worker-0 execs the launcher after sshd
    (bindir / "deepspeed").chmod(0o755)
    container = worker_container(pod)
    ctx = PodContext(configmaps={"proxy": CONFIGMAP}, secrets={"creds": SECRET_OBJ}, pod_ip="10.1.0.7")
    base = {"PATH": f"{bindir}:/usr/bin:/bin", "HOME": "/root", "HOSTNAME": pod["metadata"]["name"]}
    env = {**base, **container_env(pod, container, ctx)}
    argv = container_argv(container, env)
    volumes = {}
    for i, path in enumerate(memory_volume_paths(pod)):
        volumes[path] = tmp / f"volume-{i}"
        volumes[path].mkdir()
        argv = [arg.replace(path, str(volumes[path])) for arg in argv]
    argv = [arg.replace(SSHD, str(fake)) for arg in argv]
    done = subprocess.run(argv, env=env, cwd=tmp, capture_output=True, text=True, timeout=60)
    session = json.loads(result.read_text()) if result.exists() else None
    files = {p: {f.name: f.stat().st_mode for f in d.iterdir()} for p, d in volumes.items()}
    return {"rc": done.returncode, "output": done.stdout + done.stderr, "session": session, "files": files}


def launcher_client(exports: str) -> str:
    """A session command shaped like `colossalai run`'s (fabric: cd, export, program) and pdsh's."""
    return f"cd /tmp && export {exports} && {sys.executable} -c '{DUMP}'"


SHELLS = [s for s in ("/bin/bash", "/bin/sh") if shutil.which(s)]


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize(
    ("kind", "pod_name"),
    [
        ("ColossalAIJob", "demo-worker-1"),
        ("DeepSpeedJob", "demo-worker-1"),
        ("DeepSpeedJob", "demo-worker-0"),
    ],
)
def test_training_started_over_ssh_sees_the_worker_containers_env(
    kind: str, pod_name: str, shell: str, tmp_path: Path
) -> None:
    sim = compiled_pods(colossalai_job() if kind == "ColossalAIJob" else deepspeed_job())
    pod = sim.pod(pod_name)
    run = run_worker(pod, tmp_path, launcher_client('LAUNCHER_ONLY="from the launcher"'), shell)
    assert run["rc"] == 0 and run["output"] == "", run  # the prelude prints nothing: no value reaches the log
    session = run["session"]
    assert session is not None and session["rc"] == 0, session
    # worker-0 of a DeepSpeedJob starts sshd as a daemon (no -D) before it execs the launcher
    assert session["argv"][0] == ("-o" if kind == "DeepSpeedJob" and pod_name.endswith("-0") else "-D")
    seen = json.loads(session["out"])
    assert {k: seen.get(k) for k in EXPECTED} == EXPECTED
    assert seen["POD_NAME"] == pod_name and seen["PYTHONPATH"] == f"/workspace/lib:{pod_name}"
    assert seen["LAUNCHER_ONLY"] == "from the launcher"  # what the launcher exports comes on top
    assert seen["HOME"] == str(tmp_path / "session-home")  # the session keeps its own HOME
    (files,) = run["files"].values()
    assert files == {"environment": files["environment"]}  # written whole, then renamed
    assert stat.S_IMODE(files["environment"]) == 0o600


def test_the_launchers_exports_come_on_top_of_the_workers_env(tmp_path: Path) -> None:
    """`colossalai run` exports the launcher's whole environment in its command: for a name both set, the
    launcher's value wins (docs/controller.md#colossalai)."""
    pod = compiled_pods(colossalai_job()).pod("demo-worker-1")
    run = run_worker(pod, tmp_path, launcher_client('ENV_DIRECT="launcher value"'), SHELLS[0])
    seen = json.loads(run["session"]["out"])
    assert seen["ENV_DIRECT"] == "launcher value" and seen["ENV_REFERENCED"] == SECRET


def test_an_interactive_session_gets_a_login_shell_with_the_env(tmp_path: Path) -> None:
    """No client command (`ssh worker` to debug): the ForceCommand starts the user's login shell."""
    pod = compiled_pods(colossalai_job()).pod("demo-worker-1")
    run = run_worker(pod, tmp_path, "true", SHELLS[0])
    (force,) = [a.split("=", 1)[1] for a in run["session"]["argv"] if a.startswith("ForceCommand=")]
    login = tmp_path / "login-shell"
    login.write_text(f"#!/bin/sh\n[ \"$1\" = -l ] || exit 3\nexec {sys.executable} -c '{DUMP}'\n")
    login.chmod(0o755)
    env = {"HOME": str(tmp_path), "SHELL": str(login), "PATH": "/usr/bin:/bin"}  # no SSH_ORIGINAL_COMMAND
    done = subprocess.run([SHELLS[0], "-c", force], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ENV_REFERENCED"] == SECRET


def snapshot_of(pod: dict[str, Any]) -> tuple[str, str]:
    """The worker command's prelude (the `sh -c` script before it execs sshd) and the file it writes."""
    command = worker_container(pod)["command"]
    assert command[:2] == ["sh", "-c"], command
    (path,) = memory_volume_paths(pod)
    script = command[2].removesuffix(' && exec "$@"')
    return script, path


#: Values and names a snapshot must carry exactly (os.fsdecode: bytes that are not UTF-8 too).
TRICKY = {
    "EMPTY": "",
    "SPACES": "  both ends  ",
    "QUOTES": "'\"'''\"\"'",
    "SHELLISH": "$HOME ${X:-y} $(id) `id` \\$ \\ \\\\ !! ~ * ? [a] {a,b} ; & | < > # %h %%",
    "NEWLINES": "\n\nfirst\r\nsecond\n",
    "ESCAPES": "\\n \\t \\047 \\x41 \\u00e9",
    "UNICODE": "ü 汉字 🙂",
    "BYTES": os.fsdecode(b"\xff\xfe raw"),
    "LONG": "x'y\n" * 5000,
    "PATH": "/opt/conda/bin:/usr/bin:/bin",
}
#: Kept by the session (sshd and the shell set them) or not shell names: never written.
NOT_WRITTEN = {
    "HOME": "/container",
    "SHLVL": "7",
    "IFS": ":",
    "SSH_AUTH_SOCK": "/x",
    "BASHOPTS": "x",
    "A.B": "1",
    "1X": "1",
}


@pytest.mark.parametrize("reader", SHELLS)
def test_the_snapshot_quotes_every_value_so_sourcing_gives_it_back_exactly(
    reader: str, tmp_path: Path
) -> None:
    pod = compiled_pods(colossalai_job()).pod("demo-worker-0")
    script, path = snapshot_of(pod)
    script = script.replace(path, str(tmp_path))
    done = subprocess.run(
        ["sh", "-c", script], env={**TRICKY, **NOT_WRITTEN}, capture_output=True, timeout=30
    )
    assert done.returncode == 0 and done.stdout == done.stderr == b"", done
    written = tmp_path / "environment"
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["environment"]
    dump = "import json, os; print(json.dumps({k: os.fsencode(v).hex() for k, v in os.environ.items()}))"
    sourced = subprocess.run(
        [reader, "-c", f". {written}; exec {sys.executable} -c '{dump}'"],
        env={"HOME": "/session", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert sourced.returncode == 0, sourced.stderr
    seen = {k: os.fsdecode(bytes.fromhex(v)) for k, v in json.loads(sourced.stdout).items()}
    assert {k: seen.get(k) for k in TRICKY} == TRICKY
    assert seen["HOME"] == "/session" and "SSH_AUTH_SOCK" not in seen and "BASHOPTS" not in seen
    names = {
        line.split(b"=", 1)[0] for line in written.read_bytes().split(b"\n") if line.startswith(b"export ")
    }
    assert names == {f"export {k}".encode() for k in TRICKY}
