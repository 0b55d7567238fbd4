"""One test's cluster: a private ZooKeeper, a fresh PostgreSQL database, masters and workers as
processes, and the hooks to hurt them.

Each member is a ``dsched master`` / ``dsched worker`` subprocess in its own session (process
group), with its own data directory and log file (stdout and stderr) under the run directory. It
counts as started once it printed its ready line, from which the harness takes its address, epoch
and pid. Fault hooks:

- :meth:`Cluster.kill9`: SIGKILL; with ``tasks=True`` also every task process group the member
  spawned (tasks run in sessions of their own, so the member's group does not reach them), found
  before the kill while they are still the member's children.
- :meth:`Cluster.stop`: SIGTERM, a graceful stop (bounded wait).
- :meth:`Cluster.pause` / :meth:`Cluster.resume`: SIGSTOP / SIGCONT of the server pid only (a GC
  pause or a heap dump freezes the server, not its children).
- ``cluster.zk.kill()`` / ``cluster.zk.restart()`` (see :mod:`tests.zk`).

:meth:`Cluster.close` kills everything it started (member groups, task groups the ledger names,
ZooKeeper), bounded, and on failure prints the tail of every member's log. Should pytest itself
die, :mod:`tests.lifeline` kills them.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Literal

from dsched import Client, Unavailable
from dsched_server.constants import FAILOVER_DELAY_S, REGISTRY_SESSION_TIMEOUT_S
from tests import lifeline
from tests.cluster.db import Database
from tests.cluster.deaths import DeathWatch
from tests.cluster.ledger import TaskLedger
from tests.cluster.watcher import RegistryWatcher
from tests.e2e.conftest import process_state
from tests.zk import ZooKeeperServer

DSCHED = Path(sys.executable).parent / "dsched"
READY_TIMEOUT_S = 60.0  # several Python servers importing grpc + SQLAlchemy at once on 2 cores
STOP_TIMEOUT_S = 30.0
_READY = re.compile(
    r"dsched (?P<role>master|worker) is up: address (?P<address>\S+), "
    r"(?:cluster address (?P<cluster>\S+), )?(?:group (?P<group>\S+), )?"
    r"epoch (?P<epoch>\d+), pid (?P<pid>\d+)"
)

# A worker's log line (local time, as logging's asctime) naming the task groups it killed at start,
# or its reaper's (which writes to the worker's log) naming those it killed when the worker died.
_LEFTOVERS = re.compile(
    r"^(?P<at>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*"
    r"killed task process groups left by (?:an earlier run|a dead worker): "
    r"(?P<pids>\[[\d, ]*\])",
    re.MULTILINE,
)

Role = Literal["master", "worker"]


@dataclass(frozen=True)
class Timeouts:
    """The cluster's liveness settings (seconds), passed to every member by environment: the
    product's defaults, with a heartbeat every second so that load figures stay fresh."""

    session: float = REGISTRY_SESSION_TIMEOUT_S
    failover_delay: float = FAILOVER_DELAY_S
    heartbeat: float = 1.0


@dataclass
class Member:
    """One master or worker process."""

    role: Role
    name: str
    proc: subprocess.Popen[bytes]
    data_dir: Path
    log_path: Path
    log_file: IO[bytes]
    address: str = ""
    cluster_address: str = ""  # masters: the listener their workers report to
    epoch: int = 0
    state: Literal["starting", "running", "paused", "killed", "stopped"] = "starting"
    killed_at: float | None = None  # time.monotonic() of kill9
    killed_wall: float | None = None  # time.time() of kill9, for the ledger's wall clock

    @property
    def pid(self) -> int:
        """The server's pid, also its process group id (it leads its own session)."""
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    @property
    def incarnation(self) -> tuple[str, int]:
        """(address, epoch): what the masters know this process by."""
        return self.address, self.epoch

    @property
    def serving(self) -> bool:
        """Alive and not paused: it answers calls."""
        return self.alive and self.state == "running"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log().splitlines()[-lines:])

    def __repr__(self) -> str:
        return f"<{self.name} {self.role} {self.address} epoch {self.epoch} {self.state}>"


def _children(pid: int) -> list[int]:
    """Live direct children of ``pid`` (this kernel has no /proc/<pid>/task/<tid>/children)."""
    found = []
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(entry.read_text().rsplit(")", 1)[1].split()[1])
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            continue
        child = int(entry.parent.name)
        if ppid == pid and process_state(child) is not None:
            found.append(child)
    return found


def _tasks(pid: int) -> list[int]:
    """Live direct children of the worker ``pid`` that are tasks: all but its reaper."""
    return [child for child in _children(pid) if not _is_reaper(child)]


