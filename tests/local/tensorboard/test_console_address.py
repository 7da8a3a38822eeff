"""Where the console answers (``console.address``): the socket the server opens for it and publishes, the
same port for a restarted cluster; and no link templates in the Airflow connection (``local.connection``) from
a ``console.json`` another server left."""

from __future__ import annotations

import json
from pathlib import Path

from t9k_provider.local import connection
from t9k_provider.local.console import address
from t9k_provider.local.state import StateDir


def test_listen_publishes_where_the_console_answers_and_keeps_the_port(tmp_path: Path) -> None:
    sock = address.listen(tmp_path)
    port = sock.getsockname()[1]
    try:
        assert sock.getsockname()[0] == "127.0.0.1"
        url = f"http://127.0.0.1:{port}"
        assert address.read_console(tmp_path) == {
            "url": url,
            "jobUrlTemplate": url + "/jobs/{namespace}/{kind}/{name}",
            "tensorboardUrlTemplate": url + "/tensorboards/{namespace}/{name}",
            "serverPid": address.os.getpid(),
        }
        other = tmp_path / "other"
        other.mkdir()
        (other / address.CONSOLE_FILE).write_text(json.dumps({"url": url}))
        taken = address.listen(other)  # its previous port is taken: any other
        assert taken.getsockname()[1] != port
        taken.close()
    finally:
        sock.close()
    again = address.listen(tmp_path)  # a restarted cluster: the previous port, now free
    assert again.getsockname()[1] == port
    again.close()


def test_no_templates_without_a_running_server_that_published_them(tmp_path: Path) -> None:
    state = StateDir(tmp_path)
    state.ensure()
    url = "http://127.0.0.1:1"
    left = {"url": url, "jobUrlTemplate": url + "/j", "tensorboardUrlTemplate": url + "/t", "serverPid": 1}
    (tmp_path / address.CONSOLE_FILE).write_text(json.dumps(left))
    assert connection.running_console(state) is None  # no server runs here
    assert connection.airflow_connection(state) == {
        "conn_type": "kubernetes",
        "extra": {"kube_config_path": str(tmp_path / "kubeconfig")},
    }
