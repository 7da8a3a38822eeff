"""Pod volumes materialised in the pod directory (`PodDir.volumes`), and each container's bind mounts.

`projected` volumes combine configMap, secret, downwardAPI and serviceAccountToken sources in one directory.
The tokens come from the API server's TokenRequest (`serviceaccounts/<name>/token`), which the pod worker
calls before materialising (`token_sources` says what to request), so this module does no I/O but files.
With `fsGroup`, the volumes the kubelet manages are given to that group (setgid directories, group
read/write, read-only for configMap/secret/projected/downwardAPI content), as its SetVolumeOwnership does.
An emptyDir with `medium: Memory` is a tmpfs the pod worker mounted at its directory first (`tmpfs`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from t9k_provider.local.kubelet.poddir import PodDir
from t9k_provider.local.kubelet.podenv import (
    ContainerConfigError,
    PodContext,
    expand,
    field_ref,
    object_bytes,
    resource_field,
)
from t9k_provider.local.kubelet.shim import Mount

DEFAULT_MODE = 0o644
EMPTY_DIR_MODE = 0o777  # as the kubelet creates emptyDir volumes: writable by any runAsUser
DEFAULT_TOKEN_SECONDS = 3600
READ_ONLY_KINDS = ("configMap", "secret", "projected", "downwardAPI")


class MountError(Exception):
    """A volume's source is missing (ConfigMap, Secret or key): the kubelet reports `FailedMount` and
    retries, the containers wait in `ContainerCreating`, as the real kubelet's MountVolume.SetUp does."""

    def __init__(self, volume: str, message: str) -> None:
        super().__init__(message)
        self.volume = volume


@dataclass(frozen=True)
class TokenSource:
    """One serviceAccountToken source: `sources[index]` of projected volume `volume`."""

    volume: str
    index: int
    path: str
    audience: str | None
    expiration_seconds: int

    @property
    def key(self) -> tuple[str, int]:
        return (self.volume, self.index)


def token_sources(pod: dict) -> list[TokenSource]:
    """The ServiceAccount tokens the pod's projected volumes need."""
    out = []
    for vol in (pod.get("spec") or {}).get("volumes") or []:
        for index, source in enumerate((vol.get("projected") or {}).get("sources") or []):
            if "serviceAccountToken" in source:
                token = source["serviceAccountToken"]
                seconds = int(token.get("expirationSeconds") or DEFAULT_TOKEN_SECONDS)
                out.append(TokenSource(vol["name"], index, token["path"], token.get("audience"), seconds))
    return out


def _write_items(target: Path, data: dict[str, bytes], source: dict, volume: str, kind: str = "") -> None:
    """Write keys as files (`items` select and rename keys), with `defaultMode`/per-item `mode`."""
    target.mkdir(parents=True, exist_ok=True)
    default_mode = source.get("defaultMode", DEFAULT_MODE)
    items = source.get("items")
    selected = (
        [(item["key"], item["path"], item.get("mode", default_mode)) for item in items]
        if items
        else [(key, key, default_mode) for key in data]
    )
    for key, rel, mode in selected:
        if key not in data:
            if source.get("optional"):
                continue
            raise MountError(volume, f"{kind} references non-existent config key: {key}")
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data[key])
        os.chmod(path, mode)


def _object_items(
    target: Path, src: dict, objects: Mapping[str, dict], kind: str, name_field: str, volume: str, mode: int
) -> None:
    """A configMap or secret (volume or projected source) written as files."""
    obj = objects.get(src.get(name_field, ""))
    if obj is None and not src.get("optional"):
        raise MountError(volume, f'{kind} "{src.get(name_field)}" not found')
    data = object_bytes(obj or {}, secret=kind == "secret")
    _write_items(target, data, {"defaultMode": mode, **src}, volume, kind)


def _downward_items(target: Path, pod: dict, items: list[dict], mode: int, volume: str) -> None:
    """downwardAPI items: pod metadata fields, or a container's resources."""
    what = f'volume "{volume}"'
    containers = {c["name"]: c for c in (pod.get("spec") or {}).get("containers") or []}
    data: dict[str, bytes] = {}
    for item in items:
        if "fieldRef" in item:
            path = item["fieldRef"]["fieldPath"]
            if not path.startswith("metadata."):
                raise ContainerConfigError(f"{what}: fieldPath {path!r} is not supported in a volume")
            data[item["path"]] = field_ref(pod, path, PodContext()).encode()
        elif "resourceFieldRef" in item:
            ref = item["resourceFieldRef"]
            container = containers.get(ref.get("containerName", ""))
            if container is None:
                raise ContainerConfigError(f"{what}: resourceFieldRef needs the name of a container")
            data[item["path"]] = resource_field(container, ref).encode()
    selection = [
        {"key": i["path"], "path": i["path"], **({"mode": i["mode"]} if "mode" in i else {})} for i in items
    ]
    _write_items(target, data, {"defaultMode": mode, "items": selection}, volume)


def _projected(
    target: Path, pod: dict, vol: dict, ctx: PodContext, tokens: Mapping[tuple[str, int], str]
) -> None:
    src = vol["projected"]
    mode = src.get("defaultMode", DEFAULT_MODE)
    name = vol["name"]
    target.mkdir(parents=True, exist_ok=True)
    for index, source in enumerate(src.get("sources") or []):
        if "configMap" in source:
            _object_items(target, source["configMap"], ctx.configmaps, "configmap", "name", name, mode)
        elif "secret" in source:
            _object_items(target, source["secret"], ctx.secrets, "secret", "name", name, mode)
        elif "downwardAPI" in source:
            _downward_items(target, pod, source["downwardAPI"].get("items") or [], mode, name)
        elif "serviceAccountToken" in source:
            path = source["serviceAccountToken"]["path"]
            token = tokens[(name, index)]
            _write_items(target, {path: token.encode()}, {"defaultMode": mode}, name)
        else:
            raise ContainerConfigError(f'volume "{name}": unsupported projected source {sorted(source)}')


