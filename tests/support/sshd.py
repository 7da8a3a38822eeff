"""sshd in pods, for the SSH-launched kinds (MPI, ColossalAI, DeepSpeed): the local cluster's pods run the
host's programs, so the host is their image. It needs sshd's host keys, its privilege-separation directory
(/run is a tmpfs: made again here) and the programs a test's launcher runs."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess

from t9k_provider.testing import unavailable


def prepare_sshd(*programs: str, modules: tuple[str, ...] = ()) -> None:
    """Make the host ready to be the workers' image; skip (fail under CI as root) when it cannot be."""
    if os.geteuid() != 0:
        unavailable("an sshd per pod", "it needs the pods' own network namespaces (root)")
    missing = [p for p in ("/usr/sbin/sshd", "ssh", "ssh-keygen", *programs) if not shutil.which(p)]
    missing += [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        unavailable(", ".join(missing), "`make env` installs them (as root)")
    subprocess.run(["ssh-keygen", "-A"], check=True, capture_output=True, timeout=60)
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
