"""Pod volumes materialised in the pod directory (`PodDir.volumes`), and each container's bind mounts."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from t9k_provider.local.kubelet.podenv import ContainerConfigError, expand, object_bytes
from t9k_provider.local.kubelet.shim import Mount
from t9k_provider.local.poddir import PodDir

DEFAULT_MODE = 0o644


def _write_items(target: Path, data: dict[str, bytes], source: dict, what: str) -> None:
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
            raise ContainerConfigError(f"{what}: configured to use key {key!r}, which does not exist")
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data[key])
        os.chmod(path, mode)


def materialize(
    pod: dict, pod_dir: PodDir, configmaps: dict[str, dict], secrets: dict[str, dict]
) -> dict[str, Path]:
    """Create every volume of the pod on disk; returns volume name -> host path."""
    paths: dict[str, Path] = {}
    for vol in (pod.get("spec") or {}).get("volumes") or []:
        name = vol["name"]
        target = pod_dir.volumes / name
        if "emptyDir" in vol:
            target.mkdir(parents=True, exist_ok=True)
        elif "configMap" in vol:
            src = vol["configMap"]
            obj = configmaps.get(src.get("name", ""))
            if obj is None and not src.get("optional"):
                raise ContainerConfigError(f'volume "{name}": configmap "{src.get("name")}" not found')
            _write_items(target, object_bytes(obj or {}, secret=False), src, f'volume "{name}"')
        elif "secret" in vol:
            src = vol["secret"]
            obj = secrets.get(src.get("secretName", ""))
            if obj is None and not src.get("optional"):
                raise ContainerConfigError(f'volume "{name}": secret "{src.get("secretName")}" not found')
            _write_items(target, object_bytes(obj or {}, secret=True), src, f'volume "{name}"')
        elif "hostPath" in vol:
            target = _host_path(name, vol["hostPath"])
        elif "persistentVolumeClaim" in vol:
            target = claim_dir(pod, pod_dir, vol["persistentVolumeClaim"].get("claimName", ""))
        else:
            kinds = sorted(k for k in vol if k != "name")
            raise ContainerConfigError(
                f'volume "{name}": unsupported volume type {kinds} in the local cluster'
            )
        paths[name] = target
    return paths


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
