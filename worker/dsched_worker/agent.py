"""The worker's presence in the cluster registry: its epoch, its ephemeral node and its heartbeat.

At start the agent takes a fresh epoch (``registry.next_epoch()``) and registers the ephemeral node
``<WORKERS_PATH>/<group>@<address>`` whose data is a serialized ``dsched.v1.Heartbeat``. It
refreshes the heartbeat every ``heartbeat_interval`` seconds, and at once when :meth:`Agent.poke`
says the slots went from full to not full or back. The heartbeat says BUSY while every slot is
taken or a host usage is over its threshold (:func:`dsched_server.heartbeat.status_for`).

Connection states (see :mod:`dsched_server.coord.registry`):

- SUSPENDED: new dispatches are refused until CONNECTED again; running tasks carry on. If the
  connection is not back within ``fence_after`` seconds (see ``fence_deadline``), the agent fences
  itself as for LOST without waiting to hear it: a paused or partitioned worker learns that its
  session expired only when it reconnects, and by then masters may be re-running its tasks
  elsewhere. If the session turns out to have survived, the worker still takes a new epoch, so the
  masters fail over the attempts it killed instead of waiting for their results forever.
- LOST: the session and its node are gone, and a master may already have failed this worker's tasks
  over. The agent fences at once (``on_lost``: kill every task, report nothing), waits for the
  registry to reconnect, then takes a *new* epoch and registers again (``on_epoch``). Dispatches are
  refused until then.

Host load figures come from one seam, ``sampler`` (normally
:func:`dsched_server.heartbeat.sample_host`); the node data is made by
:func:`dsched_server.heartbeat.encode_heartbeat`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime

from dsched.backoff import Backoff
from dsched_server.constants import WORKERS_PATH
from dsched_server.coord.registry import ConnectionState, Registry
from dsched_server.heartbeat import (
    HeartbeatInfo,
    HostSample,
    ServerStatus,
    Thresholds,
    encode_heartbeat,
)
from dsched_server.shutdown import Shutdown
from dsched_worker.clock import Clock

log = logging.getLogger(__name__)

Sampler = Callable[[], Awaitable[HostSample]]
UNREGISTER_S = 3.0  # how long a stop waits for the registry to remove the node
IDLE_SAMPLE = HostSample(cpu_usage=0.0, memory_usage=0.0, load_average=0.0, disk_usage=0.0)


def worker_node(group: str, address: str) -> str:
    """The registry path of a worker's ephemeral node."""
    return f"{WORKERS_PATH}/{group}@{address}"


