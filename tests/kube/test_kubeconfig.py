"""kubeconfig.load: what client-go reads from a kubeconfig or a pod's service account, without a cluster.

Certificates are generated here (``cryptography``); exec plugins are small Python scripts in tmp_path.
"""

from __future__ import annotations

import base64
import datetime
import json
import os
import ssl
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from t9k_provider.kube import kubeconfig
from t9k_provider.kube.kubeconfig import KubeconfigError, load, parse_kubeconfig

SERVER = "https://k8s.example:6443"
API_VERSION = "client.authentication.k8s.io/v1"
CA_NAME = "t9k-test-ca"


# --- builders ----------------------------------------------------------------------------------------------


def config(cluster: dict[str, Any] | None = None, user: dict[str, Any] | None = None, **top: Any) -> dict:
    """A kubeconfig whose current context ``main`` joins cluster ``c`` (``SERVER``) and user ``u``."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "main",
        "contexts": [{"name": "main", "context": {"cluster": "c", "user": "u"}}],
        "clusters": [{"name": "c", "cluster": {"server": SERVER, **(cluster or {})}}],
        "users": [{"name": "u", "user": user or {}}],
        **top,
    }


def write_config(folder: Path, document: dict[str, Any]) -> Path:
    """``document`` as ``folder/config`` (YAML), the folder created."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "config"
    path.write_text(yaml.safe_dump(document))
    return path


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@dataclass(frozen=True)
class Pki:
    ca: bytes
    client_cert: bytes
    client_key: bytes
    other_cert: bytes
    other_key: bytes


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _certificate(
    subject: str, key: ec.EllipticCurvePrivateKey, issuer: str, issuer_key: ec.EllipticCurvePrivateKey
) -> bytes:
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=subject == issuer, path_length=None), critical=True)
        .sign(issuer_key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


@pytest.fixture(scope="module")
def pki() -> Pki:
    """A self-signed CA and two client certificates it signed."""
    ca_key, client_key, other_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
    return Pki(
        ca=_certificate(CA_NAME, ca_key, CA_NAME, ca_key),
        client_cert=_certificate("alice", client_key, CA_NAME, ca_key),
        client_key=_pem_key(client_key),
        other_cert=_certificate("bob", other_key, CA_NAME, ca_key),
        other_key=_pem_key(other_key),
    )


def ca_subjects(context: ssl.SSLContext) -> list[Any]:
    return [cert["subject"] for cert in context.get_ca_certs()]


CA_SUBJECT = ((("commonName", CA_NAME),),)


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No proxy, kubeconfig or pod of the machine running the tests leaks in (CI may run in a pod)."""
    for name in list(os.environ):
        if name.lower().endswith("_proxy"):
            monkeypatch.delenv(name)
    for name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(kubeconfig, "SERVICE_ACCOUNT", tmp_path / "no-service-account")


@pytest.fixture
def loaded_chains(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[dict[str, Any]]:
    """What each ``load_cert_chain`` call read (paths, contents, the key's mode); temp files go to a private
    ``tmp`` folder of this test (the CI running beside may create ``t9k-cert-`` folders of its own)."""
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private_tmp))
    calls: list[dict[str, Any]] = []
    original = ssl.SSLContext.load_cert_chain

    def spy(self: ssl.SSLContext, certfile: str, keyfile: str | None = None, password: Any = None) -> None:
        calls.append(
            {
                "certfile": certfile,
                "keyfile": keyfile,
                "cert": Path(certfile).read_bytes(),
                "key": Path(keyfile).read_bytes() if keyfile else None,
                "key_mode": Path(keyfile).stat().st_mode & 0o777 if keyfile else None,
            }
        )
        original(self, certfile, keyfile, password)

    monkeypatch.setattr(ssl.SSLContext, "load_cert_chain", spy)
    return calls


# --- 1. context selection ----------------------------------------------------------------------------------


def two_contexts() -> dict[str, Any]:
    document = config()
    document["contexts"].append({"name": "other", "context": {"cluster": "c2", "user": "u"}})
    document["clusters"].append({"name": "c2", "cluster": {"server": "https://other.example"}})
    return document


def test_current_context_is_used_by_default() -> None:
    assert load(two_contexts()).host == SERVER


def test_explicit_context_overrides_current_context() -> None:
    assert load(two_contexts(), context="other").host == "https://other.example"


def test_missing_context_is_named() -> None:
    with pytest.raises(KubeconfigError, match="'staging'"):
        load(two_contexts(), context="staging")


def test_missing_cluster_is_named() -> None:
    document = config()
    document["contexts"][0]["context"]["cluster"] = "gone-cluster"
    with pytest.raises(KubeconfigError, match="cluster named 'gone-cluster'"):
        load(document)


def test_missing_user_is_named() -> None:
    document = config()
    document["contexts"][0]["context"]["user"] = "gone-user"
    with pytest.raises(KubeconfigError, match="user named 'gone-user'"):
        load(document)


def test_no_current_context_and_none_given() -> None:
    document = config()
    del document["current-context"]
    with pytest.raises(KubeconfigError, match="no current-context"):
        load(document)


def test_cluster_without_server() -> None:
    document = config()
    del document["clusters"][0]["cluster"]["server"]
    with pytest.raises(KubeconfigError, match="'c' has no server"):
        load(document)


# --- 2. host and TLS verification -------------------------------------------------------------------------


def test_server_url_kept_without_trailing_slash() -> None:
    endpoint = load(config({"server": "https://k8s.example:6443/", "tls-server-name": "api.internal"}))
    assert endpoint.host == "https://k8s.example:6443"
    assert endpoint.server_name == "api.internal"


def test_verification_is_on_by_default() -> None:
    """The counterpart of the two tests below: without them the server's certificate is checked."""
    endpoint = load(config())
    context = endpoint.ssl_context()
    assert endpoint.verify
    assert context is not None
    assert context.check_hostname
    assert context.verify_mode == ssl.CERT_REQUIRED


def test_insecure_skip_tls_verify() -> None:
    endpoint = load(config({"insecure-skip-tls-verify": True}))
    context = endpoint.ssl_context()
    assert not endpoint.verify
    assert context is not None
    assert not context.check_hostname
    assert context.verify_mode == ssl.CERT_NONE


def test_verify_ssl_false() -> None:
    endpoint = load(config(), verify_ssl=False)
    context = endpoint.ssl_context()
    assert not endpoint.verify
    assert context is not None
    assert not context.check_hostname
    assert context.verify_mode == ssl.CERT_NONE


def test_http_server_has_no_ssl_context() -> None:
    assert load(config({"server": "http://k8s.example:8080"})).ssl_context() is None


# --- 3. CA and client certificates ------------------------------------------------------------------------


def test_ca_data_is_trusted(pki: Pki) -> None:
    context = load(config({"certificate-authority-data": b64(pki.ca)})).ssl_context()
    assert context is not None
    assert ca_subjects(context) == [CA_SUBJECT]


def test_ca_file_relative_to_kubeconfig_folder(tmp_path: Path, pki: Pki) -> None:
    """A relative ``certificate-authority`` is relative to the kubeconfig's folder, not the cwd."""
    path = write_config(tmp_path / "conf", config({"certificate-authority": "pki/ca.crt"}))
    (tmp_path / "conf" / "pki").mkdir()
    (tmp_path / "conf" / "pki" / "ca.crt").write_bytes(pki.ca)
    endpoint = load(path)
    assert endpoint.ca_file == str(tmp_path / "conf" / "pki" / "ca.crt")
    context = endpoint.ssl_context()
    assert context is not None
    assert ca_subjects(context) == [CA_SUBJECT]


def test_client_certificate_data_loaded_and_temp_files_removed(
    pki: Pki, loaded_chains: list[dict[str, Any]]
) -> None:
    """ssl reads a chain only from files: they are written to a private ``t9k-cert-`` folder (the key
    owner-only) and that folder is gone once the context is built."""
    user = {"client-certificate-data": b64(pki.client_cert), "client-key-data": b64(pki.client_key)}
    assert load(config(user=user)).ssl_context() is not None
    [chain] = loaded_chains
    assert (chain["cert"], chain["key"]) == (pki.client_cert, pki.client_key)
    assert chain["key_mode"] == 0o600
    folder = Path(chain["keyfile"]).parent
    assert folder.parent == Path(tempfile.gettempdir())
    assert folder.name.startswith("t9k-cert-")
    assert not folder.exists()
    assert list(Path(tempfile.gettempdir()).iterdir()) == []


def test_client_certificate_files_relative_to_kubeconfig_folder(
    tmp_path: Path, pki: Pki, loaded_chains: list[dict[str, Any]]
) -> None:
    conf = tmp_path / "conf"
    path = write_config(conf, config(user={"client-certificate": "alice.crt", "client-key": "alice.key"}))
    (conf / "alice.crt").write_bytes(pki.client_cert)
    (conf / "alice.key").write_bytes(pki.client_key)
    assert load(path).ssl_context() is not None
    [chain] = loaded_chains
    assert (chain["certfile"], chain["keyfile"]) == (str(conf / "alice.crt"), str(conf / "alice.key"))


def test_mismatched_client_key_is_refused(pki: Pki) -> None:
    """The key is really loaded: one that does not match the certificate fails the context."""
    user = {"client-certificate-data": b64(pki.client_cert), "client-key-data": b64(pki.other_key)}
    with pytest.raises(ssl.SSLError):
        load(config(user=user)).ssl_context()


# --- 4. invalid base64 -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cluster", "user", "field"),
    [
        ({"certificate-authority-data": "not base64!"}, {}, "certificate-authority-data"),
        ({}, {"client-certificate-data": "%%%"}, "client-certificate-data"),
        ({}, {"client-key-data": "abc"}, "client-key-data"),  # bad padding
    ],
)
def test_invalid_base64_names_the_field(cluster: dict, user: dict, field: str) -> None:
    with pytest.raises(KubeconfigError, match=f"{field} is not base64"):
        load(config(cluster, user))


# --- 5. tokens and basic auth ------------------------------------------------------------------------------


def test_token() -> None:
    assert load(config(user={"token": "t"})).authorization() == {"Authorization": "Bearer t"}


def test_basic_auth() -> None:
    header = load(config(user={"username": "alice", "password": "s3:cret"})).authorization()["Authorization"]
    scheme, pair = header.split(" ")
    assert scheme == "Basic"
    assert base64.b64decode(pair) == b"alice:s3:cret"


def test_no_credential_no_header() -> None:
    assert load(config()).authorization() == {}


def test_token_file_relative_and_reread_after_ttl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The kubelet rotates projected tokens: the file is cached for the TTL, then read again."""
    path = write_config(tmp_path / "conf", config(user={"tokenFile": "token"}))
    (tmp_path / "conf" / "token").write_text("first\n")
    endpoint = load(path)
    assert endpoint.authorization() == {"Authorization": "Bearer first"}
    (tmp_path / "conf" / "token").write_text("second\n")
    assert endpoint.authorization() == {"Authorization": "Bearer first"}  # within the TTL: cached
    monkeypatch.setattr(kubeconfig, "TOKEN_FILE_TTL_SECONDS", -1.0)  # every read is past the TTL
    assert endpoint.authorization() == {"Authorization": "Bearer second"}


def test_inline_token_wins_over_token_file(tmp_path: Path) -> None:
    """As client-go: the inline token is used and the (here missing) file is never read."""
    path = write_config(tmp_path / "conf", config(user={"token": "inline", "tokenFile": "missing"}))
    assert load(path).authorization() == {"Authorization": "Bearer inline"}


def test_missing_token_file_is_named(tmp_path: Path) -> None:
    path = write_config(tmp_path / "conf", config(user={"tokenFile": "no-such-token"}))
    with pytest.raises(KubeconfigError, match=r"tokenFile .*no-such-token"):
        load(path).authorization()


# --- 6. auth-provider --------------------------------------------------------------------------------------


def test_auth_provider_is_refused_with_the_way_out() -> None:
    with pytest.raises(KubeconfigError, match=r"auth-provider 'gcp'.*exec credential plugin"):
        load(config(user={"auth-provider": {"name": "gcp", "config": {"access-token": "x"}}}))


# --- 7. exec plugins ---------------------------------------------------------------------------------------

#: Counts its runs in ``runs``, records its argv and environment in ``seen.json``; prints a token
#: (``exec-token-<run>``) expiring at ``$EXPIRY`` if set.
RECORDING_PLUGIN = """
here = Path(__file__).parent
run = int((here / "runs").read_text()) + 1 if (here / "runs").exists() else 1
(here / "runs").write_text(str(run))
(here / "seen.json").write_text(json.dumps({"args": sys.argv[1:], "env": dict(os.environ)}))
status = {"token": f"exec-token-{run}"}
if os.environ.get("EXPIRY"):
    status["expirationTimestamp"] = os.environ["EXPIRY"]
print(json.dumps({"apiVersion": API_VERSION, "kind": "ExecCredential", "status": status}))
"""


def write_plugin(folder: Path, body: str, name: str = "plugin.py") -> Path:
    """An executable Python script ``folder/name`` running ``body`` (json, os, sys, Path imported)."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / name
    header = f"#!{sys.executable}\nimport json, os, sys\nfrom pathlib import Path\n"
    header += f"API_VERSION = {API_VERSION!r}\n"
    script.write_text(header + textwrap.dedent(body))
    script.chmod(0o755)
    return script


def exec_user(command: str | Path, *, expiry: str | None = None, **spec: Any) -> dict[str, Any]:
    env = [{"name": "EXPIRY", "value": expiry}] if expiry else []
    return {"exec": {"apiVersion": API_VERSION, "command": str(command), "env": env, **spec}}


def runs(folder: Path) -> int:
    return int((folder / "runs").read_text()) if (folder / "runs").exists() else 0


def seen(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "seen.json").read_text())