def materialize(
    pod: dict,
    pod_dir: PodDir,
    configmaps: Mapping[str, dict],
    secrets: Mapping[str, dict],
    tokens: Mapping[tuple[str, int], str] | None = None,
) -> dict[str, Path]:
    """Create every volume of the pod on disk; returns volume name -> host path. `tokens` holds the
    ServiceAccount token of each `token_sources` entry (by its key)."""
    ctx = PodContext(configmaps=configmaps, secrets=secrets)
    fs_group = ((pod.get("spec") or {}).get("securityContext") or {}).get("fsGroup")
    paths: dict[str, Path] = {}
    for vol in (pod.get("spec") or {}).get("volumes") or []:
        name = vol["name"]
        target = pod_dir.volumes / name
        if "emptyDir" in vol:
            target.mkdir(parents=True, exist_ok=True)
            if not os.path.ismount(target):  # a memory-backed one is a tmpfs of mode 1777 (`tmpfs`)
                os.chmod(target, EMPTY_DIR_MODE)
        elif "configMap" in vol:
            src = vol["configMap"]
            _object_items(
                target, src, configmaps, "configmap", "name", name, src.get("defaultMode", DEFAULT_MODE)
            )
        elif "secret" in vol:
            src = vol["secret"]
            mode = src.get("defaultMode", DEFAULT_MODE)
            _object_items(target, src, secrets, "secret", "secretName", name, mode)
        elif "downwardAPI" in vol:
            src = vol["downwardAPI"]
            target.mkdir(parents=True, exist_ok=True)
            _downward_items(target, pod, src.get("items") or [], src.get("defaultMode", DEFAULT_MODE), name)
        elif "projected" in vol:
            _projected(target, pod, vol, ctx, tokens or {})
        elif "hostPath" in vol:
            target = _host_path(name, vol["hostPath"])
        elif "persistentVolumeClaim" in vol:
            target = claim_dir(pod, pod_dir, vol["persistentVolumeClaim"].get("claimName", ""))
        else:
            kinds = sorted(k for k in vol if k != "name")
            raise ContainerConfigError(
                f'volume "{name}": unsupported volume type {kinds} in the local cluster'
            )
        if fs_group is not None and "hostPath" not in vol:
            set_ownership(target, int(fs_group), read_only=any(kind in vol for kind in READ_ONLY_KINDS))
        paths[name] = target
    return paths


def set_ownership(root: Path, gid: int, *, read_only: bool) -> None:
    """The kubelet's SetVolumeOwnership: everything in the volume belongs to `gid`, directories are setgid
    (new files inherit the group) and the group may read (and, unless read-only, write) it. Needs root (or
    membership of `gid`); without it the volume keeps the kubelet's ownership."""
    if os.geteuid() != 0 and gid not in os.getgroups():
        return
    file_bits = 0o440 if read_only else 0o660
    dir_bits = 0o2550 if read_only else 0o2770
    for directory, _subdirs, files in os.walk(root):
        for path in [directory, *(os.path.join(directory, f) for f in files)]:
            st = os.lstat(path)
            if os.path.islink(path):
                continue
            os.chown(path, -1, gid)
            os.chmod(path, (st.st_mode & 0o7777) | (dir_bits if path == directory else file_bits))


def claim_dir(pod: dict, pod_dir: PodDir, claim: str) -> Path:
    """A PersistentVolumeClaim is a directory of the state dir, shared by the namespace's pods and kept across
    them, like a ReadWriteMany local volume (claim objects themselves are not required)."""
    if not claim or "/" in claim or claim in (".", ".."):
        raise ContainerConfigError(f"persistentVolumeClaim.claimName: invalid claim name {claim!r}")
    path = pod_dir.claim(pod["metadata"].get("namespace", "default"), claim)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _host_path(name: str, src: dict) -> Path:
    path = Path(src["path"])
    kind = src.get("type", "")
    if kind == "DirectoryOrCreate":
        path.mkdir(parents=True, exist_ok=True)
    elif kind == "FileOrCreate" and not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    elif kind == "Directory" and not path.is_dir():
        raise ContainerConfigError(f'volume "{name}": hostPath {path} is not a directory')
    elif kind == "File" and not path.is_file():
        raise ContainerConfigError(f'volume "{name}": hostPath {path} is not a file')
    return path


def container_mounts(
    container: dict, volume_paths: dict[str, Path], lookup: Callable[[str], str | None]
) -> list[Mount]:
    """Bind mounts for a container's `volumeMounts` (`subPath`/`subPathExpr` resolved inside the volume)."""
    mounts: list[Mount] = []
    for vm in container.get("volumeMounts") or []:
        name = vm["name"]
        if name not in volume_paths:
            raise ContainerConfigError(f'volumeMounts "{name}": no volume with that name in the pod')
        source = volume_paths[name]
        sub = vm.get("subPath") or (expand(vm["subPathExpr"], lookup) if vm.get("subPathExpr") else "")
        if sub:
            if os.path.isabs(sub) or ".." in Path(sub).parts:
                raise ContainerConfigError(f'volumeMounts "{name}": subPath {sub!r} must be a relative path')
            source = source / sub
            if not source.exists():
                source.mkdir(parents=True, exist_ok=True)
        mounts.append(Mount(source=str(source), target=vm["mountPath"], read_only=bool(vm.get("readOnly"))))
    return mounts
