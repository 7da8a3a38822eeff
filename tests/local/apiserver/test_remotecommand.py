"""The remote-command protocol pieces without a cluster: negotiation, options, statuses, resize messages."""

from __future__ import annotations

import pytest
from aiohttp.test_utils import make_mocked_request

from t9k_provider.local.apiserver import remotecommand
from t9k_provider.local.apiserver.generic import errors


def _request(query: str = "", **headers: str):
    return make_mocked_request("POST", f"/api/v1/namespaces/n/pods/p/exec?{query}", headers=headers)


@pytest.mark.parametrize(
    ("offered", "chosen"),
    [
        ("v5.channel.k8s.io", "v5.channel.k8s.io"),
        ("v4.channel.k8s.io, v5.channel.k8s.io", "v4.channel.k8s.io"),  # the client's order wins
        ("x.example, base64.channel.k8s.io", "base64.channel.k8s.io"),
        ("", "channel.k8s.io"),  # none offered: version 1, binary
    ],
)
def test_negotiation_follows_the_client_preference(offered: str, chosen: str) -> None:
    headers = {"Upgrade": "websocket"}
    if offered:
        headers["Sec-WebSocket-Protocol"] = offered
    assert remotecommand.negotiate(_request(**headers)).name == chosen


def test_negotiation_rejects_spdy_plain_requests_and_unknown_protocols() -> None:
    for headers in ({"Upgrade": "SPDY/3.1"}, {}):
        with pytest.raises(errors.ApiError, match="WebSocket only") as info:
            remotecommand.negotiate(_request(**headers))
        assert info.value.code == 400
    with pytest.raises(errors.ApiError, match="not supported"):
        remotecommand.negotiate(
            _request(**{"Upgrade": "websocket", "Sec-WebSocket-Protocol": "v9.channel.k8s.io"})
        )


def test_options_repeat_command_and_merge_stderr_into_a_terminal() -> None:
    opts = remotecommand.parse_options(
        _request("command=sh&command=-c&command=echo+hi&stdout=true&stderr=True&tty=1&container=c"),
        needs_command=True,
    )
    assert opts.command == ["sh", "-c", "echo hi"]
    assert (opts.container, opts.stdout, opts.stderr, opts.tty, opts.stdin) == ("c", True, False, True, False)
    with pytest.raises(errors.ApiError, match="at least one command"):
        remotecommand.parse_options(_request("stdout=1"), needs_command=True)
    with pytest.raises(errors.ApiError, match="at least 1 of stdin, stdout, stderr"):
        remotecommand.parse_options(_request("command=ls"), needs_command=True)
    with pytest.raises(errors.ApiError, match="invalid syntax"):
        remotecommand.parse_options(_request("command=ls&stdout=maybe"), needs_command=True)
    assert remotecommand.parse_options(_request("stdout=1"), needs_command=False).command == []


def test_exit_code_status_is_what_clients_parse() -> None:
    status = remotecommand.exit_code_status(["sh", "-c", "exit 3"], 3)
    assert status["reason"] == "NonZeroExitCode"
    assert status["details"]["causes"] == [{"reason": "ExitCode", "message": "3"}]
    assert status["message"].endswith("error executing command [sh -c exit 3], exit code 3")
    assert remotecommand.success_status() == {"metadata": {}, "status": "Success"}
    internal = remotecommand.internal_error_status('exec: "x": executable file not found in $PATH')
    assert (internal["reason"], internal["code"]) == ("InternalError", 500)
    assert internal["message"].startswith("Internal error occurred: exec:")


@pytest.mark.parametrize(
    ("data", "size"),
    [
        (b'{"Width":120,"Height":40}', (120, 40)),
        (b'{"Width":0,"Height":0}', None),  # a terminal without a size: nothing to apply
        (b'{"Width":"wide"}', None),
        (b"not json", None),
    ],
)
def test_resize_messages(data: bytes, size: tuple[int, int] | None) -> None:
    assert remotecommand.parse_resize(data) == size
