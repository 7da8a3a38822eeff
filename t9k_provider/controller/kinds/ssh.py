"""The SSH family (MPI, ColossalAI, DeepSpeed): sshd nodes sharing a key Secret and a hostfile ConfigMap.

Key generation is the only randomness in the controller; it is injected (`JobContext.keygen`) and runs only
when the Secret `<job>-ssh` is missing, so the engine stays deterministic and keys never rotate under a
running job.
"""

from __future__ import annotations

import base64
import shlex
from collections.abc import Sequence
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from t9k_provider.controller.engine.decision import ChildType
from t9k_provider.controller.engine.plan import Companion, Plan, ReplicaGroup
from t9k_provider.jobs.ssh import SESSION_ENV_DIR, NormalizedSSHJob

from .common import add_wait, container_named, mode_fields, scheduler_plan, set_command, with_env
from .context import JobContext

SECRETS = ChildType("v1", "Secret", "secrets")
CONFIGMAPS = ChildType("v1", "ConfigMap", "configmaps")
COMPANION_TYPES = (SECRETS, CONFIGMAPS)
SSH_VOLUME = "t9k-ssh"
HOSTFILE_VOLUME = "t9k-hostfile"
SSH_PORT = 22
SSH_SERVICE_PORTS = ({"name": "ssh", "port": SSH_PORT},)

#: The worker container's own environment for its SSH sessions (docs/controller.md#colossalai): written at
#: start into a pod-private in-memory volume, sourced by every session through sshd's ForceCommand.
SESSION_ENV_VOLUME = "t9k-session-env"
SESSION_ENV_FILE = f"{SESSION_ENV_DIR}/environment"
#: Names a session keeps its own values for: what sshd and the login shell set, IFS (which would change how
#: the client's command splits) and bash's read-only ones.
SESSION_OWN_NAMES = (
    "HOME", "PWD", "OLDPWD", "SHLVL", "_", "TERM", "USER", "LOGNAME", "SHELL", "MAIL", "IFS",
    "SSH_[A-Za-z0-9_]*", "BASH", "BASH_[A-Za-z0-9_]*", "BASHOPTS", "SHELLOPTS", "EUID", "PPID", "UID",
)  # fmt: skip


def generate_keypair() -> tuple[str, str]:
    """A fresh ed25519 key: (OpenSSH private key, `ssh-ed25519 ...` public key)."""
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    ).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return private, public.decode() + " t9k-controller"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def ssh_config(mount_path: str) -> str:
    """Peers are pods whose host keys change on every restart: no known_hosts checking."""
    return (
        "Host *\n"
        "  StrictHostKeyChecking no\n"
        "  UserKnownHostsFile /dev/null\n"
        "  LogLevel ERROR\n"
        f"  IdentityFile {mount_path.rstrip('/')}/id_rsa\n"
        "  ConnectionAttempts 10\n"
    )


def session_env_snapshot(path: str = SESSION_ENV_FILE) -> str:
    """sh that writes this process's environment to `path` as `export NAME='value'` lines (mode 0600, written
    whole then renamed): every valid shell name but `SESSION_OWN_NAMES`, each value single-quoted so that
    sourcing the file gives it back byte for byte (quotes, `$`, backslashes, newlines). awk's ENVIRON reads
    the environment itself (no parsing of `env` output); `'` is written as `'"'"'`. Prints nothing: values
    never reach the log. Contains neither `'` nor `$(`, so it nests in `sh -c '...'` and survives the
    kubelet's `$(VAR)` expansion."""
    own = "|".join(SESSION_OWN_NAMES)
    program = (
        'BEGIN { q = sprintf("%c", 39); r = q "\\"" q "\\"" q;'
        f" for (k in ENVIRON) if (k ~ /^[A-Za-z_][A-Za-z0-9_]*$/ && k !~ /^({own})$/)"
        ' { v = ENVIRON[k]; gsub(q, r, v); printf "export %s=%s%s%s\\n", k, q, v, q } }'
    )
    tmp = shlex.quote(f"{path}.tmp")
    return f"(umask 077 && awk '{program}' > {tmp}) && mv -f {tmp} {shlex.quote(path)}"


