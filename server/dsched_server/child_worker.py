"""The worker of a standalone in a process of its own: ``dsched worker``, started and watched.

In one process the master and the worker share one interpreter lock; on a machine with two cores
or more a worker process lets them run at once. The child is the worker a cluster runs, started
as ``dsched worker`` with the standalone's settings: it registers, beats and is fenced through
the standalone's registry, which it reaches over gRPC (``RegistryService``, the registry URL
``grpc://127.0.0.1:<port>``), and reports to the master's cluster listener like any worker.

- Start: the child is spawned in a session of its own (a Ctrl-C at the terminal reaches the
  standalone only, which then stops the child in order) and first asks for ``PR_SET_PDEATHSIG``
  SIGKILL (:func:`child_main`), so a standalone killed with SIGKILL takes its worker with it, and
  the worker's reaper its tasks.
  ``start`` returns once the child printed its ready line.
- Output: the child's log lines (stderr, the same format with the role ``worker``) go straight to
  the standalone's stderr; its stdout lines (ready, shutting down, stopped) are logged with its
  pid, so the standalone's stdout keeps its one ready line.
- A child that dies (kill -9, a crash) is started again after a back-off. Its death ends its
  registry session at once (the stream breaks), so the masters handle its tasks as a cluster's
  dead worker's (failover), and its reaper has killed them already.
- Stop: SIGTERM, so the child stops as any worker does (BUSY, running tasks given what the budget
  allows, events flushed, only then out of the registry) within the standalone's budget less what
  the master's stop keeps; what the child abandoned is reported as abandoned here; a child still
  alive at the end of its budget is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import re
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass

from dsched.backoff import Backoff
from dsched_server.config import Settings
from dsched_server.shutdown import Shutdown
from dsched_worker.main import worker_main

log = logging.getLogger(__name__)

READY_TIMEOUT_S = 60.0
# A child that lived this long is restarted without waiting; one that dies sooner backs off.
STEADY_S = 30.0
_PR_SET_PDEATHSIG = 1
_READY = re.compile(r"dsched worker is up: address (\S+), group \S+, epoch (\d+), pid (\d+)")
_ABANDONED = "stopped, abandoned: "
# ``dsched worker`` without the CLI's start-up in front of it (:func:`child_main`).
_WORKER_MAIN = "from dsched_server.child_worker import child_main; raise SystemExit(child_main())"

# The settings a worker reads (the standalone passes them through its child's environment, so a
# value from the standalone's file, environment or flags reaches the child the same).
_WORKER_SETTINGS = (
    "host",
    "registry_session_timeout",
    "worker_group",
    "worker_slots",
    "heartbeat_interval",
    "failover_delay",
    "outbox_fsync",
    "log_level",
    "cpu_threshold",
    "memory_threshold",
    "disk_threshold",
    "task_env_allow",
    "spark_home",
    "python_interpreter",
    "http_allow",
    "workdir_keep_failed",
    "log_retention_days",
)


def child_main(argv: list[str] | None = None) -> int:
    """The child's entry point: ``<standalone pid> <dsched worker options>``. It asks the kernel
    for SIGKILL when the standalone dies, however it dies (set here rather than between fork
    and exec, so the spawn needs no ``preexec_fn`` and stays a vfork), and gives up if the
    standalone is already gone; then it is ``dsched worker``."""
    args = sys.argv[1:] if argv is None else argv
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != int(args[0]):
        return 1  # the standalone died before the request took effect
    return worker_main(args[1:])


@dataclass(frozen=True, slots=True)
class Incarnation:
    """One start of the child, as its ready line says."""

    address: str
    epoch: int
    pid: int


def child_environment(settings: Settings, registry: str, stop_budget: float) -> dict[str, str]:
    """The child's environment: the standalone's without ``DSCHED_*`` and its config file, plus
    every worker setting from ``settings``, the registry service and the stop budget."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("DSCHED_")}
    for name in _WORKER_SETTINGS:
        value = getattr(settings, name)
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        env[f"DSCHED_{name.upper()}"] = text
    env["DSCHED_REGISTRY"] = registry
    env["DSCHED_SHUTDOWN_TIMEOUT"] = f"{max(1.0, stop_budget):g}"
    return env


