"""End-to-end fixtures: a real ``dsched standalone`` process, the SDK and the ``dsched`` CLI.

- ``server`` (session): one standalone on a free port and a temporary data directory, shared by the
  tests that do not need a server of their own. Teardown sends SIGTERM and asserts a clean exit
  (code 0, "stopped" printed).
- ``client`` (session): an SDK client connected to it.
- ``project`` (function): a project name unique to the test, so tests never see each other's
  workflows or instances.
- :func:`start_standalone` starts a private server (restart and shutdown tests).

Waits are bounded: instance and task states are awaited on the watch stream (with a deadline);
only what has no stream (a file written by a task, a process going away) is polled, with a
deadline too.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TypeVar

import pytest

from dsched import Client, InstanceEvent, TaskInstance, TaskState, WorkflowInstance
from tests import lifeline
from tests.conftest import free_port

REPO = Path(__file__).resolve().parents[2]
DSCHED = Path(sys.executable).parent / "dsched"
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 60.0
CLI_TIMEOUT_S = 60.0

_T = TypeVar("_T")


# ------------------------------------------------------------------------------ the server process


def clean_env(**extra: str) -> dict[str, str]:
    """The test process's environment without ``DSCHED_*`` settings (they would configure the
    server or point the CLI elsewhere), plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("DSCHED_")}
    env.update(extra)
    return env


@dataclass
class Standalone:
    """A running ``dsched standalone`` process. Its stdout and stderr go to ``output_path``."""

    proc: subprocess.Popen[bytes]
    port: int
    data_dir: Path
    output_path: Path
    _output_file: IO[bytes]

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def output(self) -> str:
        return self.output_path.read_text(errors="replace")

    @property
    def worker_pid(self) -> int | None:
        """The pid of the worker process (the latest one started), None for a worker in the
        standalone's own process."""
        found = re.findall(r"worker process (\d+) up: ", self.output())
        return int(found[-1]) if found else None

    @property
    def cluster_address(self) -> str:
        """The master's cluster listener, as the ready line names it."""
        found = re.search(r"is up: .*cluster listener (\S+),", self.output())
        assert found, self.output()[-4000:]
        return found[1]

    def terminate(self, timeout: float = STOP_TIMEOUT_S) -> tuple[int, float]:
        """SIGTERM, then waits (bounded); returns (exit code, seconds it took)."""
        started = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        return self.wait(timeout), time.monotonic() - started

    def wait(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """Waits (bounded) for the exit after a signal; returns the exit code."""
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"standalone did not exit within {timeout}s:\n{self.output()[-4000:]}"
            ) from None
        self._output_file.close()
        return code

    def kill(self) -> int:
        """SIGKILL (a crash: no clean-up of any kind); returns the exit code (-9)."""
        self.proc.kill()
        code = self.proc.wait(STOP_TIMEOUT_S)
        self._output_file.close()
        return code

    def assert_clean_stop(self) -> float:
        """SIGTERM; asserts exit code 0 and the "stopped" line; returns the seconds it took."""
        code, took = self.terminate()
        out = self.output()
        assert code == 0, f"standalone exited with {code}:\n{out[-4000:]}"
        assert "dsched standalone: stopped" in out, out[-4000:]
        return took


def start_standalone(
    data_dir: Path,
    *,
    port: int | None = None,
    env: dict[str, str] | None = None,
    dsched: Path = DSCHED,
    worker: str | None = None,
) -> Standalone:
    """Starts ``dsched standalone --port P --data-dir DIR`` and returns once it printed "is up".

    ``dsched`` is the command (default: the repository's; tests/e2e/test_wheel.py runs an
    installed wheel's). ``worker`` is its ``--worker`` (default: the server's default).

    A port picked here can be taken by someone else before the server binds it; that start is
    retried on a new port (unless ``port`` was given). Anything else that keeps the server from
    coming up within :data:`READY_TIMEOUT_S` fails the test with the server's output.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    for _ in range(3):
        chosen = port or free_port()
        output_path = data_dir / f"standalone-{chosen}-{secrets.token_hex(3)}.log"
        out = output_path.open("wb")
        proc = subprocess.Popen(
            [
                *(str(dsched), "standalone", "--port", str(chosen), "--data-dir", str(data_dir)),
                *(["--worker", worker] if worker else []),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            # Never BUSY for CPU (as in tests/cluster): on a loaded 2-core machine the readings sit
            # near 100 % in bursts, and a lone BUSY master claims no command until they drop.
            env=env
            if env is not None
            else clean_env(DSCHED_LOG_LEVEL="INFO", DSCHED_CPU_THRESHOLD="1"),
            cwd=data_dir,
        )
        lifeline.guard(proc)
        server = Standalone(proc, chosen, data_dir, output_path, out)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            text = server.output()
            if "is up" in text:
                up_line = next(line for line in text.splitlines() if "is up" in line)
                assert f"master {server.address}" in up_line, up_line
                return server
            if proc.poll() is not None:
                break
            time.sleep(0.05)
        else:
            server.kill()
            pytest.fail(f"standalone not up within {READY_TIMEOUT_S}s:\n{server.output()[-4000:]}")
        out.close()
        text = server.output()
        if port is None and "address" in text.lower() and "in use" in text.lower():
            continue  # lost the port race: try another
        pytest.fail(f"standalone exited with {proc.returncode} before it was up:\n{text[-4000:]}")
    pytest.fail("standalone could not bind a free port three times")


def server_errors(output: str) -> list[str]:
    """The lines of a server's output that report an error or start a traceback."""
    return [line for line in output.splitlines() if " ERROR " in line or "Traceback" in line]


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    """One standalone for the session; stopped with SIGTERM and checked for a clean exit, and for
    a clean log: nothing the tests do should make the server log an ERROR or a traceback."""
    standalone = start_standalone(tmp_path_factory.mktemp("standalone"))
    try:
        yield standalone
    finally:
        if standalone.proc.poll() is None:
            standalone.assert_clean_stop()
    errors = server_errors(standalone.output())
    assert not errors, f"the server logged errors ({standalone.output_path}):\n" + "\n".join(
        errors[:20]
    )