def _is_reaper(pid: int) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"dsched_worker.reaper" in argv


def _is_task_of(pid: int, marker: str) -> bool:
    """Whether ``pid`` is a live task process of this cluster (its environment carries the run's
    marker): a pid from the ledger may belong to an unrelated process by now."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False
    return (marker + "\0").encode() in environ


def _killpg(pgid: int, sig: signal.Signals = signal.SIGKILL) -> None:
    # killpg(0) would signal the caller's own group (pytest), killpg(1) init's: never.
    assert pgid > 1 and pgid != os.getpgrp(), pgid
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


class Cluster:
    """ZooKeeper + PostgreSQL database + members for one test. Use :meth:`start`, then the fault
    hooks; :meth:`close` (the fixture calls it) tears everything down."""

    def __init__(self, run_dir: Path, db_url: str, timeouts: Timeouts | None = None) -> None:
        self.run_dir = run_dir
        run_dir.mkdir(parents=True, exist_ok=True)
        self.timeouts = timeouts or Timeouts()
        # More DSCHED_* settings for the members started from now on (e.g. a shutdown timeout).
        self.settings: dict[str, str] = {}
        self.db_url = db_url  # SQLAlchemy form, for the masters
        self.zk = ZooKeeperServer(run_dir / "zookeeper", tick_ms=1000)
        self.chroot = f"/dsched-{secrets.token_hex(4)}"
        self.members: list[Member] = []
        self._clients: dict[str, Client] = {}
        self.db = Database(db_url)
        self.db.create_effect_tables()
        self.ledger = TaskLedger(run_dir / "ledger.txt", self.db.url, run_dir / "psql-errors.log")
        self.watcher: RegistryWatcher | None = None
        # Task process (pid) -> wall-clock time it was seen to die, for runs that could not write
        # their own end line (SIGKILLed): the checker's overlap arithmetic needs an end.
        self.deaths: dict[int, float] = {}
        self.death_watch = DeathWatch(self.ledger, self.deaths)
        self._counts: Counter[Role] = Counter()

    @property
    def registry(self) -> str:
        return f"{self.zk.connect_string}{self.chroot}"

    # -- starting --------------------------------------------------------------------------------

    def start(self, *, masters: int = 2, workers: int = 2) -> None:
        """Starts ZooKeeper, the registry watcher, then the members. The first master starts alone
        (it migrates the fresh database); the rest start together."""
        self.zk.start()
        self.watcher = RegistryWatcher(
            self.zk.connect_string, self.chroot, session_timeout=self.timeouts.session
        )
        self.watcher.start()
        self.death_watch.start()
        if masters:
            self.add_master()
        pending = [self._spawn("master") for _ in range(masters - 1)]
        pending += [self._spawn("worker") for _ in range(workers)]
        for member in pending:
            self._await_ready(member)

    def add_master(self) -> Member:
        return self._await_ready(self._spawn("master"))

    def add_worker(
        self, *, group: str = "default", slots: int = 8, zookeeper: str | None = None
    ) -> Member:
        """A worker; ``zookeeper`` (``host:port``) replaces the cluster's ZooKeeper address in its
        registry setting (e.g. a proxy that can cut the line)."""
        registry = None if zookeeper is None else f"{zookeeper}{self.chroot}"
        return self._await_ready(self._spawn("worker", group=group, slots=slots, registry=registry))

    def restart(self, member: Member, *, same_port: bool = False) -> Member:
        """Starts a new process of a dead ``member``'s role on its data directory (as a
        supervisor would); returns the new member: a new epoch, on a new port unless
        ``same_port`` (as systemd or the local cluster restart it: same address)."""
        assert not member.alive, f"{member.name} still runs"
        port = int(member.address.rpartition(":")[2]) if same_port else 0
        return self._await_ready(self._spawn(member.role, data_dir=member.data_dir, port=port))

    def note_leftover_kills(self, member: Member) -> list[int]:
        """Records in :attr:`deaths` the task runs ``member`` killed at its start as leftovers of
        an earlier incarnation, or its reaper killed when it died, at the time its log says (to the
        millisecond: the death watch polls every 100 ms, too coarse when the attempts run again a
        moment later). Returns the pids."""
        killed: list[int] = []
        for match in _LEFTOVERS.finditer(member.log()):
            at = datetime.strptime(match["at"], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            pids = [int(p) for p in re.findall(r"\d+", match["pids"])]
            self.deaths.update(dict.fromkeys(pids, at))
            killed += pids
        return killed

    def task_pids(self, member: Member) -> list[int]:
        """The task processes (group leaders) ``member`` runs now (not its reaper)."""
        return _tasks(member.pid)

    def wait_dead(self, pids: Iterable[int], timeout: float) -> float:
        """Waits (bounded) until none of ``pids`` lives, recording when each was seen gone in
        :attr:`deaths`; returns the monotonic time the last one went."""
        waiting = set(pids)
        deadline = time.monotonic() + timeout
        while waiting:
            for pid in [p for p in waiting if process_state(p) is None]:
                self.deaths[pid] = time.time()
                waiting.discard(pid)
            if waiting and time.monotonic() > deadline:
                raise AssertionError(f"task processes {sorted(waiting)} alive after {timeout}s")
            time.sleep(0.05)
        return time.monotonic()

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.upper().startswith("DSCHED_")}
        env.update(
            DSCHED_REGISTRY_SESSION_TIMEOUT=f"{self.timeouts.session:g}",
            DSCHED_FAILOVER_DELAY=f"{self.timeouts.failover_delay:g}",
            DSCHED_HEARTBEAT_INTERVAL=f"{self.timeouts.heartbeat:g}",
            DSCHED_LOG_LEVEL="INFO",
            # Never BUSY for CPU: the whole cluster, a JVM and the tasks share 2 cores, so CPU
            # readings sit near 100 % in bursts, and a master or worker flapping to BUSY would stop
            # claiming or taking work for reasons unrelated to the fault under test.
            DSCHED_CPU_THRESHOLD="1",
            # Lets teardown recognise this cluster's task processes (see _is_task_of). Not a
            # DSCHED_ name: workers keep their own DSCHED_* settings from their tasks; and tasks
            # inherit only the worker variables allowed to them, so it is allowed here.
            CHAOS_RUN_DIR=str(self.run_dir),
            DSCHED_TASK_ENV_ALLOW="CHAOS_RUN_DIR",
        )
        env.update(self.settings)
        return env

    def _spawn(
        self,
        role: Role,
        *,
        group: str = "default",
        slots: int = 8,
        data_dir: Path | None = None,
        port: int = 0,
        registry: str | None = None,
    ) -> Member:
        self._counts[role] += 1
        name = f"{role[0]}{self._counts[role]}"
        if data_dir is None:
            data_dir = self.run_dir / name
            data_dir.mkdir(parents=True)
        argv = [str(DSCHED), role, "--registry", registry or self.registry, "--port", str(port)]
        if role == "master":
            argv += ["--db", self.db_url, "--cluster-port", "0"]
        else:
            argv += ["--group", group, "--slots", str(slots)]
        argv += ["--data-dir", str(data_dir)]
        log_path = self.run_dir / f"{name}.log"
        log_file = log_path.open("ab")
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            env=self._env(),
            cwd=data_dir,
            start_new_session=True,
        )
        lifeline.guard(proc)  # with its tasks, should pytest die
        member = Member(role, name, proc, data_dir, log_path, log_file)
        self.members.append(member)
        return member

    def _await_ready(self, member: Member) -> Member:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            match = _READY.search(member.log())
            if match:
                member.address = match["address"]
                member.cluster_address = match["cluster"] or ""
                member.epoch = int(match["epoch"])
                assert int(match["pid"]) == member.pid, (member, match[0])
                member.state = "running"
                return member
            if not member.alive:
                raise AssertionError(
                    f"{member.name} exited with {member.proc.returncode} before it was up:\n"
                    + member.log_tail()
                )
            time.sleep(0.05)
        raise AssertionError(
            f"{member.name} not up within {READY_TIMEOUT_S}s:\n{member.log_tail()}"
        )

    # -- members ---------------------------------------------------------------------------------

    def masters(self) -> list[Member]:
        """Masters that answer calls now (alive and not paused)."""
        return [m for m in self.members if m.role == "master" and m.serving]

    def workers(self) -> list[Member]:
        return [m for m in self.members if m.role == "worker" and m.serving]

    def member_by_epoch(self, role: Role, epoch: int) -> Member:
        found = [m for m in self.members if m.role == role and m.epoch == epoch]
        assert found, f"no {role} of epoch {epoch} among {self.members}"
        return found[-1]

    def member_by_address(self, role: Role, address: str) -> Member:
        found = [m for m in self.members if m.role == role and m.address == address]
        assert found, f"no {role} at {address} among {self.members}"
        return found[-1]

    # -- faults ----------------------------------------------------------------------------------

    def kill9(self, member: Member, *, tasks: bool = True) -> float:
        """SIGKILLs ``member`` (its process group) and, with ``tasks``, the process groups of the
        tasks it runs; returns the monotonic time of the kill."""
        task_pids: list[int] = []
        if tasks:
            # Frozen first, so that it starts no task between the scan and the kill.
            _killpg(member.pid, signal.SIGSTOP)
            task_pids = _tasks(member.pid)
            for pid in _children(member.pid):  # the reaper too: the whole tree dies at once
                _killpg(pid)
            _killpg(member.pid)
        else:
            with contextlib.suppress(ProcessLookupError):
                os.kill(member.pid, signal.SIGKILL)
        member.killed_at, member.killed_wall = time.monotonic(), time.time()
        self.deaths.update(dict.fromkeys(task_pids, member.killed_wall))
        member.proc.wait(STOP_TIMEOUT_S)
        member.state = "killed"
        return member.killed_at

    def stop(self, member: Member, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM; waits (bounded) and returns the exit code."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(member.pid, signal.SIGCONT)
            member.proc.send_signal(signal.SIGTERM)
        try:
            code = member.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            _killpg(member.pid)
            member.proc.wait(STOP_TIMEOUT_S)
            raise AssertionError(
                f"{member.name} did not stop within {timeout}s of SIGTERM:\n{member.log_tail()}"
            ) from None
        member.state = "stopped"
        return code

    def pause(self, member: Member) -> float:
        """SIGSTOPs the server process only (its tasks keep running); returns the monotonic time."""
        os.kill(member.pid, signal.SIGSTOP)
        member.state = "paused"
        return time.monotonic()

    def resume(self, member: Member) -> float:
        os.kill(member.pid, signal.SIGCONT)
        member.state = "running"
        return time.monotonic()

    # -- talking to the cluster ------------------------------------------------------------------

    def client(self, member: Member | None = None) -> Client:
        """An SDK client of ``member`` (default: the first master that serves)."""
        target = member or next(iter(self.masters()), None)
        assert target is not None, f"no live master among {self.members}"
        if target.address not in self._clients:
            self._clients[target.address] = Client.connect(target.address, timeout=10)
        return self._clients[target.address]

    def start_workflow(self, project: str, workflow: str, *, request_id: str | None = None) -> int:
        """Starts a run through some live master; on UNAVAILABLE retries the same request (same
        ``request_id``, so at most one instance results) on the next master. Returns its id."""
        rid = request_id or str(uuid.uuid4())
        last: Exception | None = None
        for _ in range(3):
            for master in self.masters():
                try:
                    return self.client(master).start_workflow(project, workflow, request_id=rid).id
                except Unavailable as exc:
                    last = exc
            time.sleep(0.5)
        raise AssertionError(f"could not start {project}/{workflow} on any master: {last!r}")

    def counters(self, members: Iterable[Member] | None = None) -> Counter[str]:
        """The sum of the engine counters of the masters that serve now (or of ``members``)."""
        total: Counter[str] = Counter()
        for master in members if members is not None else self.masters():
            total.update(self.client(master).server_info().counters)
        return total

    def db_query(self, sql: str, *args: object) -> list[tuple[object, ...]]:
        return self.db.query(sql, *args)

    # -- teardown --------------------------------------------------------------------------------

    def report_logs(self) -> str:
        parts = [f"=== {m!r} ({m.log_path})\n{m.log_tail()}" for m in self.members]
        parts.append(f"=== zookeeper\n{self.zk.log_tail(20)}")
        psql = self.ledger.psql_error_text()
        if psql:
            parts.append(f"=== psql errors of tasks\n{psql[-3000:]}")
        return "\n".join(parts)

    def close(self) -> None:
        """Kills every process this cluster started (bounded) and releases the database. Each
        step runs even if an earlier one failed: no process may outlive the test."""
        try:
            self._kill_all()
        finally:
            try:
                self.death_watch.stop()
                for client in self._clients.values():
                    client.close()
                self._clients.clear()
                if self.watcher is not None:
                    self.watcher.stop()
            finally:
                self.zk.close()
                self.db.close()

    def _kill_all(self) -> None:
        marker = f"CHAOS_RUN_DIR={self.run_dir}"
        tasks: set[int] = set()
        for member in self.members:
            if member.alive:
                _killpg(member.pid, signal.SIGSTOP)  # spawns nothing more from here on
                tasks.update(_children(member.pid))
        for member in self.members:
            if member.alive:
                _killpg(member.pid)
        with contextlib.suppress(AssertionError):  # a torn ledger must not stop the clean-up
            tasks.update(line.pid for line in self.ledger.lines())
        for pid in tasks:
            if _is_task_of(pid, marker):
                _killpg(pid)
        for member in self.members:
            with contextlib.suppress(subprocess.TimeoutExpired):
                member.proc.wait(STOP_TIMEOUT_S)
            member.log_file.close()
