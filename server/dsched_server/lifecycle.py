"""The life cycle every server process shares: ``dsched master`` (:mod:`dsched_server.processes`),
``dsched worker`` (:mod:`dsched_worker.main`) and ``dsched standalone``
(:mod:`dsched_server.standalone`). It imports neither the master nor the store, so that a worker
process loads only what a worker needs.

A server process loads its settings, opens its registry session(s), starts its server, prints one
ready line, serves until SIGTERM or SIGINT, stops gracefully and exits. Launchers, systemd units
and test harnesses rely on this contract:

* Ready: exactly one line on stdout, flushed, once the server serves and is registered::

    dsched master is up: address 127.0.0.1:5678, cluster address 127.0.0.1:5679, epoch 7, pid 123
    dsched worker is up: address 127.0.0.1:1234, group default, epoch 3, pid 124

  ``--port 0`` binds any free port; the address printed (and advertised) is the bound one. A
  master's ``address`` is its client listener, ``cluster address`` the listener its workers report
  to (``--cluster-port 0`` binds any free port too, preferring the one of the previous run, which
  the master remembers in its data directory).
* SIGTERM or SIGINT: ``dsched <role>: shutting down``, a graceful stop (a master stops claiming and
  hands its instances over, a worker gives running tasks what the budget allows, both leave the
  registry so their members vanish at once), then ``dsched <role>: stopped`` and exit status 0.
  The stop is bounded by ``shutdown_timeout`` (default 30 s) counted from the signal, whatever no
  longer answers (ZooKeeper, the database): what it could not do in time (an instance not handed
  over, a task killed, a node left in the registry) is logged as ``shutdown abandoned: ...``, the
  last line reads ``dsched <role>: stopped, abandoned: ...`` and the exit status is 3. A process
  still alive at the deadline logs why, kills its tasks and exits with 3 at once. A second SIGTERM
  or SIGINT exits at once with 128 + the number of that second signal (a worker kills its tasks
  first, so none runs on unsupervised). "Second" is in the order the process takes them: two sent
  back to back may be taken in either order (the kernel hands each to any thread of the process,
  and two pending at once go lowest number first), so SIGTERM then SIGINT at once may exit with
  143 as well as 130; the log line names the signal. A signal during start-up abandons the start
  (bounded the same way).
* Exit status 2: invalid settings, each violation on its own line of stderr. Exit status 1: the
  server could not start (ZooKeeper or the database unreachable, the port taken, ...), said in one
  ``error:`` line; the traceback is logged at DEBUG only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import NoReturn, Protocol

from dsched.errors import InvalidArgument
from dsched_server.config import Role, Settings, configure_logging, load_settings
from dsched_server.shutdown import DEFAULT_SHUTDOWN_TIMEOUT_S, Shutdown

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_ABANDONED = 3  # stopped, but something was abandoned (logged)
EXIT_INTERRUPTED = 130


class StartupError(Exception):
    """A server could not start; the message is one line for the operator."""


class Part(Protocol):
    """Anything long-lived with ``start`` and ``stop``: a registry session, a master, a worker."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class Graceful(Protocol):
    """A part whose stop takes the shutdown's budget into account (a master, a worker)."""

    async def start(self) -> None: ...

    async def stop(self, *, shutdown: Shutdown | None = None) -> None: ...


class Supervisor(Graceful, Protocol):
    """A graceful part with processes that must not outlive this one (a worker's tasks, a worker
    process): :meth:`abandon` ends them at once, from any thread."""

    def abandon(self) -> object: ...


Stopper = Callable[[Shutdown], Awaitable[None]]
START_MASTER = "start the master"
CLOSE_ZK = "close the ZooKeeper session"


