"""What the API server asks of the node a pod runs on, as Kubernetes' apiserver asks the kubelet's server
(``/containerLogs``, ``/exec``, ``/attach``) instead of reading node state: declared here, where it is used,
implemented by the kubelet (`t9k_provider.local.kubelet.streaming`), handed to the server by the wiring."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from typing import Any, Protocol

from t9k_provider.local.machinery.streams import ExecResult, StreamClient, StreamOptions


class NodeStreams(Protocol):
    """A node's streaming endpoints; ``restart_count`` names the run of the container (its status')."""

    def is_running(self, pod: dict[str, Any], container: str, restart_count: int) -> bool:
        """Whether that run of the container has a live process now."""
        ...

    async def exec(
        self,
        pod: dict[str, Any],
        container: str,
        restart_count: int,
        opts: StreamOptions,
        client: StreamClient,
    ) -> ExecResult:
        """Run ``opts.command`` in the container with the client's streams."""
        ...

    async def attach(
        self,
        pod: dict[str, Any],
        container: str,
        restart_count: int,
        opts: StreamOptions,
        client: StreamClient,
    ) -> bool:
        """Forward the container's output from now on: True once it exited, False if the client left."""
        ...

    def container_log(
        self,
        pod: dict[str, Any],
        container: str,
        restart_count: int,
        *,
        follow: bool,
        timestamps: bool,
        tail_lines: int | None,
        since_time: datetime | None,
        limit_bytes: int | None,
        pod_gone: Callable[[], Awaitable[bool]],
    ) -> AsyncIterator[bytes]:
        """The run's log as ``pods/log`` serves it; a follow ends when the run ends or ``pod_gone()``."""
        ...
