"""Per-container shim: runs one container process and outlives the kubelet that started it.

`python -m t9k_provider.local.kubelet.shim SPEC.json` (the kubelet writes the spec next to the log file; the
attempt's files are those `t9k_provider.local.kubelet.poddir.AttemptFiles` names).
The shim runs in its own session, so a SIGKILLed server does not take containers down with it. It

* enters the pod's namespaces (network namespace, fresh UTS + mount namespaces, bind mounts) in the child;
  an isolated container (one with its own hostname) also gets its own PID namespace and `/proc`, so its
  processes, and commands exec'd into it, see and signal only the container's processes (the main process is
  PID 1, as in a container runtime),
* writes stdout+stderr into the attempt's CRI log,
* forwards SIGTERM/SIGINT to the container process,
* puts the container process into the attempt's cgroup (`cgroupfs`; the kubelet created it with the
  container's limits), reports an OOM kill there as reason `OOMKilled` and removes the cgroup at the end,
* takes on the container's securityContext identity (`identity`) last, after joining the cgroup (which
  needs the shim's privileges), right before exec,
* records the attempt's state (pid, times, reason), its pid file and finally its exit code, which the
  kubelet reads, so an exit code is never lost, even while the kubelet is down.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from t9k_provider.kube.timestamps import now_rfc3339
from t9k_provider.local.kubelet import cgroupfs, crilog, poddir
from t9k_provider.local.kubelet.identity import Identity, apply_identity
from t9k_provider.local.kubelet.poddir import AttemptFiles

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18

# Exit code Kubernetes reports when the runtime could not start the process.
START_ERROR_EXIT_CODE = 128


@dataclass
class Mount:
    source: str
    target: str
    read_only: bool = False


@dataclass
class ShimSpec:
    """Everything the shim needs, serialised by the kubelet (no API access from here)."""

    argv: list[str]
    env: dict[str, str]
    log_path: str
    working_dir: str | None = None
    netns: str | None = None  # path of a network namespace to join, e.g. /run/netns/<name>
    hostname: str | None = None  # set in a fresh UTS namespace
    mounts: list[Mount] = field(default_factory=list)  # bind mounts in a private mount namespace
    identity: Identity | None = None  # credentials from the securityContext, applied last
    cgroups: list[str] = field(default_factory=list)  # the attempt's cgroup directories (its limits)

    @property
    def isolated(self) -> bool:
        """The kubelet gives a container a hostname exactly when it isolates it (namespaces, as root)."""
        return self.hostname is not None

    def dump(self, path: Path) -> None:
        poddir.write_json(path, asdict(self))

    @classmethod
    def load(cls, path: Path) -> ShimSpec:
        data = json.loads(path.read_text())
        data["mounts"] = [Mount(**m) for m in data.get("mounts", [])]
        data["identity"] = Identity.load(data.get("identity"))
        return cls(**data)


def libc_call(libc: ctypes.CDLL, name: str, *args: object) -> None:
    """Call a libc function os does not wrap (setns, unshare, mount); failures raise OSError like os's."""
    if getattr(libc, name)(*args) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{name}: {os.strerror(err)}")


