"""Where a cluster is and how to prove who we are: a kubeconfig, or the pod's service account, read into an
``Endpoint`` without the generated Kubernetes clients.

Importing ``kubernetes`` and ``kubernetes_asyncio`` cost a task process about 0.3 s and the first T9k task
of a fresh process paid it (docs/benchmarks.md#7-per-task-overhead-against-the-cncf-kubernetes-operators).
What client-go reads for a bearer token or a client certificate is read here: the CA, client certificate and
key (inline or as files, relative to the kubeconfig's folder), ``token`` and ``tokenFile``, ``username`` and
``password``, exec credential plugins (run again once their credential expires), the in-cluster service
account (its token re-read as the kubelet rotates it), ``insecure-skip-tls-verify``, ``tls-server-name`` and
``proxy-url``. The legacy ``auth-provider`` plugins are refused with a message naming their exec plugins.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import os
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
#: A token file is read again after this long: the kubelet rotates projected service-account tokens.
TOKEN_FILE_TTL_SECONDS = 60.0
#: An exec plugin's credential is renewed this long before it expires.
EXPIRY_MARGIN_SECONDS = 10.0
EXEC_TIMEOUT_SECONDS = 60.0
DEFAULT_KUBECONFIG = "~/.kube/config"


class KubeconfigError(Exception):
    """The configuration cannot give a server and credentials; the message names the field and the fix."""


@dataclass
class Credential:
    """What proves who we are; renewed when its source says so (an exec plugin's expiry, a file's age)."""

    token: str | None = None
    basic: tuple[str, str] | None = None
    cert_pem: bytes | None = None
    key_pem: bytes | None = None
    cert_file: str | None = None
    key_file: str | None = None
    expires: float | None = None


@dataclass
class Endpoint:
    """A server's URL, its TLS context and a credential that renews itself.

    ``authorization()`` and ``ssl_context()`` load a stale credential first (``refresh()``), which may run
    an exec plugin (a subprocess) or read a file: async callers run ``refresh()`` in a thread when
    ``stale()`` says so, before them.
    """

    host: str
    verify: bool = True
    ca_file: str | None = None
    ca_pem: bytes | None = None
    server_name: str | None = None
    proxy: str | None = None
    token_file: str | None = None
    exec_spec: Mapping[str, Any] | None = None
    base_dir: Path | None = None
    credential: Credential = field(default_factory=Credential)
    _read_at: float | None = None
    #: When an exec plugin's credential is renewed: before it expires, by the margin or half its life.
    _renew_at: float | None = None
    _ssl: ssl.SSLContext | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def stale(self) -> bool:
        """Whether the credential must be loaded again before the next request."""
        if self.exec_spec is not None:
            return self._read_at is None or (self._renew_at is not None and time.time() >= self._renew_at)
        if self.token_file is not None:
            return self._read_at is None or time.monotonic() - self._read_at > TOKEN_FILE_TTL_SECONDS
        return False

    def refresh(self) -> None:
        """Load the credential again if it is stale (an exec plugin run, a token file read)."""
        with self._lock:
            if not self.stale():
                return
            if self.exec_spec is not None:
                fresh = run_exec_plugin(self.exec_spec, self.host, self.base_dir)
                if fresh.cert_pem != self.credential.cert_pem:
                    self._ssl = None
                self.credential = fresh
                self._read_at = now = time.time()
                if fresh.expires is not None:
                    margin = min(EXPIRY_MARGIN_SECONDS, max(0.0, fresh.expires - now) / 2)
                    self._renew_at = fresh.expires - margin
            elif self.token_file is not None:
                self.credential.token = _read(self.token_file, "tokenFile").decode().strip()
                self._read_at = time.monotonic()

    def authorization(self) -> dict[str, str]:
        """The request headers that carry the credential."""
        self.refresh()
        credential = self.credential
        if credential.token:
            return {"Authorization": f"Bearer {credential.token}"}
        if credential.basic:
            pair = base64.b64encode(":".join(credential.basic).encode()).decode()
            return {"Authorization": f"Basic {pair}"}
        return {}

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context for an https server (None for http): its CA, the client certificate if any."""
        if not self.host.startswith("https:"):
            return None
        self.refresh()
        if self._ssl is None:
            self._ssl = self._build_ssl()
        return self._ssl

    def _build_ssl(self) -> ssl.SSLContext:
        context = ssl.create_default_context(
            cafile=self.ca_file, cadata=self.ca_pem.decode() if self.ca_pem else None
        )
        if not self.verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        credential = self.credential
        if credential.cert_file and credential.key_file:
            context.load_cert_chain(credential.cert_file, credential.key_file)
        elif credential.cert_pem and credential.key_pem:
            # ssl reads a certificate chain only from files: a private folder, removed once read
            with tempfile.TemporaryDirectory(prefix="t9k-cert-") as folder:
                cert, key = Path(folder, "cert.pem"), Path(folder, "key.pem")
                cert.write_bytes(credential.cert_pem)
                key.touch(mode=0o600)
                key.write_bytes(credential.key_pem)
                context.load_cert_chain(str(cert), str(key))
        return context