class ServerProcess:
    """What :func:`run` drives: a server process made of parts (registry sessions, a master, a
    worker) started in order and stopped in reverse. Subclasses :meth:`add` their parts and say
    their :meth:`ready_line`.

    :meth:`stop` stops the parts that started and the one that was starting, if any (best effort:
    it may have started halfway), so it is right after a failed or cancelled start too. Each part's
    stop is one step of the :class:`Shutdown` (bounded by what is left of it).
    """

    def __init__(self, shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT_S) -> None:
        self.shutdown_timeout = shutdown_timeout
        self._parts: list[tuple[str, str, Part, Stopper | None]] = []
        self._started: list[tuple[str, Part, Stopper | None]] = []
        self._workers: list[Supervisor] = []

    def add(
        self, what: str, part: Part, *, stopping: str = "", stop: Stopper | None = None
    ) -> None:
        """``what`` completes "cannot ..." in the error of a failed start; ``stopping`` names the
        stop in what a shutdown abandons; ``stop`` replaces ``part.stop()`` for parts that take the
        shutdown's budget into account."""
        self._parts.append((what, stopping or f"stop the {type(part).__name__}", part, stop))

    def add_master(self, master: Graceful) -> None:
        self.add(
            START_MASTER,
            master,
            stopping="stop the master",
            stop=lambda s: master.stop(shutdown=s),
        )

    def add_worker(self, worker: Supervisor, name: str = "the worker") -> None:
        """Adds a worker (or a worker process), whose tasks :meth:`abandon` kills."""
        self._workers.append(worker)
        self.add(
            f"start {name}",
            worker,
            stopping=f"stop {name}",
            stop=lambda s: worker.stop(shutdown=s),
        )

    async def start(self) -> None:
        """Starts every part; on failure stops them again and raises StartupError."""
        for what, stopping, part, stop in self._parts:
            self._started.append((stopping, part, stop))
            try:
                await part.start()
            except Exception as exc:
                log.debug("start-up failed: cannot %s", what, exc_info=True)
                await self.stop(Shutdown(self.shutdown_timeout))
                raise StartupError(self.describe(what, exc)) from exc

    async def stop(self, shutdown: Shutdown | None = None) -> None:
        """Stops the started parts in reverse order, each within what is left of ``shutdown``
        (default: a new one of ``shutdown_timeout``); a part that fails or overruns is recorded
        as abandoned and the others still stop."""
        shutdown = shutdown or Shutdown(self.shutdown_timeout)
        while self._started:
            stopping, part, stop = self._started.pop()
            await shutdown.step(stopping, part.stop() if stop is None else stop(shutdown))

    def abandon(self) -> None:
        """Last words before the process exits at once (a second signal, the deadline): kills the
        workers' tasks, which must not run on unsupervised. Synchronous, callable from any
        thread."""
        for worker in self._workers:
            worker.abandon()

    def describe(self, what: str, exc: Exception) -> str:
        """The one-line error of a failed start of the part ``what``."""
        return f"cannot {what}: {reason(exc)}"

    def ready_line(self) -> str:
        """The ``dsched <role> is up: ...`` line (only meaningful after ``start``)."""
        raise NotImplementedError


def reason(exc: BaseException) -> str:
    """The first line of what ``exc`` says (a driver's own message for database errors: SQLAlchemy
    keeps it in ``orig``; read by name, so that this module does not import the store's
    library)."""
    source: object = getattr(exc, "orig", None) or exc
    text = str(source).strip() or type(source).__name__
    return text.splitlines()[0]


def use_pidfd_child_watcher() -> None:
    """Waits for task processes with pidfds instead of a thread per child (Python 3.11).

    asyncio's default watcher on 3.11 starts a thread per subprocess; with many short tasks those
    threads fight the event loop (and gRPC's) for the GIL, which cut dispatch throughput by half in
    the fan-out benchmark. 3.12+ uses pidfds by default, and deprecates choosing a watcher.
    """
    if sys.version_info < (3, 12) and sys.platform == "linux":
        asyncio.set_child_watcher(asyncio.PidfdChildWatcher())


# Of the shutdown budget, what is kept for leaving the event loop after the parts stopped.
_TEARDOWN_S = 2.0