@pytest.fixture(scope="session")
def client(server: Standalone) -> Iterator[Client]:
    with Client.connect(server.address) as conn:
        yield conn


@pytest.fixture
def project(request: pytest.FixtureRequest) -> str:
    """A project name of this test only: ``e2e-<test name>-<random>`` (names allow ``[._-]``)."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name).strip("-")
    return f"e2e-{name[:40]}-{secrets.token_hex(3)}"


# ------------------------------------------------------------------------------------------ the CLI


def cli(
    server: Standalone | str, *args: str, timeout: float = CLI_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    """Runs ``dsched --server ADDR ARGS...`` and returns its result (never raises on exit code)."""
    address = server if isinstance(server, str) else server.address
    return subprocess.run(
        [str(DSCHED), "--server", address, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=clean_env(),
        cwd=REPO,
        stdin=subprocess.DEVNULL,
    )


def instance_id_from_run(stdout: str) -> int:
    """The id in the first line of ``dsched run``: ``instance 12  project/wf v1  SUBMITTED``."""
    match = re.match(r"instance (\d+) ", stdout)
    assert match, f"no instance line in: {stdout[:500]!r}"
    return int(match.group(1))


def parse_table(text: str) -> list[dict[str, str]]:
    """Rows of a CLI table (upper-case headers, columns separated by two or more spaces), up to the
    first blank line after it (``dsched show`` prints task reasons below its table)."""
    lines = text.splitlines()
    header_at = next(i for i, line in enumerate(lines) if re.match(r"^[A-Z]+(\s{2,}|$)", line))
    headers = re.split(r"\s{2,}", lines[header_at].strip())
    rows = []
    for line in lines[header_at + 1 :]:
        if not line.strip():
            break
        cells = re.split(r"\s{2,}", line.strip())
        assert len(cells) == len(headers), f"row {line!r} does not fit headers {headers}"
        rows.append(dict(zip(headers, cells, strict=True)))
    return rows


# ------------------------------------------------------------------------------- instance helpers


def attempts(client: Client, instance_id: int) -> list[TaskInstance]:
    """Every task instance of a run, superseded attempts included, in creation order."""
    return list(client.iter_task_instances(instance_id, include_superseded=True))


def by_task(client: Client, instance_id: int) -> dict[str, list[TaskInstance]]:
    """The attempts of each task, by task name, in attempt order."""
    out: dict[str, list[TaskInstance]] = {}
    for ti in attempts(client, instance_id):
        out.setdefault(ti.task_name, []).append(ti)
    for tis in out.values():
        tis.sort(key=lambda t: t.attempt)
    return out


def wait_for_event(
    client: Client,
    instance_id: int,
    matches: Callable[[InstanceEvent], bool],
    *,
    timeout: float = 30.0,
    after_sequence: int = 0,
) -> InstanceEvent:
    """The first event of the instance's watch stream (history, then live) that ``matches``.

    Raises TimeoutError after ``timeout`` seconds, and AssertionError if the instance reaches a
    terminal state on the stream without such an event.
    """
    deadline = time.monotonic() + timeout
    frames = client.watch_frames(
        instance_id, after_sequence=after_sequence, keep_open=True, deadline=deadline
    )
    try:
        for frame in frames:
            for event in frame.events:
                if matches(event):
                    return event
            if not frame.events and frame.state is not None and frame.state.terminal:
                raise AssertionError(f"instance {instance_id} ended {frame.state} first")
    finally:
        frames.close()
    raise AssertionError(f"the watch of instance {instance_id} ended without a matching event")


def wait_for_task(
    client: Client, instance_id: int, task: str, state: TaskState, *, timeout: float = 30.0
) -> InstanceEvent:
    """The first event that puts ``task`` in ``state``."""
    return wait_for_event(
        client,
        instance_id,
        lambda e: e.task_name == task and e.task_state is state,
        timeout=timeout,
    )


def assert_ran(ti: TaskInstance) -> None:
    """An attempt that ran to success on a worker has its run on record: where, which process,
    when, and how it ended."""
    assert ti.state is TaskState.SUCCEEDED, ti
    assert ti.host and ti.pid > 0, ti
    assert ti.start_time is not None and ti.end_time is not None, ti
    assert ti.submit_time is not None and ti.submit_time <= ti.start_time <= ti.end_time, ti
    assert ti.exit_code == 0, ti


def events_of(client: Client, instance_id: int) -> list[InstanceEvent]:
    """The whole event history of an instance that is terminal now."""
    return list(client.watch_instance(instance_id))


def wait_done(client: Client, instance_id: int, timeout: float = 60.0) -> WorkflowInstance:
    return client.wait(instance_id, timeout=timeout)


# -------------------------------------------------------------------- files, processes and ledgers


def eventually(
    check: Callable[[], _T | None], *, timeout: float = 10.0, interval: float = 0.05, what: str = ""
) -> _T:
    """Polls ``check`` until it returns something other than None/False (bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value is not None and value is not False:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {timeout}s: {what or check}")
        time.sleep(interval)


def process_state(pid: int) -> str | None:
    """The state letter of a live process (``R``, ``S``, ...), or None when it is gone.

    A zombie (``Z``) counts as gone: it has exited and only waits for its parent (here init, which
    reaps at its own pace) to collect its status; ``kill(pid, 0)`` would still succeed on it.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    state = stat.rsplit(")", 1)[1].split()[0]
    return None if state in ("Z", "X") else state


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return process_state(pid) is not None


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of process group ``pgid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def assert_all_gone(pids: Iterable[int], *, timeout: float = 10.0, pgid: int | None = None) -> None:
    """Waits (bounded) until every pid, and every member of ``pgid``, has exited."""

    def leftovers() -> list[int]:
        left = [p for p in pids if alive(p)]
        if pgid is not None:
            left += group_members(pgid)
        return sorted(set(left))

    try:
        eventually(lambda: not leftovers(), timeout=timeout, what="processes to exit")
    except AssertionError:
        raise AssertionError(f"still running after {timeout}s: {leftovers()}") from None


def read_pids(path: Path, *, count: int, timeout: float = 10.0) -> list[int]:
    """The pids a task wrote to ``path`` (it renames a complete file into place)."""
    eventually(path.exists, timeout=timeout, what=f"{path} to appear")
    pids = [int(p) for p in path.read_text().split()]
    assert len(pids) == count, pids
    return pids


def wait_for_file_sh(path: Path, seconds: int = 60) -> str:
    """Shell lines that wait (bounded) for ``path`` to exist, and fail if it never does: lets a
    test sequence a task against its own steps without assuming how long anything takes."""
    loops = seconds * 20
    return f"for _ in $(seq {loops}); do [ -e {path} ] && break; sleep 0.05; done\n[ -e {path} ]\n"


SPAWNER = """
sleep 1000 & echo $! >> {pids}.tmp
sleep 1000 & echo $! >> {pids}.tmp
( sleep 1000; echo never ) & echo $! >> {pids}.tmp
echo $$ >> {pids}.tmp
mv {pids}.tmp {pids}
echo "children started"
sleep 1000
"""


def spawner(pids: Path) -> str:
    """A script that starts two background sleeps and a sleeping subshell, writes their pids and
    its own (the process group leader, last) to ``pids``, then sleeps."""
    return SPAWNER.format(pids=pids)


@dataclass(frozen=True)
class LedgerEntry:
    task: str
    key: str
    attempt: int


class Ledger:
    """An append-only file tasks write one line to per run: ``task key attempt``.

    Lines are short and appended with O_APPEND, so concurrent writers never interleave them.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, task: str | None = None) -> str:
        """The shell line that records the running attempt."""
        name = task if task is not None else "$DSCHED_TASK_NAME"
        return f'echo "{name} $DSCHED_IDEMPOTENCY_KEY $DSCHED_ATTEMPT" >> {self.path}'

    def entries(self) -> list[LedgerEntry]:
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text().splitlines():
            task, key, attempt = line.split()
            out.append(LedgerEntry(task, key, int(attempt)))
        return out

    def counts(self) -> Counter[str]:
        return Counter(e.task for e in self.entries())
