"""Server processes: ``dsched master`` and ``dsched worker`` (cluster mode), and the life cycle
every server process shares with ``dsched standalone`` (:mod:`dsched.server.standalone`).

A server process loads its settings, opens its registry session(s), starts its server, prints one
ready line, serves until SIGTERM or SIGINT, stops gracefully and exits. Launchers, systemd units
and test harnesses rely on this contract:

* Ready: exactly one line on stdout, flushed, once the server serves and is registered::

    dsched master is up: address 127.0.0.1:40123, epoch 7, pid 12345
    dsched worker is up: address 127.0.0.1:40125, group default, epoch 3, pid 12346

  ``--port 0`` binds any free port; the address printed (and advertised) is the bound one.
* SIGTERM or SIGINT: ``dsched <role>: shutting down``, a graceful stop (a master stops claiming, a
  worker gives running tasks their grace, both leave the registry so their members vanish at once),
  then ``dsched <role>: stopped`` and exit status 0. More signals while stopping are logged and
  otherwise ignored (SIGKILL forces). A signal during start-up abandons the start.
* Exit status 2: invalid settings, each violation on its own line of stderr. Exit status 1: the
  server could not start (ZooKeeper or the database unreachable, the port taken, ...), said in one
  ``error:`` line; the traceback is logged at DEBUG only.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Protocol

from sqlalchemy.exc import DBAPIError

from dsched.errors import InvalidArgument
from dsched.server.config import Role, Settings, configure_logging, load_settings
from dsched.server.coord.factory import open_registry
from dsched.server.master import Master, MasterOptions
from dsched.worker.app import Worker, WorkerOptions

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class StartupError(Exception):
    """A server could not start; the message is one line for the operator."""


class Part(Protocol):
    """Anything long-lived with ``start`` and ``stop``: a registry session, a master, a worker."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class ServerProcess:
    """What :func:`run` drives: a server process made of parts (registry sessions, a master, a
    worker) started in order and stopped in reverse. Subclasses :meth:`add` their parts and say
    their :meth:`ready_line`.

    :meth:`stop` stops the parts that started and the one that was starting, if any (best effort:
    it may have started halfway), so it is right after a failed or cancelled start too.
    """

    def __init__(self) -> None:
        self._parts: list[tuple[str, Part]] = []
        self._started: list[Part] = []

    def add(self, what: str, part: Part) -> None:
        """``what`` completes "cannot ..." in the error of a failed start."""
        self._parts.append((what, part))

    async def start(self) -> None:
        """Starts every part; on failure stops them again and raises StartupError."""
        for what, part in self._parts:
            self._started.append(part)
            try:
                await part.start()
            except Exception as exc:
                log.debug("start-up failed: cannot %s", what, exc_info=True)
                await self.stop()
                raise StartupError(self.describe(what, exc)) from exc

    async def stop(self) -> None:
        """Stops the started parts in reverse order; a part that fails to stop is logged and the
        others still stop."""
        while self._started:
            part = self._started.pop()
            try:
                await part.stop()
            except Exception:
                log.warning("error while stopping %s", type(part).__name__, exc_info=True)

    def describe(self, what: str, exc: Exception) -> str:
        """The one-line error of a failed start of the part ``what``."""
        return f"cannot {what}: {reason(exc)}"

    def ready_line(self) -> str:
        """The ``dsched <role> is up: ...`` line (only meaningful after ``start``)."""
        raise NotImplementedError


def reason(exc: BaseException) -> str:
    """The first line of what ``exc`` says (a driver's own message for database errors)."""
    source: object = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    text = str(source).strip() or type(source).__name__
    return text.splitlines()[0]


def master_options(settings: Settings) -> MasterOptions:
    """The master part of the shared settings (used by ``master`` and ``standalone``)."""
    return MasterOptions(
        db_url=settings.db_url,
        data_dir=settings.data_dir,
        host=settings.host,
        port=settings.port,
        default_group=settings.worker_group,
        host_selector=settings.host_selector,
        warmup=timedelta(seconds=settings.warmup_seconds),
        heartbeat_interval=settings.heartbeat_interval,
        thresholds=settings.thresholds,
        failover_delay=settings.failover_delay,
    )


_START_MASTER = "start the master"