def iso(offset: datetime.timedelta) -> str:
    moment = datetime.datetime.now(datetime.timezone.utc) + offset
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_exec_token_is_used(tmp_path: Path) -> None:
    plugin = write_plugin(tmp_path, RECORDING_PLUGIN)
    endpoint = load(config(user=exec_user(plugin)))
    assert runs(tmp_path) == 0  # run on first use, not on load
    assert endpoint.authorization() == {"Authorization": "Bearer exec-token-1"}


def test_exec_gets_exec_info_env_and_args(tmp_path: Path) -> None:
    plugin = write_plugin(tmp_path, RECORDING_PLUGIN)
    user = exec_user(
        plugin,
        apiVersion="client.authentication.k8s.io/v1beta1",
        args=["get-token", "--cluster", 7],
        env=[{"name": "PLUGIN_REGION", "value": "eu-west-1"}],
        provideClusterInfo=True,
    )
    load(config(user=user)).authorization()
    recorded = seen(tmp_path)
    assert recorded["args"] == ["get-token", "--cluster", "7"]
    assert recorded["env"]["PLUGIN_REGION"] == "eu-west-1"
    info = json.loads(recorded["env"]["KUBERNETES_EXEC_INFO"])
    assert info["apiVersion"] == "client.authentication.k8s.io/v1beta1"
    assert info["kind"] == "ExecCredential"
    assert info["spec"]["interactive"] is False
    assert info["spec"]["cluster"]["server"] == SERVER


