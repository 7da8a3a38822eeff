"""A private CA and a serving certificate for 127.0.0.1 and the pods' gateway, kept in ``STATE/pki``.

The server speaks HTTPS because kubectl (client-go) only attaches a kubeconfig's bearer token when the
transport is TLS; over plain HTTP every request would be anonymous and get 401.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from t9k_provider.local.state import write_atomic

VALIDITY = datetime.timedelta(days=3650)


@dataclass(frozen=True)
class Pki:
    ca_cert: Path
    server_cert: Path
    server_key: Path

    def server_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.server_cert, self.server_key)
        return context


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def ensure_pki(state_dir: Path, pod_gateway: str | None = None) -> Pki:
    """The CA and the server certificate, created on first use and reused later (kubeconfigs stay valid).

    The server certificate names 127.0.0.1, localhost and ``pod_gateway``, where netns pods reach the server;
    a start on another pod subnet reissues it with the kept CA key, as kubeadm reissues from its ``ca.key``.
    """
    directory = state_dir / "pki"
    pki = Pki(directory / "ca.crt", directory / "server.crt", directory / "server.key")
    ca_key_path = directory / "ca.key"
    addresses = ["127.0.0.1", "::1", *([pod_gateway] if pod_gateway else [])]
    if pki.ca_cert.exists() and pki.server_cert.exists() and pki.server_key.exists():
        if set(addresses) <= _addresses(pki.server_cert):
            return pki
        if ca_key_path.exists():
            ca_cert = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
            ca_key = serialization.load_pem_private_key(ca_key_path.read_bytes(), None)
            assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
            _issue_server(pki, ca_cert.subject, ca_key, addresses)
            return pki
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("t9k-local-ca")
    now = _now()
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    write_atomic(ca_key_path, _private_pem(ca_key), 0o600)
    _issue_server(pki, ca_name, ca_key, addresses)
    write_atomic(pki.ca_cert, ca_cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return pki


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)


def _private_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _addresses(cert_path: Path) -> set[str]:
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    return {str(ip) for ip in names.get_values_for_type(x509.IPAddress)}


def _issue_server(
    pki: Pki, ca_name: x509.Name, ca_key: ec.EllipticCurvePrivateKey, addresses: list[str]
) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = [x509.DNSName("localhost")]
    names += [x509.IPAddress(ipaddress.ip_address(address)) for address in addresses]
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("t9k-local-apiserver"))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    write_atomic(pki.server_key, _private_pem(key), 0o600)
    write_atomic(pki.server_cert, cert.public_bytes(serialization.Encoding.PEM), 0o644)