def session_force_command(path: str = SESSION_ENV_FILE) -> str:
    """sshd's ForceCommand (run by the user's shell with `-c`): source the worker's environment, then run
    what the client asked for (`colossalai run`'s and pdsh's command line, which export the launcher's own
    variables on top), or a login shell when it asked for none."""
    return (
        f". {shlex.quote(path)}; "
        'if [ -n "${SSH_ORIGINAL_COMMAND+x}" ]; then eval "$SSH_ORIGINAL_COMMAND"; else exec "$SHELL" -l; fi'
    )


def session_sshd_options(path: str = SESSION_ENV_FILE) -> list[str]:
    """sshd arguments that make every session source the worker's environment (given first, they win
    over the image's sshd_config)."""
    return ["-o", f"ForceCommand={session_force_command(path)}"]


def sshd_with_session_env(sshd: Sequence[str]) -> list[str]:
    """A worker command: snapshot the container's environment, then exec `sshd` with the session hook."""
    return [
        "sh",
        "-c",
        f'{session_env_snapshot()} && exec "$@"',
        "t9k-session-env",
        *sshd,
        *session_sshd_options(),
    ]


def ssh_companions(ctx: JobContext, mount_path: str, hostfile_data: dict[str, str]) -> tuple[Companion, ...]:
    """The key Secret `<job>-ssh` and the ConfigMap `<job>-hostfile`, whose data follows the replica count
    (elastic scaling) and so is kept in sync."""
    secret_name, hostfile_name = f"{ctx.name}-ssh", f"{ctx.name}-hostfile"

    def build_secret() -> dict[str, Any]:
        private, public = (ctx.keygen or generate_keypair)()
        return {
            "apiVersion": SECRETS.api_version,
            "kind": SECRETS.kind,
            "type": "kubernetes.io/ssh-auth",
            "metadata": ctx.meta(secret_name),
            "data": {
                "ssh-privatekey": _b64(private),
                "ssh-publickey": _b64(public),
                "config": _b64(ssh_config(mount_path)),
            },
        }

    def build_hostfile() -> dict[str, Any]:
        return {
            "apiVersion": CONFIGMAPS.api_version,
            "kind": CONFIGMAPS.kind,
            "metadata": ctx.meta(hostfile_name),
            "data": dict(hostfile_data),
        }

    return (
        Companion(SECRETS, secret_name, build_secret),
        Companion(CONFIGMAPS, hostfile_name, build_hostfile, sync=("data",)),
    )


def ssh_node(
    template: dict[str, Any],
    container: str,
    ctx: JobContext,
    mount_path: str,
    command: list[str],
    *,
    env: dict[str, str] | None = None,
    hostfile_paths: dict[str, str] | None = None,
    peers: Sequence[str] = (),
    session_env: bool = False,
) -> dict[str, Any]:
    """A copy of `template` whose `container` runs `command` with the job's keys at `mount_path` (mode 0600:
    id_rsa, id_rsa.pub, authorized_keys, the client config), the hostfile ConfigMap's keys mounted as single
    files (`hostfile_paths`: key -> absolute path), after a bounded wait for the sshd of `peers`.
    `session_env` adds the in-memory volume at `SESSION_ENV_DIR` that `command` writes the session
    environment to (`sshd_with_session_env`)."""
    tpl = with_env(template, env or {})
    set_command(tpl, container, command)
    volumes = tpl.setdefault("spec", {}).setdefault("volumes", [])
    volumes.append(
        {
            "name": SSH_VOLUME,
            "secret": {
                "secretName": f"{ctx.name}-ssh",
                "defaultMode": 0o600,
                "items": [
                    {"key": "ssh-privatekey", "path": "id_rsa"},
                    {"key": "ssh-publickey", "path": "id_rsa.pub"},
                    {"key": "ssh-publickey", "path": "authorized_keys"},
                    {"key": "config", "path": "config"},
                ],
            },
        }
    )
    mounts = [{"name": SSH_VOLUME, "mountPath": mount_path, "readOnly": True}]
    if hostfile_paths:
        volumes.append({"name": HOSTFILE_VOLUME, "configMap": {"name": f"{ctx.name}-hostfile"}})
        mounts += [
            {"name": HOSTFILE_VOLUME, "mountPath": path, "subPath": key, "readOnly": True}
            for key, path in hostfile_paths.items()
        ]
    if session_env:
        volumes.append({"name": SESSION_ENV_VOLUME, "emptyDir": {"medium": "Memory"}})
        mounts.append({"name": SESSION_ENV_VOLUME, "mountPath": SESSION_ENV_DIR})
    target = container_named(tpl, container)
    if target is not None:
        target.setdefault("volumeMounts", []).extend(mounts)
    add_wait(tpl, container, [f"{peer}:{SSH_PORT}" for peer in peers])
    return tpl


