"""The API client resolves its proxy from the environment once, not on every request."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from t9k_provider.kube.api import api_client

SERVER = "https://127.0.0.1:6443"


def kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": SERVER, "insecure-skip-tls-verify": True}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


@pytest.mark.parametrize(
    ("env", "proxy"),
    [
        ({}, None),
        ({"HTTPS_PROXY": "http://127.0.0.1:3128"}, "http://127.0.0.1:3128"),
        ({"https_proxy": "http://127.0.0.1:3128", "NO_PROXY": "127.0.0.1"}, None),
        ({"HTTP_PROXY": "http://127.0.0.1:3128"}, None),  # the server is https
    ],
)
async def test_proxy_comes_from_the_environment_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str], proxy: str | None
) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    client = await api_client(kubeconfig(tmp_path))
    try:
        assert client.endpoint.proxy == proxy
        assert not client.http.trust_env  # no per-request proxy/.netrc lookups
    finally:
        await client.close()