class Agent:
    """Registration and heartbeat of one worker. ``slots_in_use`` reads the runner's load;
    ``on_lost`` fences the worker; ``on_epoch`` receives every new epoch (also the first)."""

    def __init__(
        self,
        registry: Registry,
        *,
        group: str,
        address: str,
        slots_total: int,
        slots_in_use: Callable[[], int],
        heartbeat_interval: float,
        queued: Callable[[], int] = lambda: 0,
        clock: Clock,
        pid: int,
        on_lost: Callable[[], None],
        on_epoch: Callable[[int], None],
        sampler: Sampler,
        thresholds: Thresholds,
        backoff: Backoff | None = None,
        fence_after: float | None = None,
    ) -> None:
        self._registry = registry
        self.path = worker_node(group, address)
        self._slots_total = slots_total
        self._slots_in_use = slots_in_use
        self._queued = queued
        self._interval = heartbeat_interval
        self._clock = clock
        self._pid = pid
        self._on_lost = on_lost
        self._on_epoch = on_epoch
        self._sampler = sampler
        self._thresholds = thresholds
        self._last_sample = IDLE_SAMPLE
        self._backoff = backoff or Backoff(initial=0.1, maximum=5.0)
        self._fence_after = fence_after
        self._fence_timer: asyncio.TimerHandle | None = None
        self.epoch = 0
        self._start_time: datetime | None = None
        self._registered = False
        self._suspended = False
        self._fenced = False
        self._stopped = False
        self._draining = False
        self._connected = asyncio.Event()
        self._wake = asyncio.Event()
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._recover_task: asyncio.Task[None] | None = None

    @property
    def unavailable_reason(self) -> str | None:
        """Why new dispatches must be refused now, or None."""
        if self._stopped or self._draining:
            return "worker is stopping"
        if self._fenced:
            return "worker lost its registry session and is re-registering"
        if self._suspended:
            return "worker is disconnected from the registry"
        if not self._registered:
            return "worker is starting"
        return None

    async def start(self) -> None:
        """Takes an epoch, registers the node and starts the heartbeat. Raises if registration
        fails."""
        self._start_time = self._clock()
        self._registry.add_state_listener(self._on_state)
        if self._registry.state is ConnectionState.CONNECTED:
            self._connected.set()
        await self._register()
        self._heartbeat_task = asyncio.create_task(self._heartbeats(), name="dsched-heartbeat")

    async def drain(self, shutdown: Shutdown | None = None) -> None:
        """Starts a graceful stop while staying registered: refuses new dispatches and publishes
        BUSY (masters send nothing more), but keeps the node and the heartbeat, so masters go on
        seeing this incarnation alive and do not fail its running attempts over while they finish.
        Leaving the registry first would let a master re-run them elsewhere after its failover
        delay, next to the copies still running here. Fencing still applies while draining."""
        shutdown = shutdown or Shutdown()
        self._draining = True
        if self._registered:
            beat = self._registry.update(self.path, await self._heartbeat())
            limit = shutdown.share(UNREGISTER_S, 0.1)
            await shutdown.step(f"publish BUSY at {self.path}", beat, limit=limit)

    async def stop(self, shutdown: Shutdown | None = None) -> None:
        """Stops the heartbeat and removes the node, within ``shutdown``'s budget (at most
        :data:`UNREGISTER_S`, or a tenth of the timeout, for the node). A node that cannot be
        removed (the registry does not answer) is recorded as abandoned: it goes when the session
        expires."""
        shutdown = shutdown or Shutdown()
        self._stopped = True
        self._cancel_fence_timer()
        for task in (self._heartbeat_task, self._recover_task):
            if task is not None:
                await shutdown.cancel("stop the heartbeat", task)
        if self._registered:
            self._registered = False
            leaving = self._registry.unregister(self.path)
            limit = shutdown.share(UNREGISTER_S, 0.1)
            await shutdown.step(f"remove {self.path} from the registry", leaving, limit=limit)

    def poke(self) -> None:
        """Publishes a heartbeat now (the load status changed)."""
        self._wake.set()

    def _on_state(self, state: ConnectionState) -> None:
        if self._stopped:
            return
        if state is ConnectionState.CONNECTED:
            self._cancel_fence_timer()
            self._suspended = False
            self._connected.set()
        elif state is ConnectionState.SUSPENDED:
            log.warning("registry connection suspended: refusing new dispatches")
            self._suspended = True
            self._connected.clear()
            if self._fence_after is not None and self._fence_timer is None:
                loop = asyncio.get_running_loop()
                self._fence_timer = loop.call_later(self._fence_after, self._fence_suspended)
        elif state is ConnectionState.LOST:
            log.error("registry session lost (epoch %d): fencing this worker", self.epoch)
            self._cancel_fence_timer()
            self._connected.clear()
            self._fence()

    def _fence_suspended(self) -> None:
        self._fence_timer = None
        if self._suspended and not self._stopped and not self._fenced:
            log.error(
                "registry unreachable for %.1fs (epoch %d): fencing this worker before its "
                "session can expire",
                self._fence_after or 0.0,
                self.epoch,
            )
            self._fence()

    def _fence(self) -> None:
        """Kills every task without reporting and re-registers under a new epoch once
        connected."""
        self._fenced = True
        self._registered = False
        self._on_lost()
        if self._recover_task is None or self._recover_task.done():
            self._recover_task = asyncio.create_task(self._recover(), name="dsched-reregister")

    def _cancel_fence_timer(self) -> None:
        if self._fence_timer is not None:
            self._fence_timer.cancel()
            self._fence_timer = None

    async def _recover(self) -> None:
        for delay in self._backoff.delays():
            await self._connected.wait()
            if self._draining or self._stopped:
                return  # a stopping worker fences but does not come back under a new epoch
            try:
                await self._register()
            except Exception as exc:  # any registry error: wait for the connection and retry
                log.warning("re-registration failed (%s); retrying in %.2fs", exc, delay)
                await asyncio.sleep(delay)
                continue
            self._fenced = False
            log.info("re-registered as %s with epoch %d", self.path, self.epoch)
            return

    async def _register(self) -> None:
        epoch = await self._registry.next_epoch()
        self.epoch = epoch
        self._on_epoch(epoch)
        await self._registry.register(self.path, await self._heartbeat())
        self._registered = True

    async def _heartbeats(self) -> None:
        # Periodic by design (the heartbeat is the liveness signal); poke() publishes early.
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._interval)
            self._wake.clear()
            if not self._registered:
                continue
            try:
                await self._registry.update(self.path, await self._heartbeat())
            except Exception as exc:  # any registry error: the next beat tries again
                log.warning("heartbeat update failed: %s", exc)

    async def _heartbeat(self) -> bytes:
        try:
            self._last_sample = await self._sampler()
        except Exception as exc:  # a failing sampler must not stop the heartbeat: reuse the last
            log.warning("host sampling failed: %s", exc)
        assert self._start_time is not None
        info = HeartbeatInfo.from_sample(
            self._last_sample,
            thresholds=self._thresholds,
            slots_total=self._slots_total,
            slots_in_use=self._slots_in_use(),
            start_time=self._start_time,
            report_time=self._clock(),
            epoch=self.epoch,
            pid=self._pid,
            queued=self._queued(),
        )
        if self._draining:
            info = dataclasses.replace(info, status=ServerStatus.BUSY)
        return encode_heartbeat(info)