def test_exec_relative_command_resolves_against_kubeconfig_folder(tmp_path: Path) -> None:
    """``./bin/plugin.py`` is relative to the kubeconfig's folder, not to the cwd (the repository here)."""
    conf = tmp_path / "conf"
    write_plugin(conf / "bin", RECORDING_PLUGIN)
    path = write_config(conf, config(user=exec_user("./bin/plugin.py")))
    assert load(path).authorization() == {"Authorization": "Bearer exec-token-1"}
    assert runs(conf / "bin") == 1


def test_exec_runs_once_while_credential_is_valid(tmp_path: Path) -> None:
    plugin = write_plugin(tmp_path, RECORDING_PLUGIN)
    endpoint = load(config(user=exec_user(plugin, expiry=iso(datetime.timedelta(hours=1)))))
    for _ in range(3):
        assert endpoint.authorization() == {"Authorization": "Bearer exec-token-1"}
    assert endpoint.ssl_context() is not None
    assert runs(tmp_path) == 1


def test_exec_runs_again_once_credential_expired(tmp_path: Path) -> None:
    plugin = write_plugin(tmp_path, RECORDING_PLUGIN)
    endpoint = load(config(user=exec_user(plugin, expiry="2000-01-01T00:00:00Z")))
    assert endpoint.authorization() == {"Authorization": "Bearer exec-token-1"}
    assert endpoint.stale()
    assert endpoint.authorization() == {"Authorization": "Bearer exec-token-2"}
    assert runs(tmp_path) == 2


