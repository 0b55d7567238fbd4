"""``dsched master`` and ``dsched worker`` as processes against a real ZooKeeper and PostgreSQL.

The contract of :mod:`dsched_server.lifecycle`: one ready line on stdout, ``--port 0`` advertising
the bound port, a workflow run across the processes, ``dsched cluster`` listing the members with
their epochs and weights, SIGTERM ending in exit 0 with the members' znodes gone at once
(deregistered, not expired), and exit statuses 2 (bad settings) and 1 (ZooKeeper or the
database unreachable) with one clear line and no traceback.
"""

from __future__ import annotations

import re
import secrets
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest
from kazoo.client import KazooClient

from dsched import Client, Shell, TaskState, Workflow, WorkflowState
from tests import lifeline
from tests.conftest import free_port
from tests.e2e.conftest import (
    DSCHED,
    clean_env,
    cli,
    eventually,
    parse_table,
    server_errors,
    wait_for_file_sh,
    wait_for_task,
)
from tests.listeners import assert_listeners_split
from tests.zk import ZooKeeperServer

READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 60.0
CONNECT_TIMEOUT_S = 15.0  # ZooKeeperRegistry's default: how long a start waits for ZooKeeper
READY_RE = re.compile(
    r"^dsched (?P<role>master|worker) is up: address (?P<address>\S+), "
    r"(?:cluster address (?P<cluster>\S+), )?(?:group (?P<group>\S+), )?"
    r"epoch (?P<epoch>\d+), pid (?P<pid>\d+)$"
)


@dataclass
class ServerProcess:
    """A running ``dsched master`` or ``dsched worker``; stdout and stderr go to two files."""

    role: str
    proc: subprocess.Popen[bytes]
    stdout_path: Path
    stderr_path: Path
    files: tuple[IO[bytes], IO[bytes]]
    address: str = ""
    cluster_address: str = ""  # masters: the listener workers report to
    epoch: int = 0

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def wait_ready(self) -> None:
        """Waits (bounded) for the ready line and records the address and epoch it names."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            lines = self.stdout().splitlines()
            if lines:
                match = READY_RE.match(lines[0])
                assert match, f"not a ready line: {lines[0]!r}"
                assert match["role"] == self.role and int(match["pid"]) == self.proc.pid
                self.address, self.epoch = match["address"], int(match["epoch"])
                self.cluster_address = match["cluster"] or ""
                assert bool(self.cluster_address) == (self.role == "master"), lines[0]
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.kill()
        pytest.fail(f"{self.role} not up within {READY_TIMEOUT_S}s:\n{self.stderr()[-4000:]}")

    def wait(self, timeout: float = STOP_TIMEOUT_S) -> int:
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.role} still running after {timeout}s") from None
        self._close()
        return code

    def stop(self) -> None:
        """SIGTERM; asserts exit status 0, the shutdown lines and a log without errors."""
        self.proc.send_signal(signal.SIGTERM)
        self.assert_stopped_cleanly()

    def assert_stopped_cleanly(self) -> None:
        assert self.wait() == 0, self.stderr()[-4000:]
        lines = self.stdout().splitlines()
        assert lines[1:] == [f"dsched {self.role}: shutting down", f"dsched {self.role}: stopped"]
        assert not server_errors(self.stderr()), self.stderr()[-4000:]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(STOP_TIMEOUT_S)
        self._close()

    def _close(self) -> None:
        for f in self.files:
            f.close()


def launch(role: str, run_dir: Path, *args: str) -> ServerProcess:
    """Starts ``dsched ROLE ARGS...`` (without waiting for it to be up). A master's cluster
    listener takes any free port unless ARGS say otherwise (tests run side by side)."""
    if role == "master" and "--cluster-port" not in args:
        args = (*args, "--cluster-port", "0")
    run_dir.mkdir(parents=True, exist_ok=True)
    name = f"{role}-{secrets.token_hex(3)}"
    out_path, err_path = run_dir / f"{name}.out", run_dir / f"{name}.err"
    out, err = out_path.open("wb"), err_path.open("wb")
    proc = subprocess.Popen(
        [str(DSCHED), role, *args],
        stdout=out,
        stderr=err,
        stdin=subprocess.DEVNULL,
        # Never BUSY for CPU (as in tests/cluster): on a loaded 2-core machine the readings sit
        # near 100 % in bursts, and a BUSY member stops claiming or receiving work.
        env=clean_env(DSCHED_HEARTBEAT_INTERVAL="1", DSCHED_CPU_THRESHOLD="1"),
        cwd=run_dir,
    )
    lifeline.guard(proc)
    return ServerProcess(role, proc, out_path, err_path, (out, err))


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")) as server:
        yield server


@pytest.fixture
def registry(zookeeper: ZooKeeperServer) -> str:
    """A connect string with a chroot of this test only, so tests never see each other's members."""
    return f"{zookeeper.connect_string}/dsched-{secrets.token_hex(4)}"


