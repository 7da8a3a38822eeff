"""free_port: ports a later bind gets, never from the range outgoing connections draw from."""

from __future__ import annotations

import socket

from t9k_provider.testing.ports import PORT_RANGE, _bindable, free_port


def test_ports_are_distinct_bindable_and_below_the_ephemeral_range() -> None:
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == 50
    assert all(PORT_RANGE[0] <= p <= PORT_RANGE[1] for p in ports)
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        ephemeral_low = int(f.read().split()[0])
    assert PORT_RANGE[1] < ephemeral_low
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", ports[-1]))


def test_a_port_in_use_is_not_bindable() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", free_port()))
        assert not _bindable(held.getsockname()[1])