def load(
    kubeconfig: str | Path | Mapping[str, Any] | None = None,
    *,
    context: str | None = None,
    in_cluster: bool = False,
    verify_ssl: bool = True,
) -> Endpoint:
    """The endpoint of ``kubeconfig`` (a file or its parsed contents; ``context`` other than its current one),
    or with ``in_cluster`` the pod's service account. With neither: the service account when this runs in a
    pod, else ``$KUBECONFIG``'s first file or ``~/.kube/config``."""
    if in_cluster or (kubeconfig is None and in_a_pod()):
        endpoint = _in_cluster()
    else:
        if kubeconfig is None:
            kubeconfig = default_kubeconfig()
        if isinstance(kubeconfig, Mapping):
            endpoint = _from_kubeconfig(kubeconfig, context, None)
        else:
            path = Path(kubeconfig).expanduser()
            endpoint = _from_kubeconfig(read_kubeconfig(path), context, path.parent)
    if not verify_ssl:
        endpoint.verify = False
    if endpoint.proxy is None:
        endpoint.proxy = environment_proxy(endpoint.host)
    return endpoint


def default_kubeconfig() -> str:
    """``$KUBECONFIG``'s first file, else ``~/.kube/config``."""
    return os.environ.get("KUBECONFIG", DEFAULT_KUBECONFIG).split(os.pathsep)[0]


def in_a_pod() -> bool:
    """Whether this process runs in a pod with a service account's token (as client-go's in-cluster check)."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and (SERVICE_ACCOUNT / "token").exists()


def read_kubeconfig(path: str | Path) -> dict[str, Any]:
    """A kubeconfig file's parsed contents."""
    file = Path(path).expanduser()
    try:
        return parse_kubeconfig(file.read_text(), str(file))
    except OSError as exc:
        raise KubeconfigError(f"cannot read kubeconfig {file}: {exc}") from exc


#: libyaml's safe loader where PyYAML has it: a kubeconfig's embedded certificates take the pure-Python loader
#: milliseconds, paid by every task that builds a client.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse_kubeconfig(value: Any, source: str) -> dict[str, Any]:
    """A kubeconfig given as a dict, JSON or YAML text."""
    if isinstance(value, Mapping):
        return dict(value)
    if not isinstance(value, (str, bytes)):
        raise KubeconfigError(f"{source}: not a kubeconfig document (a {type(value).__name__})")
    try:
        parsed = json.loads(value)
    except (TypeError, ValueError):
        try:
            parsed = yaml.load(value, Loader=SAFE_LOADER)
        except yaml.YAMLError as exc:
            raise KubeconfigError(f"{source}: not a kubeconfig document: {exc}") from exc
    if not isinstance(parsed, dict):
        raise KubeconfigError(f"{source}: not a kubeconfig document")
    return parsed


def environment_proxy(host: str) -> str | None:
    """The proxy that HTTPS_PROXY/HTTP_PROXY name for ``host`` unless NO_PROXY exempts it: by name, domain
    suffix or, as client-go, an IP range (a pod's NO_PROXY names the service network so)."""
    url = urllib.parse.urlsplit(host)
    hostname = url.hostname or ""
    if urllib.request.proxy_bypass(hostname) or _in_no_proxy_range(hostname):
        return None
    return urllib.request.getproxies().get(url.scheme)


def _in_no_proxy_range(hostname: str) -> bool:
    try:
        address = ipaddress.ip_address(hostname)
    except ValueError:
        return False
    for entry in (os.environ.get("NO_PROXY") or os.environ.get("no_proxy") or "").split(","):
        try:
            if address in ipaddress.ip_network(entry.strip(), strict=False):
                return True
        except ValueError:
            continue
    return False


def _in_cluster() -> Endpoint:
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
    token = SERVICE_ACCOUNT / "token"
    if not host or not port or not token.exists():
        raise KubeconfigError(
            "in_cluster: not running in a pod (KUBERNETES_SERVICE_HOST/PORT unset or no service account "
            f"token at {token}); give the connection a kubeconfig instead"
        )
    if ":" in host:
        host = f"[{host}]"
    ca = SERVICE_ACCOUNT / "ca.crt"
    return Endpoint(f"https://{host}:{port}", ca_file=str(ca) if ca.exists() else None, token_file=str(token))


def _named(config: Mapping[str, Any], section: str, name: str | None, what: str) -> dict[str, Any]:
    for entry in config.get(section) or ():
        if isinstance(entry, Mapping) and entry.get("name") == name:
            return dict(entry.get(what) or {})
    raise KubeconfigError(f"kubeconfig: no {what} named {name!r} in {section}")


