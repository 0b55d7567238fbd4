"""The worker's composition root: :class:`WorkerOptions` in, a running :class:`Worker` out.

::

    async with Worker(WorkerOptions(data_dir=path, port=0), registry=registry) as worker:
        ...  # worker.address is "host:port"; masters dispatch to it

``start`` serves ``WorkerService`` and ``LogService`` (with health and reflection) on
``host:port``, takes an epoch and registers in the registry, then starts reporting events (first the
ones an earlier incarnation left in the outbox). ``stop`` refuses new dispatches and publishes
BUSY, gives running tasks ``grace`` seconds and kills the rest, gives unacknowledged events up to
``flush_timeout`` seconds (the rest stay in the outbox), only then leaves the registry (masters fail
over the attempts of a worker whose node is gone), and stops the server, all within the budget of a
:class:`~dsched_server.shutdown.Shutdown`.

The registry belongs to the caller: it must be started before :meth:`Worker.start` and is not
stopped by the worker. Data directory layout: ``logs/`` (task logs and their index), ``exec/`` (one
working directory per running or recently failed attempt), ``outbox/`` (unacknowledged events),
``pgids/`` (running task process groups; see :mod:`dsched_worker.orphans`, killed by the worker's
reaper when it dies: :mod:`dsched_worker.reaper`). The :class:`Janitor`
removes logs and kept working directories past their retention.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

from dsched.backoff import Backoff
from dsched.v1 import log_service_pb2, log_service_pb2_grpc, worker_service_pb2
from dsched.v1 import worker_service_pb2_grpc as worker_grpc
from dsched_server.config import Settings
from dsched_server.constants import (
    DEFAULT_WORKER_GROUP,
    DEFAULT_WORKER_PORT,
    HEARTBEAT_INTERVAL_S,
    KILL_GRACE_S,
    LOG_RETENTION_DAYS,
    PROGRESS_FRAME_INTERVAL_S,
    WORKDIR_KEEP_FAILED_S,
)
from dsched_server.coord.registry import Registry
from dsched_server.heartbeat import Thresholds, sample_host
from dsched_server.rpc.serving import Service, Serving
from dsched_server.shutdown import Shutdown
from dsched_worker.agent import UNREGISTER_S, Agent, Sampler
from dsched_worker.clock import Clock
from dsched_worker.janitor import Janitor
from dsched_worker.log_service import LogServicer
from dsched_worker.logs import LogStore
from dsched_worker.orphans import ProcessRecords
from dsched_worker.outbox import Outbox
from dsched_worker.process import DRAIN_TIMEOUT_S
from dsched_worker.reaper import Reaper
from dsched_worker.reporter import Reporter
from dsched_worker.runner import Runner
from dsched_worker.servicer import WorkerServicer
from dsched_worker.tasks import default_task_types
from dsched_worker.tasks.environment import DEFAULT_ALLOW
from dsched_worker.topdir import mark_top
from dsched_worker.workdirs import WorkDirs

log = logging.getLogger(__name__)

# Of a stop's budget (seconds): TAIL_S is kept for what stops after the worker (the registry
# session; the master of a standalone), _FLUSH_MIN_S for the last events, _SERVER_STOP_S for calls.
TAIL_S = 3.0
_FLUSH_MIN_S = 1.0
_SERVER_STOP_S = 1.0


def default_slots() -> int:
    return max(4, 4 * (os.cpu_count() or 1))


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerOptions:
    """Everything a worker is configured with (the shared Settings object maps onto this).

    ``port`` 0 picks a free port. ``advertise_host`` is the host masters dial (default: ``host``;
    set it when ``host`` is a wildcard such as 0.0.0.0). ``slots`` bounds concurrent attempts;
    ``max_queued`` bounds attempts waiting for a slot. ``outbox_fsync`` flushes every event to disk.
    ``fence_after``: seconds of registry disconnection after which the worker kills its tasks and
    takes a new epoch (:func:`fence_deadline`; None: only when the session is known lost).
    ``task_env_allow``: variables of the worker's environment tasks inherit besides
    :data:`~dsched_worker.tasks.environment.DEFAULT_ALLOW` (``PREFIX*`` entries match prefixes).
    ``spark_home``: the Spark whose ``bin/spark-submit`` runs SPARK tasks (empty: the installed
    pyspark package's).
    ``python_interpreter``: the default interpreter of PYTHON tasks (empty: the worker's own
    Python); ``http_allow``: URL patterns HTTP tasks may request (empty: none;
    :mod:`dsched_worker.programs.allow`). ``workdir_keep_failed``: seconds an unsuccessful
    attempt's working directory is kept (a successful one's goes at once); ``log_retention_days``:
    days a task log is kept after its last write (0: for ever). See :mod:`dsched_worker.janitor`.
    """

    data_dir: Path
    host: str = "127.0.0.1"
    port: int = DEFAULT_WORKER_PORT
    advertise_host: str = ""
    group: str = DEFAULT_WORKER_GROUP
    slots: int = field(default_factory=default_slots)
    max_queued: int = 10_000
    heartbeat_interval: float = HEARTBEAT_INTERVAL_S
    kill_grace: float = KILL_GRACE_S
    progress_interval: float = PROGRESS_FRAME_INTERVAL_S
    stop_grace: float = 30.0
    fence_after: float | None = None
    flush_timeout: float = 5.0
    outbox_fsync: bool = False
    report_backoff: Backoff = field(default_factory=lambda: Backoff(initial=0.05, maximum=5.0))
    remember_finished: int = 100_000
    workdir_keep_failed: float = WORKDIR_KEEP_FAILED_S
    log_retention_days: float = LOG_RETENTION_DAYS
    thresholds: Thresholds = field(default_factory=Thresholds)
    task_env_allow: tuple[str, ...] = ()
    spark_home: str = ""
    python_interpreter: str = ""
    http_allow: tuple[str, ...] = ()

    @classmethod
    def from_settings(cls, settings: Settings) -> WorkerOptions:
        """The worker part of the shared settings. A dedicated worker uses ``data_dir`` and
        ``port``; the worker inside a standalone process (``--worker in-process``) uses
        ``<data_dir>/worker`` and ``worker_port``, next to its master (a standalone's worker
        process is a dedicated worker given those two)."""
        dedicated = settings.role == "worker"
        return cls(
            data_dir=settings.data_dir if dedicated else settings.data_dir / "worker",
            host=settings.host,
            port=settings.port if dedicated else settings.worker_port,
            group=settings.worker_group,
            slots=settings.worker_slots,
            heartbeat_interval=settings.heartbeat_interval,
            outbox_fsync=settings.outbox_fsync,
            thresholds=settings.thresholds,
            fence_after=None if settings.embedded_registry else fence_deadline(settings),
            task_env_allow=settings.task_env_allow_list,
            spark_home=settings.spark_home,
            python_interpreter=settings.python_interpreter,
            http_allow=settings.http_allow_list,
            workdir_keep_failed=settings.workdir_keep_failed,
            log_retention_days=settings.log_retention_days,
        )


def fence_deadline(settings: Settings) -> float:
    """Seconds of registry disconnection after which a worker kills its tasks
    (:func:`fence_deadline_for` of its session timeout and failover delay)."""
    return fence_deadline_for(settings.registry_session_timeout, settings.failover_delay)


def fence_deadline_for(session_timeout: float, failover_delay: float) -> float:
    """Seconds of registry disconnection after which a worker kills its tasks.

    Masters re-run the tasks of a worker that is cut off (not known dead) at the earliest
    ``session timeout + failover delay`` after its last contact with ZooKeeper. The worker notices
    the disconnection at the latest two thirds of a session timeout after that contact (kazoo pings
    after a third of silence and gives up a third later). Fencing ``session timeout / 3 + failover
    delay - margin`` after noticing ends the tasks before any replacement starts; the margin (1 s,
    at most half the delay) absorbs a late timer on a loaded host. At most one session timeout: by
    then the session is gone anyway. The longer the deadline, the longer a ZooKeeper outage (a
    restart) the worker rides out without killing anything; with the defaults (4 s, 4 s) it is 4 s.
    The masters' ``failover_delay`` is assumed to be the one in this worker's settings.
    """
    margin = min(1.0, failover_delay / 2)
    return min(session_timeout, session_timeout / 3 + failover_delay - margin)


class Worker:
    """One worker incarnation; see the module docstring. ``environ`` is the environment whose
    allowed variables tasks inherit (default: this process's). ``sampler`` reads the host's load
    for the heartbeat (default: :func:`~dsched_server.heartbeat.sample_host` on the data
    directory)."""

    def __init__(
        self,
        options: WorkerOptions,
        *,
        registry: Registry,
        sampler: Sampler | None = None,
        clock: Clock = utc_now,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.options = options
        self._registry = registry
        self._sampler = sampler or (lambda: sample_host(options.data_dir))
        self._clock = clock
        self._environ = dict(os.environ if environ is None else environ)
        data_dir = options.data_dir
        self.logs = LogStore(data_dir)
        self.reporter = Reporter(
            Outbox(data_dir / "outbox", fsync=options.outbox_fsync),
            clock=clock,
            backoff=options.report_backoff,
        )
        self.records = ProcessRecords(data_dir / "pgids")
        self.reaper: Reaper | None = None
        bash = shutil.which("bash", path=self._environ.get("PATH")) or "/bin/bash"
        self.workdirs = WorkDirs(data_dir / "exec", keep_failed=options.workdir_keep_failed)
        self.runner = Runner(
            logs=self.logs,
            events=self.reporter,
            task_types=default_task_types(
                exec_root=self.workdirs.root,
                base_env=self._environ,
                bash=bash,
                env_allow=DEFAULT_ALLOW + options.task_env_allow,
                records=self.records,
                workdirs=self.workdirs,
                spark_home=Path(options.spark_home) if options.spark_home else None,
                python=options.python_interpreter,
                http_allow=options.http_allow,
            ),
            clock=clock,
            slots=options.slots,
            max_queued=options.max_queued,
            kill_grace=options.kill_grace,
            identity=lambda: f"{self.address} (epoch {self.epoch})",
            stamp=lambda execution: execution.accepted_by(self.address, self.epoch),
            remember_finished=options.remember_finished,
            workdirs=self.workdirs,
        )
        self.janitor = Janitor(
            self.workdirs,
            self.logs.root,
            log_retention_days=options.log_retention_days,
            live=self.runner.live_task_instances,
        )
        self.agent: Agent | None = None
        self.address = ""
        self._serving: Serving | None = None
        self._stopping = False

    @property
    def epoch(self) -> int:
        return self.agent.epoch if self.agent is not None else 0

    async def start(self) -> None:
        """Serves, registers and starts reporting; on failure everything started is stopped
        again."""
        self.options.data_dir.mkdir(parents=True, exist_ok=True)
        for busy in (self.logs.root, self.workdirs.root):
            mark_top(busy)  # their subdirectories away from other programs' churn (see topdir)
        # Before anything else: tasks of a previous incarnation of this worker were failed over
        # (their epoch is fenced), so whatever of them still runs is an unsupervised duplicate.
        self.records.kill_leftovers()
        # From here on the groups this process records die with it, however it dies.
        self.reaper = Reaper.start(self.options.data_dir / "pgids")
        self._serving = Serving(self._services(), f"{self.options.host}:{self.options.port}")
        try:
            port = await self._serving.start()
        except BaseException:
            await self._retire_reaper(stand_down=True)
            raise
        self.address = f"{self.options.advertise_host or self.options.host}:{port}"
        self.agent = Agent(
            self._registry,
            group=self.options.group,
            address=self.address,
            slots_total=self.options.slots,
            slots_in_use=lambda: self.runner.slots_in_use,
            queued=lambda: self.runner.queued,
            heartbeat_interval=self.options.heartbeat_interval,
            clock=self._clock,
            pid=os.getpid(),
            on_lost=self.runner.fence,
            on_epoch=self._new_epoch,
            sampler=self._sampler,
            thresholds=self.options.thresholds,
            fence_after=self.options.fence_after,
        )
        try:
            await self.agent.start()
            await self.reporter.start(address=self.address, epoch=self.agent.epoch)
        except BaseException:
            await self.agent.stop()
            await self._serving.stop(0)
            await self._retire_reaper(stand_down=True)
            raise
        self.runner.on_load_change = self.agent.poke
        self.janitor.start()

    async def stop(self, grace: float | None = None, *, shutdown: Shutdown | None = None) -> None:
        """Stops as described in the module docstring, within ``shutdown`` (default: a new one of
        the default timeout): running tasks get ``grace`` seconds (default: the options'
        ``stop_grace``) but no more than the budget leaves once the kill, the flush and
        :data:`TAIL_S` for what stops after the worker are provided for. Tasks killed, queued
        attempts dropped, events left unacknowledged and a node left in the registry are recorded
        in ``shutdown`` as abandoned. Idempotent."""
        if self._stopping or self._serving is None:
            return
        shutdown = shutdown or Shutdown()
        self._stopping = True
        await self.janitor.stop()
        if self.agent is not None:
            # Stay registered (as BUSY) until the tasks ended and their events are flushed: a
            # master fails over the attempts of a worker whose node is gone, and re-running them
            # while they still run here would run them twice.
            await self.agent.drain(shutdown)
        after_kill = DRAIN_TIMEOUT_S + _FLUSH_MIN_S + UNREGISTER_S + _SERVER_STOP_S + TAIL_S
        wanted = self.options.stop_grace if grace is None else grace
        tasks_grace = shutdown.budget(wanted, reserve=self.options.kill_grace + after_kill)
        kill_grace = min(self.options.kill_grace, shutdown.budget(reserve=tasks_grace + after_kill))
        ending = self.runner.stop(tasks_grace, kill_grace=kill_grace)
        task = asyncio.ensure_future(ending)
        if ended := await shutdown.step(
            "end the running tasks", task, reserve=after_kill - DRAIN_TIMEOUT_S
        ):
            for what in task.result():
                shutdown.abandon(f"task attempt {what}: its master runs it again")
        # Tasks that have not ended by now must not outlive the worker: the reaper kills them.
        await self._retire_reaper(stand_down=ended)
        flush = self.reporter.stop(
            shutdown.budget(self.options.flush_timeout, reserve=TAIL_S + UNREGISTER_S + 1)
        )
        flushing = asyncio.ensure_future(flush)
        if await shutdown.step(
            "flush the task events", flushing, reserve=TAIL_S + UNREGISTER_S
        ) and (left := flushing.result()):
            shutdown.abandon(f"{left} task events not acknowledged: the outbox keeps them")
        if self.agent is not None:
            await self.agent.stop(shutdown)
        serving = self._serving.stop(shutdown.budget(_SERVER_STOP_S, reserve=TAIL_S))
        await shutdown.step("stop the worker's server", serving, reserve=TAIL_S)

    async def _retire_reaper(self, *, stand_down: bool) -> None:
        if self.reaper is None:
            return
        if stand_down:
            self.reaper.stand_down()
        else:
            self.reaper.close()
        await asyncio.to_thread(self.reaper.wait)
        self.reaper = None

    def abandon(self) -> int:
        """SIGKILLs every task process group at once (the process is about to exit without a
        stop: tasks must not run on unsupervised). Synchronous, callable from any thread; returns
        how many groups it killed."""
        killed = self.records.kill_recorded()
        if killed:
            log.warning("killed %d running task process groups: %s", len(killed), killed)
        return len(killed)

    async def __aenter__(self) -> Worker:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    def _services(self) -> list[Service]:
        worker = WorkerServicer(
            self.runner, epoch=lambda: self.epoch, unavailable=self._unavailable, clock=self._clock
        )
        logs = LogServicer(self.logs, progress_interval=self.options.progress_interval)
        return [
            Service(
                name=worker_service_pb2.DESCRIPTOR.services_by_name["WorkerService"].full_name,
                servicer=worker,
                register=worker_grpc.add_WorkerServiceServicer_to_server,
            ),
            Service(
                name=log_service_pb2.DESCRIPTOR.services_by_name["LogService"].full_name,
                servicer=logs,
                register=log_service_pb2_grpc.add_LogServiceServicer_to_server,
            ),
        ]

    def _unavailable(self) -> str | None:
        if self._stopping:
            return "worker is stopping"
        if self.agent is None:
            return "worker is starting"
        return self.agent.unavailable_reason

    def _new_epoch(self, epoch: int) -> None:
        self.reporter.epoch = epoch
