"""ServiceAccount tokens: RS256 JWTs with kube-apiserver's claims, signed by a key kept in ``STATE/pki``.

The claims are those of a bound token (``pkg/serviceaccount/claims.go``): ``iss``, ``sub``, ``aud``,
``exp``, ``iat``, ``nbf``, ``jti`` and the private ``kubernetes.io`` claim naming the namespace, the
ServiceAccount and, when bound, the pod. Whether the ServiceAccount and pod still exist is checked by the
authenticator.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

#: ``--service-account-issuer``, also the API server's audience (``--api-audiences`` defaults to it)
ISSUER = "https://kubernetes.default.svc.cluster.local"
_HEADER_ALG = "RS256"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class TokenSigner:
    """Issues and verifies the tokens; the key is made once per state directory (tokens survive restarts)."""

    def __init__(self, key_path: Path) -> None:
        if not key_path.exists():
            key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            key_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            pem = key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
            tmp = key_path.with_name(f".{key_path.name}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(pem)
            os.replace(tmp, key_path)
        loaded = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        assert isinstance(loaded, rsa.RSAPrivateKey)
        self._key = loaded
        public = loaded.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        self._kid = _b64(hashlib.sha256(public).digest())

    def issue(
        self,
        namespace: str,
        account: dict[str, Any],
        audiences: list[str],
        seconds: int,
        pod: dict[str, Any] | None = None,
    ) -> tuple[str, int]:
        """A token for ``account`` (bound to ``pod`` when given) and its expiry (Unix seconds)."""
        now = int(time.time())
        private: dict[str, Any] = {
            "namespace": namespace,
            "serviceaccount": {"name": account["metadata"]["name"], "uid": account["metadata"]["uid"]},
        }
        if pod is not None:
            private["pod"] = {"name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}
        claims = {
            "aud": audiences,
            "exp": now + seconds,
            "iat": now,
            "iss": ISSUER,
            "jti": str(uuid.uuid4()),
            "kubernetes.io": private,
            "nbf": now,
            "sub": f"system:serviceaccount:{namespace}:{account['metadata']['name']}",
        }
        header = _b64(json.dumps({"alg": _HEADER_ALG, "kid": self._kid}, separators=(",", ":")).encode())
        payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
        signature = self._key.sign(f"{header}.{payload}".encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{header}.{payload}.{_b64(signature)}", now + seconds

    def verify(self, token: str) -> dict[str, Any] | None:
        """The claims of a token this signer issued, still in its validity window and for this API server;
        None for anything else."""
        parts = token.split(".")
        if len(parts) != 3:
            return None
        try:
            header = json.loads(_unb64(parts[0]))
            claims = json.loads(_unb64(parts[1]))
            signature = _unb64(parts[2])
        except (ValueError, UnicodeDecodeError):
            return None
        if not isinstance(header, dict) or header.get("alg") != _HEADER_ALG or not isinstance(claims, dict):
            return None
        try:
            self._key.public_key().verify(
                signature, f"{parts[0]}.{parts[1]}".encode(), padding.PKCS1v15(), hashes.SHA256()
            )
        except InvalidSignature:
            return None
        now = time.time()
        audiences = claims.get("aud")
        audiences = [audiences] if isinstance(audiences, str) else audiences
        if (
            claims.get("iss") != ISSUER
            or not isinstance(audiences, list)
            or ISSUER not in audiences
            or not isinstance(claims.get("exp"), int)
            or claims["exp"] < now
            or (isinstance(claims.get("nbf"), int) and claims["nbf"] > now + 60)
        ):
            return None
        return claims