#: Prints ``alice.crt``/``alice.key`` on its first run, ``bob.*`` on the next, the credential already expired.
CERT_PLUGIN = """
here = Path(__file__).parent
run = int((here / "runs").read_text()) + 1 if (here / "runs").exists() else 1
(here / "runs").write_text(str(run))
name = "alice" if run == 1 else "bob"
status = {
    "clientCertificateData": (here / f"{name}.crt").read_text(),
    "clientKeyData": (here / f"{name}.key").read_text(),
    "expirationTimestamp": "2000-01-01T00:00:00Z",
}
print(json.dumps({"apiVersion": API_VERSION, "kind": "ExecCredential", "status": status}))
"""


def test_exec_client_certificate_rebuilds_ssl_context(
    tmp_path: Path, pki: Pki, loaded_chains: list[dict[str, Any]]
) -> None:
    folder = tmp_path / "plugin"
    plugin = write_plugin(folder, CERT_PLUGIN)
    for name, cert, key in (
        ("alice", pki.client_cert, pki.client_key),
        ("bob", pki.other_cert, pki.other_key),
    ):
        (folder / f"{name}.crt").write_bytes(cert)
        (folder / f"{name}.key").write_bytes(key)
    endpoint = load(config(user=exec_user(plugin)))
    first = endpoint.ssl_context()
    assert endpoint.authorization() == {}  # a certificate, no token
    second = endpoint.ssl_context()
    assert first is not None and second is not None
    assert second is not first
    assert [chain["cert"] for chain in loaded_chains] == [pki.client_cert, pki.other_cert]
    assert list(Path(tempfile.gettempdir()).iterdir()) == []


