"""The API server's own controllers, as kube-apiserver's post-start hooks and kube-controller-manager's
namespace, garbage-collector, disruption and root-CA publisher run against its storage: `ServerControllers`
runs them (`crds`, `namespaces`, `garbagecollector`, `apiservices`, `clusterroles`, `disruption`, `eventttl`)
in the server's process as one task woken by store events and when a controller says a pass is due (a backoff
ending, a budget's recheck), never on a timer of its own: an idle cluster's server stays idle. The wiring
hands it to the server.

Nothing stops that task: each controller handles each object apart (`serverside.Retries`: a failure is logged
with the object's key and backed off), a controller whose pass fails is logged and runs again at the next
pass, and so does the event expiry."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import datetime, timezone

from t9k_provider.kube.timeouts import within
from t9k_provider.local.apiserver.objects import Objects
from t9k_provider.local.apiserver.served import ServedResources
from t9k_provider.local.controllers.apiservices import ApiServiceController
from t9k_provider.local.controllers.clusterroles import ClusterRoleAggregator
from t9k_provider.local.controllers.crds import CrdController
from t9k_provider.local.controllers.disruption import DisruptionController
from t9k_provider.local.controllers.eventttl import EventExpiry
from t9k_provider.local.controllers.garbagecollector import GarbageCollector
from t9k_provider.local.controllers.namespaces import NamespaceController
from t9k_provider.local.controllers.serverside import RETRY_BASE_DELAY, ServerController, ServerSide
from t9k_provider.local.storage.store import Event

log = logging.getLogger(__name__)
#: Expired events are looked for this often.
EVENT_SWEEP_SECONDS = 60
#: At most ~20 passes a second: a write burst is handled in batches. Also the slack after a due time, so
#: that the pass finds the backoff over (a timer may fire a clock tick early).
MIN_PASS_INTERVAL = 0.05


class ServerControllers:
    """Every server-side controller, in one task woken by the store's events."""

    def __init__(self, objects: Objects, registry: ServedResources, root_ca: str = "") -> None:
        side = ServerSide(objects, registry)
        self.garbage = GarbageCollector(side)
        self.disruption = DisruptionController(side)
        self.controllers: list[ServerController] = [
            CrdController(side),
            NamespaceController(side, root_ca),
            self.garbage,
            ApiServiceController(side),
            ClusterRoleAggregator(side),
            self.disruption,
        ]
        self.events = EventExpiry(side)
        self._wake = asyncio.Event()
        self._failed = False  # the last pass of a controller raised
        objects.store.subscribe(self._on_event)

    def _on_event(self, event: Event) -> None:
        """Called inside the store's commit: a failure here must not fail the client's write."""
        self.disruption.note(event)
        try:
            self.garbage.note(event)
        except Exception:
            log.exception("garbage collector: noting %s failed; checking every dependent", event.key)
            self.garbage.check_all()
        self._wake.set()

    def reconcile(self) -> None:
        """One pass of every controller; each is independent and logs (never raises) its failures."""
        self._failed = False
        for controller in self.controllers:
            try:
                controller.sync()
            except Exception:
                log.exception("controller %s failed", type(controller).__name__)
                self._failed = True

    def _quiet_for(self, until_sweep: float) -> float:
        """How long to wait for a change: until the first pass a controller says is due, or the event
        sweep."""
        dues = [until_sweep]
        for controller in self.controllers:
            try:
                due = controller.due_in()
            except Exception:  # as a failed pass: it must not end the task
                log.exception("controller %s: when a pass is due is not known", type(controller).__name__)
                self._failed = True
            else:
                dues += [due + MIN_PASS_INTERVAL] if due is not None else []
        if self._failed:  # a pass that raised is tried again soon, as a key after its first failure
            dues.append(RETRY_BASE_DELAY)
        return max(0.0, min(dues))

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        next_expiry = loop.time()
        while True:
            with contextlib.suppress(asyncio.TimeoutError):
                await within(self._wake.wait(), self._quiet_for(next_expiry - loop.time()))
            self._wake.clear()
            self.reconcile()
            if loop.time() >= next_expiry:
                next_expiry = loop.time() + EVENT_SWEEP_SECONDS
                try:
                    self.events.expire(datetime.now(timezone.utc))
                except Exception:
                    log.exception("event expiry failed")
            await asyncio.sleep(MIN_PASS_INTERVAL)