def _enter_namespaces(spec: ShimSpec) -> None:
    """Runs in the forked child before exec: join the pod network, isolate hostname and mounts."""
    libc = ctypes.CDLL(None, use_errno=True)
    if spec.netns:
        fd = os.open(spec.netns, os.O_RDONLY)
        libc_call(libc, "setns", fd, CLONE_NEWNET)
        os.close(fd)
    private_mounts = bool(spec.mounts) or spec.isolated
    flags = (CLONE_NEWUTS if spec.hostname else 0) | (CLONE_NEWNS if private_mounts else 0)
    if flags:
        libc_call(libc, "unshare", flags)
    if spec.hostname:
        name = spec.hostname.encode()
        libc_call(libc, "sethostname", name, len(name))
    if private_mounts:
        libc_call(libc, "mount", b"none", b"/", None, MS_REC | MS_PRIVATE, None)
    if spec.isolated:  # we are PID 1 of the namespace the shim created: a /proc that shows it
        libc_call(libc, "mount", b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
    for m in spec.mounts:
        src, dst = m.source.encode(), m.target.encode()
        if not os.path.exists(m.target):
            if os.path.isdir(m.source):
                os.makedirs(m.target, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(m.target) or "/", exist_ok=True)
                Path(m.target).touch()
        libc_call(libc, "mount", src, dst, None, MS_BIND | MS_REC, None)
        if m.read_only:
            libc_call(libc, "mount", b"none", dst, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_REC, None)


def _child_setup(spec: ShimSpec) -> None:
    cgroupfs.join(spec.cgroups)  # first: all the container does is charged to its cgroup, never the shim
    if spec.netns or spec.hostname or spec.mounts:
        _enter_namespaces(spec)
    if spec.working_dir:
        os.makedirs(spec.working_dir, exist_ok=True)
        os.chdir(spec.working_dir)
    _become(spec)


def _become(spec: ShimSpec) -> None:
    """Take on the container's identity, the last step before exec (see `identity`)."""
    if spec.identity is None:
        return
    if not (spec.mounts or spec.isolated):  # no private mount namespace: never cover host directories
        spec.identity.exposed = []
    apply_identity(spec.identity)


def run(spec: ShimSpec) -> int:
    files = AttemptFiles.of_log(Path(spec.log_path))
    writer = crilog.CriLogWriter(files.log)
    state: dict[str, object] = {"shimPid": os.getpid(), "startedAt": now_rfc3339()}
    child: list[int] = []
    pending: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        if not child:
            pending.append(signum)
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(child[0], effective_signal(child[0], signum))

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    if spec.isolated:  # the next child (the container) becomes PID 1 of a new PID namespace
        try:
            libc_call(ctypes.CDLL(None, use_errno=True), "unshare", CLONE_NEWPID)
        except OSError as exc:  # e.g. a seccomp profile that allows the other namespaces only
            print(f"no PID namespace for the container: {exc}", file=sys.stderr, flush=True)
    try:
        proc = subprocess.Popen(
            spec.argv,
            env=spec.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # own process group, so the kubelet can SIGKILL the whole container
            preexec_fn=lambda: _child_setup(spec),  # the shim is single-threaded
        )
    except (OSError, subprocess.SubprocessError) as exc:
        message = start_error_message(spec.argv[0], exc)
        writer.close()
        state.update(finishedAt=now_rfc3339(), exitCode=START_ERROR_EXIT_CODE, reason="StartError")
        state["message"] = message
        poddir.write_json(files.state, state)
        files.write_exit_code(START_ERROR_EXIT_CODE)
        return START_ERROR_EXIT_CODE

    child.append(proc.pid)
    namespace = ContainerNamespace.open(proc.pid)
    for signum in pending:
        forward(signum, None)
    # The start time makes (pid, start) name this process only: the kubelet checks it before signalling, so a
    # pid the kernel has handed to another process since is never hit. The pid file comes before the state
    # that says the container runs: whoever sees it running (exec, a test) finds its process.
    ids = {"shim": os.getpid(), "container": proc.pid, "containerStart": process_start_time(proc.pid)}
    poddir.write_json(files.pid, ids)
    state["pid"] = proc.pid
    poddir.write_json(files.state, state)
    try:
        _pump(proc, writer, namespace)
    finally:
        if namespace is not None:
            namespace.close()
    child.clear()  # a late SIGTERM must not be forwarded to a pid that is free once reaped
    proc.wait()
    code = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
    writer.close()
    state.update(finishedAt=now_rfc3339(), exitCode=code)
    if proc.returncode < 0:
        state["signal"] = -proc.returncode
    if cgroupfs.oom_kills(spec.cgroups):
        state["reason"] = "OOMKilled"  # as runtimes report it: the OOM killer struck in the container
    poddir.write_json(files.state, state)
    files.write_exit_code(code)
    for path in spec.cgroups:
        cgroupfs.remove_tree(Path(path))
    return code


def effective_signal(pid: int, signum: int) -> int:
    """The signal that gives `signum` the meaning it has for any other process when sent to a container's
    main process.

    The kernel drops signals with the default action that reach the init of a PID namespace, so a
    container's PID 1 without a SIGTERM handler would ignore SIGTERM (upstream it is then SIGKILLed once the
    grace period ends). What the default action would do (terminate) is done at once instead.
    """
    if signum in (signal.SIGTERM, signal.SIGINT) and _namespace_init_with_default_action(pid, signum):
        return signal.SIGKILL
    return signum


def process_start_time(pid: int) -> int | None:
    """When the process started (clock ticks since boot, /proc/<pid>/stat field 22): with the pid, it names
    one process for the machine's uptime, as pids alone do not (they are reused)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Fields after the command name, which may itself hold spaces and parentheses; field 3 is the first.
    return int(stat.rsplit(")", 1)[1].split()[19])


def is_recorded_process(pid: object, started: object) -> bool:
    """Is `pid` still the process the shim recorded with start time `started` (not a reused pid)?"""
    return isinstance(pid, int) and started is not None and process_start_time(pid) == started


def _namespace_init_with_default_action(pid: int, signum: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    if fields.get("NSpid", "").split()[-1:] != ["1"]:
        return False
    bit = 1 << (signum - 1)
    return not any(int(fields.get(name, "0").strip() or "0", 16) & bit for name in ("SigCgt", "SigIgn"))


def start_error_message(command: str, exc: BaseException) -> str:
    """Why `command` could not be started, worded as container runtimes word it (container start and exec)."""
    if isinstance(exc, FileNotFoundError):
        return f'exec: "{command}": executable file not found in $PATH'
    if isinstance(exc, PermissionError):
        return f'exec: "{command}": permission denied'
    return f"failed to start container process: {exc}"


class ContainerNamespace:
    """The container's own mount (else UTS) namespace, held open by the shim.

    Every process in it belongs to the container, including daemons that left the process group with
    setsid (`sshd` without `-D`, as DeepSpeed's worker-0 starts it). A namespace is known by its inode
    number, which the kernel gives to the next new namespace as soon as this one is freed (lowest free
    number first): without the open descriptor, the kill scan at the container's end matched a container
    that another shim had just started and SIGKILLed it (exit 137, empty log). Held open, the namespace and
    its number stay this container's until `close`.
    """

    def __init__(self, kind: str, fd: int) -> None:
        self.kind = kind
        self.fd = fd
        st = os.fstat(fd)
        self.identity = (st.st_dev, st.st_ino)

    @classmethod
    def open(cls, pid: int) -> ContainerNamespace | None:
        """The namespace of `pid`, a child not yet reaped (so the pid is surely it); None when it shares
        the host's (or has already exited)."""
        for kind in ("mnt", "uts"):
            try:
                fd = os.open(f"/proc/{pid}/ns/{kind}", os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                continue
            namespace = cls(kind, fd)
            own = os.stat(f"/proc/self/ns/{kind}")
            if namespace.identity != (own.st_dev, own.st_ino):
                return namespace
            namespace.close()
        return None

    def holds(self, pid: str) -> bool:
        try:
            st = os.stat(f"/proc/{pid}/ns/{self.kind}")
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == self.identity

    def kill_all(self) -> None:
        """SIGKILL every process in the namespace, as the kernel does to a PID namespace whose init exits."""
        for _ in range(5):  # a process may fork while the scan runs; the next round catches the child
            killed = False
            for entry in os.scandir("/proc"):
                if entry.name.isdigit() and self.holds(entry.name):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(entry.name), signal.SIGKILL)
                        killed = True
            if not killed:
                return
            time.sleep(0.05)

    def close(self) -> None:
        os.close(self.fd)


def _kill_leftovers(pid: int, namespace: ContainerNamespace | None) -> None:
    """Like a container runtime: when the main process ends, the rest of the container goes too."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)  # `pid` is a zombie not yet reaped: the number is still its own
    if namespace is not None:
        namespace.kill_all()


def _exited(pid: int) -> bool:
    """Has our child `pid` exited? Asked without reaping it, so its pid stays taken (by the zombie) until
    the leftovers of its process group are killed."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _pump(
    proc: subprocess.Popen[bytes], writer: crilog.CriLogWriter, namespace: ContainerNamespace | None
) -> None:
    """Copy output to the log until the process exits, then kill leftovers of the container and drain.
    The caller reaps the process."""
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None and proc.stderr is not None
    sel.register(proc.stdout, selectors.EVENT_READ, "stdout")
    sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
    drain_deadline: float | None = None
    while sel.get_map():
        if drain_deadline is None and _exited(proc.pid):
            _kill_leftovers(proc.pid, namespace)
            drain_deadline = time.monotonic() + 2.0
        if drain_deadline is not None and time.monotonic() > drain_deadline:
            break
        for key, _ in sel.select(timeout=0.1):
            data = os.read(key.fd, 65536)
            if data:
                writer.write(key.data, data)
            else:
                sel.unregister(key.fileobj)
    sel.close()
    if drain_deadline is None:  # output closed before the process ended: await its exit, not reaping it
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        _kill_leftovers(proc.pid, namespace)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m t9k_provider.local.kubelet.shim SPEC.json", file=sys.stderr)
        return 2
    return run(ShimSpec.load(Path(args[0])))


if __name__ == "__main__":
    sys.exit(main())