def worker_hosts(ctx: JobContext, count: int) -> list[str]:
    return [f"{ctx.name}-worker-{i}".lower() for i in range(count)]


def hostfile_text(hosts: list[str], slots: int | None = None) -> str:
    return "".join(f"{h} slots={slots}\n" if slots is not None else f"{h}\n" for h in hosts)


def launcher_plan(
    n: NormalizedSSHJob,
    ctx: JobContext,
    *,
    launch: list[str],
    launcher_env: dict[str, str],
    hostfile_path: str,
    slots: int | None,
    worker_debug: tuple[str, ...],
    success_message: str,
    worker_session_env: bool = False,
) -> Plan:
    """MPIJob and ColossalAIJob: workers `<job>-worker-<i>` run sshd; the launcher `<job>-launcher` runs
    `launch` once all workers run (docs/controller.md#r10), with the hostfile at `hostfile_path`.
    `worker_session_env`: the workers' SSH sessions get their container's env (`sshd_with_session_env`).

    Success and failure follow the launcher; a worker failing for good fails the job at once (fail-fast); a
    disruption restarts the launcher with its workers (docs/controller.md#disruptions).
    The PodGroup's minMember counts the workers only: the launcher is created after they run, so requiring
    it in the gang would deadlock (decision, docs/controller.md).
    """
    mount = n.ssh.auth_mount_path
    workers = n.worker.replicas
    hosts = worker_hosts(ctx, workers)

    sshd = [n.ssh.sshd_path, "-D", "-e"]
    command = sshd_with_session_env(sshd) if worker_session_env else sshd

    def worker(_: int) -> dict[str, Any]:
        tpl, name = n.worker.template, n.worker_container
        return ssh_node(tpl, name, ctx, mount, command, session_env=worker_session_env)

    def launcher(_: int) -> dict[str, Any]:
        return ssh_node(
            n.launcher.template,
            n.launcher_container,
            ctx,
            mount,
            launch,
            env=launcher_env,
            hostfile_paths={"hostfile": hostfile_path},
            peers=hosts,
        )

    worker_policy = n.worker.restart_policy
    launcher_policy = n.launcher.restart_policy
    groups = (
        ReplicaGroup(
            type="worker",
            replicas=workers,
            template=worker,
            restart_policy=worker_policy.policy,
            restart_limit=worker_policy.limit,
            training_container=n.worker_container,
            service_ports=SSH_SERVICE_PORTS,
            debug_command=worker_debug,
        ),
        ReplicaGroup(
            type="launcher",
            replicas=1,
            template=launcher,
            restart_policy=launcher_policy.policy,
            restart_limit=launcher_policy.limit,
            training_container=n.launcher_container,
            indexed=False,
            after_running="worker",
        ),
    )
    return Plan(
        groups=groups,
        success_rules=({"launcher": (0,)},),
        failure_rules=({"launcher": (0,)}, *({"worker": (i,)} for i in range(workers))),
        success_message=success_message,
        cleanup_policy="All" if n.clean_up_workers else "None",
        cleanup_types=frozenset({"worker"}),
        scheduler=scheduler_plan(n.scheduler, workers),
        companions=ssh_companions(ctx, mount, {"hostfile": hostfile_text(hosts, slots)}),
        whole_restart=True,
        **mode_fields(n.run_mode, ["worker", "launcher"]),
    )