@pytest.fixture
def servers() -> Iterator[list[ServerProcess]]:
    """Processes a test starts; any still running at its end are killed."""
    started: list[ServerProcess] = []
    yield started
    for server in started:
        server.kill()


def start_master(
    servers: list[ServerProcess], run_dir: Path, registry: str, db: str
) -> ServerProcess:
    args = ["--port", "0", "--registry", registry, "--db", db, "--data-dir", str(run_dir)]
    master = launch("master", run_dir, *args)
    servers.append(master)
    master.wait_ready()
    return master


def start_worker(servers: list[ServerProcess], run_dir: Path, registry: str) -> ServerProcess:
    args = ["--port", "0", "--registry", registry, "--data-dir", str(run_dir), "--slots", "4"]
    worker = launch("worker", run_dir, *args)
    servers.append(worker)
    worker.wait_ready()
    return worker


def members(registry: str) -> dict[str, list[str]]:
    """The registry's member znodes, read with a client of our own (none if their parent node was
    never created)."""
    zk = KazooClient(hosts=registry)  # the chroot is part of the connect string
    zk.start(timeout=10)
    try:
        return {
            kind: zk.get_children(path) if zk.exists(path) else []
            for kind in ("masters", "workers")
            for path in [f"/nodes/{kind}"]
        }
    finally:
        zk.stop()
        zk.close()


@pytest.mark.timeout(180)
def test_master_and_worker_processes_run_a_workflow_and_leave_cleanly(
    tmp_path: Path,
    zookeeper: ZooKeeperServer,
    registry: str,
    pg_url: str,
    servers: list[ServerProcess],
) -> None:
    master = start_master(servers, tmp_path / "master", registry, pg_url)
    worker = start_worker(servers, tmp_path / "worker", registry)
    second = start_master(servers, tmp_path / "master2", registry, pg_url)
    assert master.address != second.address and master.epoch != second.epoch
    # Workers report to the cluster listeners (the run below needs it); clients cannot.
    for server in (master, second):
        assert_listeners_split(server.address, server.cluster_address)
    with Client.connect(master.address) as client:
        eventually(
            lambda: worker.address in {m.address for m in client.cluster_members(role="worker")},
            timeout=30,
            what="the master to see the worker",
        )
        with Workflow("fan", project="e2e-cluster") as wf:
            first = Shell("first", "echo '${setValue(rows=3)}'")
            middle = [Shell(f"mid_{n}", 'test "$rows" = 3') for n in range(3)]
            first >> middle >> Shell("last", "echo done")
        run = wf.run(client=client, wait=True, timeout=60)
        assert run.state is WorkflowState.SUCCEEDED
        attempts = list(client.iter_task_instances(run.id))
        assert len(attempts) == 5
        assert {t.host for t in attempts} == {worker.address}
    # Either master may have claimed the run (they split the commands); one of them did.
    claimed = 0
    for address in (master.address, second.address):
        with Client.connect(address) as client:
            claimed += client.server_info().counters["commands_claimed"]
    assert claimed >= 1

    listed = cli(master.address, "cluster")
    assert listed.returncode == 0, listed.stderr
    rows = {row["ADDRESS"]: row for row in parse_table(listed.stdout)}
    assert set(rows) == {master.address, second.address, worker.address}
    for server in (master, second, worker):
        row = rows[server.address]
        assert (row["ROLE"], row["CLUSTER"]) == (server.role.upper(), server.cluster_address or "-")
    assert rows[master.address]["WEIGHT"] == rows[second.address]["WEIGHT"] == "-"
    assert rows[worker.address]["GROUP"] == "default"
    assert 1.0 <= float(rows[worker.address]["WEIGHT"]) <= 100.0  # warm-up keeps it low

    # A task runs while the worker is told to stop: it may finish (the grace period) and its
    # result still reaches the master. (A second signal exits at once: see
    # tests/cluster/test_shutdown.py.)
    gate = tmp_path / "gate"
    with Client.connect(second.address) as client:
        with Workflow("slow", project="e2e-cluster") as slow:
            Shell("slow", f"touch {tmp_path}/running\n{wait_for_file_sh(gate)}")
        run = slow.run(client=client, wait=False)
        wait_for_task(client, run.id, "slow", TaskState.RUNNING)
        worker.proc.send_signal(signal.SIGTERM)
        eventually(lambda: "shutting down" in worker.stdout(), what="the worker to stop")
        gate.touch()
        worker.assert_stopped_cleanly()
        assert client.wait(run.id, timeout=30).state is WorkflowState.SUCCEEDED
        master.stop()
        # Deregistered at once: well within the session timeout (10 s) an expiry would take.
        started = time.monotonic()
        eventually(
            lambda: [m.address for m in client.cluster_members()] == [second.address],
            timeout=5,
            what="the second master to see only itself",
        )
        assert time.monotonic() - started < 5
    second.stop()
    assert members(registry) == {"masters": [], "workers": []}