def test_exec_failure_reports_code_stderr_and_install_hint(tmp_path: Path) -> None:
    plugin = write_plugin(tmp_path, 'sys.stderr.write("session expired, log in again\\n")\nsys.exit(3)\n')
    endpoint = load(config(user=exec_user(plugin, installHint="install t9k-login")))
    with pytest.raises(KubeconfigError, match=r"exited 3: session expired, log in again.*install t9k-login"):
        endpoint.authorization()


def test_exec_missing_command_reports_install_hint() -> None:
    endpoint = load(config(user=exec_user("t9k-no-such-plugin", installHint="brew install t9k-login")))
    with pytest.raises(KubeconfigError, match=r"t9k-no-such-plugin.*could not run.*brew install t9k-login"):
        endpoint.authorization()


@pytest.mark.parametrize(
    ("output", "message"),
    [
        (json.dumps({"apiVersion": API_VERSION, "kind": "ExecCredential", "status": {}}), "neither"),
        ("not json at all", "no ExecCredential"),
    ],
)
def test_exec_without_credential(tmp_path: Path, output: str, message: str) -> None:
    plugin = write_plugin(tmp_path, f"print({output!r})\n")
    with pytest.raises(KubeconfigError, match=message):
        load(config(user=exec_user(plugin))).authorization()


# --- 8. in-cluster -----------------------------------------------------------------------------------------


@pytest.fixture
def pod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pki: Pki) -> Path:
    """A pod's environment and service account folder (token, ca.crt)."""
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text("sa-token\n")
    (account / "ca.crt").write_bytes(pki.ca)
    monkeypatch.setattr(kubeconfig, "SERVICE_ACCOUNT", account)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    return account


def test_in_cluster(pod: Path) -> None:
    endpoint = load(in_cluster=True)
    assert endpoint.host == "https://10.96.0.1:443"
    assert endpoint.authorization() == {"Authorization": "Bearer sa-token"}
    assert endpoint.ca_file == str(pod / "ca.crt")
    context = endpoint.ssl_context()
    assert context is not None
    assert ca_subjects(context) == [CA_SUBJECT]