class ChildWorker:
    """The standalone's worker process (see the module docstring). ``registry`` returns the
    registry service's address once it is bound (after the registry server started);
    ``stop_budget`` is the child's own ``shutdown_timeout``."""

    def __init__(
        self,
        settings: Settings,
        registry: Callable[[], str],
        *,
        stop_budget: float,
        backoff: Backoff | None = None,
    ) -> None:
        self.settings = settings
        self.registry = registry
        self.stop_budget = stop_budget
        self.backoff = backoff or Backoff(initial=0.5, maximum=10.0)
        self.current: Incarnation | None = None
        self.restarts = 0
        self._proc: asyncio.subprocess.Process | None = None
        self._watching: asyncio.Task[None] | None = None
        self._stopping = False
        self._abandoned: list[str] = []
        self._relays: set[asyncio.Task[None]] = set()

    @property
    def address(self) -> str:
        return self.current.address if self.current is not None else ""

    @property
    def pid(self) -> int:
        return self.current.pid if self.current is not None else 0

    async def start(self) -> None:
        await self._spawn()
        self._watching = asyncio.get_running_loop().create_task(
            self._watch(), name="child-worker-watch"
        )

    async def stop(self, *, shutdown: Shutdown | None = None) -> None:
        """SIGTERM, then waits for the child's own bounded stop; kills it past the budget."""
        shutdown = shutdown or Shutdown(self.stop_budget)
        self._stopping = True
        if self._watching is not None:
            await shutdown.cancel("stop watching the worker process", self._watching)
        proc = self._proc
        if proc is None or proc.returncode is not None:
            return
        proc.send_signal(signal.SIGTERM)
        wait = asyncio.ensure_future(proc.wait())
        done, _ = await asyncio.wait({wait}, timeout=shutdown.budget(self.stop_budget + 1.0))
        if not done:
            proc.kill()  # its reaper kills the tasks
            await proc.wait()
            shutdown.abandon(f"stop the worker process {proc.pid}: killed, it did not stop in time")
        elif proc.returncode != 0:
            # What the worker could not do is what this stop could not do, in its own words.
            for what in self._abandoned or [f"stop the worker process: exit {proc.returncode}"]:
                shutdown.abandon(what)

    def abandon(self) -> None:
        """Kills the child at once (the standalone exits at once): its reaper kills the tasks."""
        proc = self._proc
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()

    # -- internals --------------------------------------------------------------------------------

    async def _spawn(self) -> None:
        """Starts the child and waits for its ready line; raises RuntimeError if it ends first."""
        data_dir = self.settings.data_dir / "worker"
        argv = [
            sys.executable,
            "-c",
            _WORKER_MAIN,
            str(os.getpid()),
            "--data-dir",
            str(data_dir),
            "--port",
            str(self.settings.worker_port),
        ]
        self._abandoned = []
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            env=child_environment(self.settings, f"grpc://{self.registry()}", self.stop_budget),
            start_new_session=True,
        )
        self._proc = proc
        assert proc.stdout is not None
        try:
            ready = await asyncio.wait_for(self._ready(proc.stdout), READY_TIMEOUT_S)
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            raise
        if ready is None:
            code = await proc.wait()
            raise RuntimeError(f"the worker process exited with status {code} before it was up")
        self.current = ready
        relay = asyncio.get_running_loop().create_task(self._relay(proc.stdout, proc.pid))
        self._relays.add(relay)  # the loop keeps only a weak reference to a task
        relay.add_done_callback(self._relays.discard)

    async def _ready(self, stdout: asyncio.StreamReader) -> Incarnation | None:
        while line := (await stdout.readline()).decode(errors="replace").rstrip():
            found = _READY.search(line)
            if found is None:
                self._said(line)
                continue
            ready = Incarnation(found[1], int(found[2]), int(found[3]))
            # Not the child's line as it is: "is up" on the console is the standalone's.
            log.info(
                "worker process %d up: address %s, epoch %d", ready.pid, ready.address, ready.epoch
            )
            return ready
        return None

    async def _relay(self, stdout: asyncio.StreamReader, pid: int) -> None:
        while line := await stdout.readline():
            self._said(line.decode(errors="replace").rstrip(), pid)

    def _said(self, line: str, pid: int = 0) -> None:
        if _ABANDONED in line:
            self._abandoned = line.split(_ABANDONED, 1)[1].split("; ")
        log.info("worker process%s: %s", f" {pid}" if pid else "", line)

    async def _watch(self) -> None:
        """Starts the child again whenever it dies, until the standalone stops."""
        loop = asyncio.get_running_loop()
        delays = self.backoff.delays()
        while True:
            proc = self._proc
            assert proc is not None
            began = loop.time()
            code = await proc.wait()
            if self._stopping:
                return
            if loop.time() - began > STEADY_S:
                delays = self.backoff.delays()
            delay = next(delays, self.backoff.maximum)
            log.error(
                "the worker process %d died (status %d): starting another in %.1f s",
                proc.pid,
                code,
                delay,
            )
            self.current = None
            await asyncio.sleep(delay)
            try:
                await self._spawn()
            except Exception as exc:
                log.error("the worker process did not start: %s", exc)
                continue
            self.restarts += 1
            log.info("worker process restarted: %s", self.current)