async def serve(
    name: str, process: ServerProcess, *, announce: Callable[[], None] = lambda: None
) -> Shutdown:
    """Starts ``process``, prints its ready line, and stops it at SIGTERM/SIGINT (see module).
    ``announce`` runs once the signals are handled, before the start. Returns the shutdown, whose
    ``abandoned`` lists what the stop could not do."""
    signalled = asyncio.Event()
    loop = asyncio.get_running_loop()
    timeout = process.shutdown_timeout

    def on_signal(sig: signal.Signals) -> None:
        if signalled.is_set():
            exit_at_once(name, process, sig)
        signalled.set()
        _arm_deadline(name, process, timeout)

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)
    announce()
    starting = asyncio.create_task(process.start(), name=f"{name}-start")
    stopping = asyncio.create_task(signalled.wait(), name=f"{name}-signal")
    try:
        await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if starting.done():
            starting.result()  # a failed start raises here, already stopped
            print(process.ready_line(), flush=True)
            await stopping
        shutdown = Shutdown(max(0.0, timeout - min(_TEARDOWN_S, timeout / 4)))
        print(f"dsched {name}: shutting down", flush=True)
        if not starting.done():
            await shutdown.cancel("abandon the start-up", starting)
        await process.stop(shutdown)
        if shutdown.abandoned:
            print(f"dsched {name}: stopped, abandoned: {'; '.join(shutdown.abandoned)}", flush=True)
        else:
            print(f"dsched {name}: stopped", flush=True)
        return shutdown
    finally:
        stopping.cancel()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
            if signalled.is_set():  # from now on until the exit, another signal exits at once
                signal.signal(sig, lambda signum, _frame: exit_at_once(name, process, signum))


def exit_at_once(name: str, process: ServerProcess, sig: int) -> NoReturn:
    """A second signal: abandons the shutdown; exit status 128 + the signal's number."""
    signame = signal.Signals(sig).name
    log.error("%s again: exiting at once, abandoning the shutdown", signame)
    _exit_now(f"dsched {name}: {signame} again: exiting at once", process, 128 + sig)


def _arm_deadline(name: str, process: ServerProcess, timeout: float) -> None:
    """The shutdown's hard bound, outside the event loop: it fires even if the loop is stuck in a
    call that never returns, or the interpreter waits at its exit for a thread that never ends."""

    def expire() -> None:
        log.error("shutdown not finished within %g s: exiting now", timeout)
        _exit_now(
            f"dsched {name}: not stopped within {timeout:g} s: exiting", process, EXIT_ABANDONED
        )

    timer = threading.Timer(timeout, expire)
    timer.daemon = True
    timer.name = "dsched-shutdown-deadline"
    timer.start()


def _exit_now(line: str, process: ServerProcess, status: int) -> NoReturn:
    try:
        process.abandon()
    except Exception:
        log.exception("could not end what must not outlive this process")
    print(line, flush=True)
    flush_output()
    os._exit(status)


def flush_output() -> None:
    """Flushes stdout, stderr and every log handler (before an ``os._exit``)."""
    for handler in logging.getLogger().handlers:
        handler.flush()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # closed by now: nothing to flush
            stream.flush()


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
        shutdown = asyncio.run(_serve_settings(role, settings, make))
    except StartupError as err:
        sys.stderr.write(f"error: dsched {role}: {err}\n")
        return EXIT_FAILED
    except KeyboardInterrupt:  # before the signal handlers were installed
        return EXIT_INTERRUPTED
    if shutdown.abandoned:
        # Threads that were abandoned (a ZooKeeper client that never closed) must not hold the
        # interpreter's exit: their work is logged as abandoned already.
        flush_output()
        os._exit(EXIT_ABANDONED)
    return EXIT_OK


async def _serve_settings(
    role: Role, settings: Settings, make: Callable[[Settings], ServerProcess]
) -> Shutdown:
    try:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        process = make(settings)
    except (OSError, ValueError) as exc:
        raise StartupError(reason(exc)) from exc

    def announce() -> None:
        log.info(
            "%s starting: registry %s, data in %s%s",
            role,
            settings.registry,
            settings.data_dir,
            "" if role == "worker" else f", database {settings.safe_db_url}",
        )

    return await serve(role, process, announce=announce)