class MasterProcess(ServerProcess):
    """``dsched master``: a ZooKeeper session and a :class:`Master`."""

    def __init__(self, settings: Settings) -> None:
        super().__init__()
        self.settings = settings
        self.registry = open_registry(settings)
        self.master = Master(master_options(settings), registry=self.registry)
        self.add(f"join ZooKeeper at {settings.registry}", self.registry)
        self.add(_START_MASTER, self.master)

    def ready_line(self) -> str:
        m = self.master
        return f"dsched master is up: address {m.address}, epoch {m.epoch}, pid {os.getpid()}"

    def describe(self, what: str, exc: Exception) -> str:
        # SQLAlchemy wraps what the database said; a server that never answered surfaces as the
        # driver's connection error (asyncpg: refused, unknown host, timed out). Nothing else the
        # master does at start dials out: the gRPC server only binds.
        unreachable = isinstance(exc, ConnectionError | socket.gaierror | TimeoutError)
        if isinstance(exc, DBAPIError) or (what == _START_MASTER and unreachable):
            return f"cannot use the database {self.settings.safe_db_url}: {reason(exc)}"
        return super().describe(what, exc)


class WorkerProcess(ServerProcess):
    """``dsched worker``: a ZooKeeper session and a :class:`Worker`."""

    def __init__(self, settings: Settings) -> None:
        super().__init__()
        self.settings = settings
        self.registry = open_registry(settings)
        self.worker = Worker(WorkerOptions.from_settings(settings), registry=self.registry)
        self.add(f"join ZooKeeper at {settings.registry}", self.registry)
        self.add("start the worker", self.worker)

    def ready_line(self) -> str:
        w = self.worker
        return (
            f"dsched worker is up: address {w.address}, group {w.options.group}, "
            f"epoch {w.epoch}, pid {os.getpid()}"
        )


def use_pidfd_child_watcher() -> None:
    """Waits for task processes with pidfds instead of a thread per child (Python 3.11).

    asyncio's default watcher on 3.11 starts a thread per subprocess; with many short tasks those
    threads fight the event loop (and gRPC's) for the GIL, which cut dispatch throughput by half in
    the fan-out benchmark. 3.12+ uses pidfds by default, and deprecates choosing a watcher.
    """
    if sys.version_info < (3, 12) and sys.platform == "linux":
        asyncio.set_child_watcher(asyncio.PidfdChildWatcher())


async def serve(name: str, process: ServerProcess) -> None:
    """Starts ``process``, prints its ready line, and stops it at SIGTERM/SIGINT (see module)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal(sig: signal.Signals) -> None:
        if stop.is_set():
            log.warning("%s again: already shutting down (SIGKILL forces an exit)", sig.name)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)
    starting = asyncio.create_task(process.start(), name=f"{name}-start")
    stopping = asyncio.create_task(stop.wait(), name=f"{name}-signal")
    try:
        await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if starting.done():
            starting.result()  # a failed start raises here, already stopped
            print(process.ready_line(), flush=True)
            await stopping
        else:
            starting.cancel()
            await asyncio.gather(starting, return_exceptions=True)
        print(f"dsched {name}: shutting down", flush=True)
        await process.stop()
        print(f"dsched {name}: stopped", flush=True)
    finally:
        stopping.cancel()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def run(role: Role, argv: Sequence[str], make: Callable[[Settings], ServerProcess]) -> int:
    """A whole server process from its arguments to its exit status (see module docstring)."""
    try:
        settings = load_settings(list(argv), os.environ, role=role)
    except InvalidArgument as err:
        sys.stderr.write(f"error: {err.message}\n")
        for violation in err.violations:
            sys.stderr.write(f"  {violation.field}: {violation.description}\n")
        return EXIT_USAGE
    configure_logging(settings)
    use_pidfd_child_watcher()
    try:
        asyncio.run(_serve_settings(role, settings, make))
    except StartupError as err:
        sys.stderr.write(f"error: dsched {role}: {err}\n")
        return EXIT_FAILED
    except KeyboardInterrupt:  # before the signal handlers were installed
        return EXIT_INTERRUPTED
    return EXIT_OK


async def _serve_settings(
    role: Role, settings: Settings, make: Callable[[Settings], ServerProcess]
) -> None:
    log.info(
        "%s starting: registry %s, data in %s%s",
        role,
        settings.registry,
        settings.data_dir,
        "" if role == "worker" else f", database {settings.safe_db_url}",
    )
    try:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        process = make(settings)
    except (OSError, ValueError) as exc:
        raise StartupError(reason(exc)) from exc
    await serve(role, process)


def master_main(argv: Sequence[str] | None = None) -> int:
    """``dsched master [--port N] [--registry ZK] [--db URL] ...``; returns the exit status."""
    return run("master", sys.argv[1:] if argv is None else argv, MasterProcess)


def worker_main(argv: Sequence[str] | None = None) -> int:
    """``dsched worker [--port N] [--registry ZK] [--group G] [--slots N] ...``; returns the exit
    status."""
    return run("worker", sys.argv[1:] if argv is None else argv, WorkerProcess)
