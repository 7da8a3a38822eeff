"""SSH material for the launcher kinds (MPI, ColossalAI, DeepSpeed): key Secret, hostfile ConfigMap, mounts.

Key generation is the only randomness in the controller; it is injected (`Keygen`) and runs only when the
Secret `<job>-ssh` is missing, so the engine stays deterministic and keys never rotate under a running job.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from t9k_provider.controller.engine.model import Companion
from t9k_provider.controller.engine.names import child_metadata

from .common import container_named

Keygen = Callable[[], tuple[str, str]]

SSH_VOLUME = "t9k-ssh"
HOSTFILE_VOLUME = "t9k-hostfile"
SSH_PORT = 22
SSH_SERVICE_PORTS = ({"name": "ssh", "port": SSH_PORT},)


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


def secret_name(job: dict[str, Any]) -> str:
    return f"{job['metadata']['name']}-ssh"


def ssh_secret(job: dict[str, Any], keygen: Keygen | None, mount_path: str) -> Companion:
    name = secret_name(job)

    def build() -> dict[str, Any]:
        private, public = (keygen or generate_keypair)()
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/ssh-auth",
            "metadata": child_metadata(job, name),
            "data": {
                "ssh-privatekey": _b64(private),
                "ssh-publickey": _b64(public),
                "config": _b64(ssh_config(mount_path)),
            },
        }

    return Companion("v1", "Secret", name, build)


def hostfile_configmap(job: dict[str, Any], data: dict[str, str]) -> Companion:
    """`<job>-hostfile`; its data follows the replica count (elastic scaling), so it is kept in sync."""
    name = f"{job['metadata']['name']}-hostfile"

    def build() -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": child_metadata(job, name),
            "data": dict(data),
        }

    return Companion("v1", "ConfigMap", name, build, sync=("data",))


def mount_ssh(template: dict[str, Any], container: str, job: dict[str, Any], mount_path: str) -> None:
    """Keys at `mount_path` (mode 0600): id_rsa, id_rsa.pub, authorized_keys and the client config."""
    spec = template.setdefault("spec", {})
    spec.setdefault("volumes", []).append(
        {
            "name": SSH_VOLUME,
            "secret": {
                "secretName": secret_name(job),
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
    target = container_named(template, container)
    if target is not None:
        target.setdefault("volumeMounts", []).append(
            {"name": SSH_VOLUME, "mountPath": mount_path, "readOnly": True}
        )


def mount_hostfile(
    template: dict[str, Any], container: str, job: dict[str, Any], files: dict[str, str]
) -> None:
    """Mount ConfigMap keys as single files: `files` maps key -> absolute path (subPath mounts)."""
    spec = template.setdefault("spec", {})
    spec.setdefault("volumes", []).append(
        {
            "name": HOSTFILE_VOLUME,
            "configMap": {"name": f"{job['metadata']['name']}-hostfile"},
        }
    )
    target = container_named(template, container)
    if target is not None:
        mounts = target.setdefault("volumeMounts", [])
        for key, path in files.items():
            mounts.append({"name": HOSTFILE_VOLUME, "mountPath": path, "subPath": key, "readOnly": True})


def worker_hosts(job: dict[str, Any], count: int) -> list[str]:
    return [f"{job['metadata']['name']}-worker-{i}".lower() for i in range(count)]