def test_in_cluster_ipv6_host_is_bracketed(pod: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00:10:96::1")
    assert load(in_cluster=True).host == "https://[fd00:10:96::1]:443"


def test_default_prefers_service_account_in_a_pod(
    pod: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(write_config(tmp_path / "conf", config())))
    assert load(None).host == "https://10.96.0.1:443"


def test_default_in_a_pod_without_token_reads_kubeconfig(
    pod: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pod without a mounted token (automountServiceAccountToken: false) uses the kubeconfig."""
    (pod / "token").unlink()
    monkeypatch.setenv("KUBECONFIG", str(write_config(tmp_path / "conf", config())))
    assert load(None).host == SERVER


def test_default_outside_a_pod_reads_first_kubeconfig_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = write_config(tmp_path / "a", config({"server": "https://first.example"}))
    second = write_config(tmp_path / "b", config({"server": "https://second.example"}))
    monkeypatch.setenv("KUBECONFIG", f"{first}{os.pathsep}{second}")
    assert load(None).host == "https://first.example"


def test_default_without_kubeconfig_variable_reads_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_config(tmp_path / "home" / ".kube", config({"server": "https://home.example"}))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert load(None).host == "https://home.example"


def test_in_cluster_outside_a_pod() -> None:
    with pytest.raises(KubeconfigError, match="not running in a pod"):
        load(in_cluster=True)


def test_in_cluster_without_token_file(pod: Path) -> None:
    """The variables alone do not make a pod: the service account token must be there too."""
    (pod / "token").unlink()
    with pytest.raises(KubeconfigError, match="not running in a pod"):
        load(in_cluster=True)


def test_unreadable_kubeconfig_file(tmp_path: Path) -> None:
    with pytest.raises(KubeconfigError, match=r"cannot read kubeconfig .*nowhere"):
        load(tmp_path / "nowhere")


# --- 9. proxy ----------------------------------------------------------------------------------------------


def test_cluster_proxy_url_wins_over_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://env-proxy:3128")
    assert load(config({"proxy-url": "socks5://cluster-proxy:1080"})).proxy == "socks5://cluster-proxy:1080"


def test_https_proxy_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://env-proxy:3128")
    assert load(config()).proxy == "http://env-proxy:3128"


def test_no_proxy_without_environment() -> None:
    assert load(config()).proxy is None


def test_https_proxy_not_used_for_http_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://env-proxy:3128")
    assert load(config({"server": "http://k8s.example:8080"})).proxy is None


@pytest.mark.parametrize("no_proxy", ["k8s.example", ".example", "other.org, example", "*"])
def test_no_proxy_covers_host(monkeypatch: pytest.MonkeyPatch, no_proxy: str) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://env-proxy:3128")
    monkeypatch.setenv("NO_PROXY", no_proxy)
    assert load(config()).proxy is None


def test_no_proxy_not_covering_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://env-proxy:3128")
    monkeypatch.setenv("NO_PROXY", "other.example")
    assert load(config()).proxy == "http://env-proxy:3128"


def test_no_proxy_cidr_covers_in_cluster_host(pod: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """client-go (Go's httpproxy) reads NO_PROXY entries as CIDRs too, as pods behind a proxy usually set
    them (the service network): the API server's address must not go through the proxy."""
    monkeypatch.setenv("HTTPS_PROXY", "http://env-proxy:3128")
    monkeypatch.setenv("NO_PROXY", "10.96.0.0/12")
    assert load(in_cluster=True).proxy is None


# --- 10. parse_kubeconfig ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [config(), json.dumps(config()), yaml.safe_dump(config()), yaml.safe_dump(config()).encode()],
    ids=["dict", "json", "yaml", "yaml-bytes"],
)
def test_parse_kubeconfig_accepts(value: Any) -> None:
    assert parse_kubeconfig(value, "src") == config()


@pytest.mark.parametrize(
    "value",
    ["- a\n- b\n", "[1, 2]", "just text", "{unclosed: [", "", [config()]],
    ids=["yaml-list", "json-list", "scalar", "broken-yaml", "empty", "python-list"],
)
def test_parse_kubeconfig_refuses(value: Any) -> None:
    with pytest.raises(KubeconfigError, match="src: not a kubeconfig document"):
        parse_kubeconfig(value, "src")