@pytest.mark.parametrize(
    ("role", "args", "field", "message"),
    [
        ("master", ["--port", "http"], "--port", "integer"),
        ("master", ["--registry", "embedded"], "--registry", "dsched standalone"),
        ("worker", ["--db", "postgresql://db/x"], "argv", "unrecognized arguments: --db"),
        ("worker", ["--slots", "0", "--group", "no spaces"], "--slots", "at least 1"),
    ],
)
def test_bad_settings_exit_2_naming_the_fields(
    tmp_path: Path, role: str, args: list[str], field: str, message: str
) -> None:
    result = subprocess.run(
        [str(DSCHED), role, "--data-dir", str(tmp_path), *args],
        capture_output=True,
        text=True,
        timeout=30,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[0] == "error: invalid settings"
    assert any(line.startswith(f"  {field}: ") and message in line for line in lines[1:]), lines
    assert "Traceback" not in result.stderr


def test_a_registry_password_is_never_echoed(tmp_path: Path) -> None:
    result = subprocess.run(
        [str(DSCHED), "worker", "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=30,
        env=clean_env(DSCHED_REGISTRY_AUTH="no-colon-s3cret"),
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 2
    assert "DSCHED_REGISTRY_AUTH: must be user:password" in result.stderr
    assert "s3cret" not in result.stderr


def test_unreachable_zookeeper_exits_1_with_one_line(tmp_path: Path, pg_url: str) -> None:
    nowhere = f"127.0.0.1:{free_port()}/dsched"
    started = time.monotonic()
    master = launch("master", tmp_path, "--registry", nowhere, "--db", pg_url, "--port", "0")
    worker = launch("worker", tmp_path, "--registry", nowhere, "--port", "0")
    for server in (master, worker):
        assert server.wait(CONNECT_TIMEOUT_S + 20) == 1, server.stderr()[-4000:]
        assert server.stdout() == ""
        errors = [line for line in server.stderr().splitlines() if line.startswith("error:")]
        assert len(errors) == 1, errors
        prefix = f"error: dsched {server.role}: cannot join ZooKeeper at {nowhere}: "
        assert errors[0].startswith(prefix) and "cannot reach ZooKeeper" in errors[0]
        assert "Traceback" not in server.stderr()
    assert time.monotonic() - started < CONNECT_TIMEOUT_S + 15


def test_unreachable_database_exits_1_with_one_line(tmp_path: Path, registry: str) -> None:
    db = f"postgresql://dsched:s3cret@127.0.0.1:{free_port()}/dsched"
    master = launch("master", tmp_path, "--registry", registry, "--db", db, "--port", "0")
    assert master.wait(30) == 1, master.stderr()[-4000:]
    errors = [line for line in master.stderr().splitlines() if line.startswith("error:")]
    assert len(errors) == 1
    safe = db.replace("postgresql:", "postgresql+asyncpg:").replace("s3cret", "***")
    assert errors[0].startswith(f"error: dsched master: cannot use the database {safe}: ")
    assert "s3cret" not in master.stderr() and "Traceback" not in master.stderr()


def test_a_signal_during_start_up_stops_at_once(tmp_path: Path, pg_url: str) -> None:
    nowhere = f"127.0.0.1:{free_port()}/dsched"
    master = launch("master", tmp_path, "--registry", nowhere, "--db", pg_url, "--port", "0")
    eventually(lambda: "master starting" in master.stderr(), timeout=30, what="start-up")
    started = time.monotonic()
    master.proc.send_signal(signal.SIGTERM)
    assert master.wait(10) == 0, master.stderr()[-4000:]
    assert time.monotonic() - started < 5
    assert master.stdout().splitlines() == [
        "dsched master: shutting down",
        "dsched master: stopped",
    ]
    assert "Traceback" not in master.stderr()


def test_a_taken_port_exits_1_with_one_line(
    tmp_path: Path, registry: str, pg_url: str, servers: list[ServerProcess]
) -> None:
    first = start_master(servers, tmp_path / "first", registry, pg_url)
    port = first.address.rsplit(":", 1)[1]
    master = launch("master", tmp_path, "--registry", registry, "--db", pg_url, "--port", port)
    assert master.wait(30) == 1, master.stderr()[-4000:]
    errors = [line for line in master.stderr().splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in master.stderr()
    assert errors[0].startswith("error: dsched master: cannot start the master: "), errors
    assert port in errors[0]

    # The cluster listener's port taken: the same one line, and nothing left registered.
    cluster_port = first.cluster_address.rsplit(":", 1)[1]
    args = ["--registry", registry, "--db", pg_url, "--port", "0", "--cluster-port", cluster_port]
    master = launch("master", tmp_path / "second", *args)
    assert master.wait(30) == 1, master.stderr()[-4000:]
    errors = [line for line in master.stderr().splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in master.stderr()
    assert errors[0].startswith("error: dsched master: cannot start the master: "), errors
    assert cluster_port in errors[0]
    assert members(registry)["masters"] == [first.address]
    first.stop()
