"""The state directory's CA and serving certificate: the pods' gateway is named, and a start on another pod
subnet reissues the server certificate from the kept CA key, so kubeconfigs (they carry the CA) stay valid."""

from __future__ import annotations

from pathlib import Path

from cryptography import x509

from t9k_provider.local.tls import ensure_pki


def _addresses(path: Path) -> set[str]:
    names = x509.load_pem_x509_certificate(path.read_bytes()).extensions
    san = names.get_extension_for_class(x509.SubjectAlternativeName).value
    return {str(ip) for ip in san.get_values_for_type(x509.IPAddress)}


def test_the_serving_certificate_names_loopback_and_the_pods_gateway(tmp_path: Path) -> None:
    pki = ensure_pki(tmp_path, "10.251.3.1")
    assert _addresses(pki.server_cert) == {"127.0.0.1", "::1", "10.251.3.1"}
    assert (tmp_path / "pki" / "ca.key").stat().st_mode & 0o777 == 0o600


def test_another_subnet_reissues_the_server_certificate_under_the_same_ca(tmp_path: Path) -> None:
    first = ensure_pki(tmp_path, "10.251.3.1")
    ca, key = first.ca_cert.read_bytes(), first.server_key.read_bytes()
    again = ensure_pki(tmp_path, "10.251.3.1")
    assert again.server_key.read_bytes() == key, "the same subnet reuses the certificate"
    moved = ensure_pki(tmp_path, "10.251.9.1")
    assert moved.ca_cert.read_bytes() == ca, "the CA, which kubeconfigs carry, stays"
    assert "10.251.9.1" in _addresses(moved.server_cert)
    ca_cert = x509.load_pem_x509_certificate(ca)
    server = x509.load_pem_x509_certificate(moved.server_cert.read_bytes())
    server.verify_directly_issued_by(ca_cert)


def test_a_state_directory_without_a_ca_key_gets_a_new_ca_when_its_certificate_does_not_fit(
    tmp_path: Path,
) -> None:
    """Directories from before the CA key was kept: reissuing needs the key, so the whole PKI is new."""
    old = ensure_pki(tmp_path)
    (tmp_path / "pki" / "ca.key").unlink()
    ca = old.ca_cert.read_bytes()
    assert ensure_pki(tmp_path).ca_cert.read_bytes() == ca, "a certificate that fits is kept"
    new = ensure_pki(tmp_path, "10.251.4.1")
    assert new.ca_cert.read_bytes() != ca
    assert "10.251.4.1" in _addresses(new.server_cert)