def _from_kubeconfig(config: Mapping[str, Any], context: str | None, base: Path | None) -> Endpoint:
    name = context or config.get("current-context")
    if not name:
        raise KubeconfigError("kubeconfig: no current-context and no context given")
    ctx = _named(config, "contexts", name, "context")
    cluster = _named(config, "clusters", ctx.get("cluster"), "cluster")
    user = _named(config, "users", ctx.get("user"), "user") if ctx.get("user") else {}
    if not cluster.get("server"):
        raise KubeconfigError(f"kubeconfig: cluster {ctx.get('cluster')!r} has no server")
    if user.get("auth-provider"):
        provider = (user["auth-provider"] or {}).get("name")
        raise KubeconfigError(
            f"kubeconfig: user {ctx.get('user')!r} uses the auth-provider {provider!r}, which Kubernetes "
            "removed; use its exec credential plugin instead (gke-gcloud-auth-plugin, kubelogin, ...)"
        )
    endpoint = Endpoint(
        str(cluster["server"]).rstrip("/"),
        verify=not cluster.get("insecure-skip-tls-verify"),
        ca_pem=_data(cluster, "certificate-authority-data"),
        ca_file=_file(cluster, "certificate-authority", base),
        server_name=cluster.get("tls-server-name"),
        proxy=cluster.get("proxy-url"),
        token_file=_file(user, "tokenFile", base),
        exec_spec=user.get("exec"),
        base_dir=base,
    )
    endpoint.credential = Credential(
        token=user.get("token"),
        basic=(str(user["username"]), str(user.get("password") or "")) if user.get("username") else None,
        cert_pem=_data(user, "client-certificate-data"),
        key_pem=_data(user, "client-key-data"),
        cert_file=_file(user, "client-certificate", base),
        key_file=_file(user, "client-key", base),
    )
    if endpoint.credential.token:
        endpoint.token_file = None  # client-go: an inline token wins over tokenFile
    return endpoint


def _data(section: Mapping[str, Any], key: str) -> bytes | None:
    value = section.get(key)
    if not value:
        return None
    try:
        return base64.b64decode(value, validate=True)
    except ValueError as exc:
        raise KubeconfigError(f"kubeconfig: {key} is not base64: {exc}") from exc


def _file(section: Mapping[str, Any], key: str, base: Path | None) -> str | None:
    value = section.get(key)
    if not value:
        return None
    path = Path(value).expanduser()
    return str(path if path.is_absolute() or base is None else base / path)


def _read(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise KubeconfigError(f"kubeconfig: cannot read {what} {path}: {exc}") from exc


def run_exec_plugin(spec: Mapping[str, Any], host: str, base: Path | None) -> Credential:
    """Run an exec credential plugin (client.authentication.k8s.io) and read its ExecCredential."""
    command = str(spec.get("command") or "")
    if not command:
        raise KubeconfigError("kubeconfig: exec has no command")
    if os.sep in command and not Path(command).is_absolute() and base is not None:
        command = str(base / command)  # as client-go: a relative path is relative to the kubeconfig
    api_version = str(spec.get("apiVersion") or "client.authentication.k8s.io/v1")
    info_spec: dict[str, Any] = {"interactive": False}
    if spec.get("provideClusterInfo"):
        info_spec["cluster"] = {"server": host}
    info = {"apiVersion": api_version, "kind": "ExecCredential", "spec": info_spec}
    env = {**os.environ, "KUBERNETES_EXEC_INFO": json.dumps(info)}
    env.update({str(e["name"]): str(e.get("value", "")) for e in spec.get("env") or () if "name" in e})
    hint = f" ({spec['installHint']})" if spec.get("installHint") else ""
    try:
        done = subprocess.run(
            [command, *map(str, spec.get("args") or ())],
            env=env,
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=EXEC_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise KubeconfigError(f"kubeconfig: exec plugin {command!r} could not run: {exc}{hint}") from exc
    if done.returncode != 0:
        stderr = done.stderr.decode(errors="replace").strip()[-500:]
        raise KubeconfigError(f"kubeconfig: exec plugin {command!r} exited {done.returncode}: {stderr}{hint}")
    try:
        status = json.loads(done.stdout)["status"]
    except (ValueError, KeyError, TypeError) as exc:
        raise KubeconfigError(f"kubeconfig: exec plugin {command!r} printed no ExecCredential") from exc
    expiry = status.get("expirationTimestamp")
    cert, key = status.get("clientCertificateData"), status.get("clientKeyData")
    credential = Credential(
        token=status.get("token"),
        cert_pem=cert.encode() if cert else None,
        key_pem=key.encode() if key else None,
        expires=datetime.fromisoformat(expiry.replace("Z", "+00:00")).timestamp() if expiry else None,
    )
    if not credential.token and not (credential.cert_pem and credential.key_pem):
        raise KubeconfigError(f"kubeconfig: exec plugin {command!r} gave neither a token nor a certificate")
    return credential
