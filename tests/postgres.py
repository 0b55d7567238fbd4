"""A private PostgreSQL server for tests that stop and start the database for real.

The machine's shared PostgreSQL must never be stopped (other tests use it), so an outage test runs
its own: :class:`PostgresServer` runs ``initdb`` into a directory of the test's, then the
``postgres`` binary of the newest installed version (``/usr/lib/postgresql/<v>/bin``) on a free
port on 127.0.0.1, in its own process group, with trust authentication for user ``postgres``.

``stop`` is what ``systemctl stop postgresql`` does (a *fast* shutdown: open sessions are ended
with "terminating connection due to administrator command", new ones are refused); ``start`` brings
the same data directory back on the same port. ``kill`` is a crash (SIGKILL of the group).

PostgreSQL refuses to run as root: as root the server runs as the ``postgres`` system user, with its
data in a directory of that user's under the system's temporary directory (pytest's own are private
to root), removed by ``close``.

A server must never outlive the tests: ``close`` kills it, an ``atexit`` hook does the same for
every server still running when the interpreter exits, and the lifeline (:mod:`tests.lifeline`)
when pytest is killed.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from tests import lifeline
from tests.conftest import free_port

_POLL_S = 0.05  # test tooling: a short sleep between readiness probes is fine
_running: set[PostgresServer] = set()


def postgres_bindir() -> Path:
    """The bin directory of the newest installed PostgreSQL (Debian layout, else pg_config)."""
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/postgres"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    if versions:
        return versions[-1].parent
    pg_config = shutil.which("pg_config")
    if pg_config is None:
        raise RuntimeError("PostgreSQL server binaries not found (apt-get install postgresql)")
    return Path(subprocess.check_output([pg_config, "--bindir"], text=True).strip())


class PostgresServer:
    """One private PostgreSQL server. Not thread-safe; use from the test's thread."""

    def __init__(self, run_dir: Path, port: int | None = None) -> None:
        self.run_dir = run_dir
        run_dir.mkdir(parents=True, exist_ok=True)
        self.port: int = port if port is not None else free_port()
        # PostgreSQL refuses root: run as the system user that owns the packaged server.
        self._user = pwd.getpwnam("postgres") if os.getuid() == 0 else None
        self._own_dir: Path | None = None
        home = run_dir
        if self._user is not None:
            home = self._own_dir = Path(tempfile.mkdtemp(prefix="dsched-pg-"))
            os.chown(home, self._user.pw_uid, self._user.pw_gid)
        self.data_dir = home / "data"
        self.socket_dir = home / "socket"
        self.log_path = run_dir / "postgres.log"
        self.bindir = postgres_bindir()
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def url(self, database: str = "postgres", driver: str = "postgresql+asyncpg") -> str:
        return f"{driver}://postgres@127.0.0.1:{self.port}/{database}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _as_user(self) -> dict[str, Any]:
        if self._user is None:
            return {}
        return {"user": self._user.pw_uid, "group": self._user.pw_gid, "extra_groups": []}

    def init(self) -> None:
        """Creates the cluster (initdb); fsync off: the data is thrown away after the test."""
        self.socket_dir.mkdir(exist_ok=True)
        if self._user is not None:
            os.chown(self.socket_dir, self._user.pw_uid, self._user.pw_gid)
        done = subprocess.run(
            [
                str(self.bindir / "initdb"),
                "-D",
                str(self.data_dir),
                "-U",
                "postgres",
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C",
            ],
            check=False,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd=self.data_dir.parent,
            **self._as_user(),
        )
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed: {done.stderr.decode(errors='replace')}")

    def start(self, timeout: float = 30.0) -> None:
        """Starts the server on its port and returns once it accepts connections."""
        if self.running:
            raise RuntimeError(f"PostgreSQL on port {self.port} is already running")
        self._reap()
        if not (self.data_dir / "PG_VERSION").exists():
            self.init()
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - owned until the process is reaped
        self._proc = subprocess.Popen(
            [
                str(self.bindir / "postgres"),
                "-D",
                str(self.data_dir),
                "-p",
                str(self.port),
                "-k",
                str(self.socket_dir),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "fsync=off",
                "-c",
                "max_connections=200",
            ],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=self.data_dir.parent,
            start_new_session=True,  # its own group: kill reaches every backend
            **self._as_user(),
        )
        lifeline.guard(self._proc)  # with its backends, should pytest die
        _running.add(self)
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.kill()
            raise

    def stop(self, timeout: float = 30.0) -> None:
        """A fast shutdown (SIGINT to the postmaster), as a service stop does; waits for it."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.send_signal(signal.SIGINT)
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self._reap()

    def kill(self) -> None:
        """SIGKILLs the process group (a crash)."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait(10)
        self._reap()

    def close(self) -> None:
        """Kills the server if it runs and removes a data directory of its own; idempotent."""
        self.kill()
        if self._own_dir is not None:
            shutil.rmtree(self._own_dir, ignore_errors=True)
            self._own_dir = None

    def __enter__(self) -> PostgresServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def psql(self, sql: str, database: str = "postgres") -> str:
        """Runs ``sql`` with psql over TCP and returns its unaligned output."""
        return subprocess.run(
            [
                str(self.bindir / "psql"),
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                "postgres",
                "-d",
                database,
                "-qAtX",
                "-v",
                "ON_ERROR_STOP=1",
                "-c",
                sql,
            ],
            check=True,
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        isready = str(self.bindir / "pg_isready")
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise RuntimeError(
                    f"PostgreSQL exited with {self._proc.returncode} while starting:\n"
                    + self.log_tail()
                )
            probe = [isready, "-q", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres"]
            if subprocess.run(probe, check=False).returncode == 0:
                return
            time.sleep(_POLL_S)
        raise RuntimeError(
            f"PostgreSQL on port {self.port} not ready within {timeout} s:\n{self.log_tail()}"
        )

    def _reap(self) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            self._proc = None  # never signal a reaped pid's group again
            _running.discard(self)
        if self._proc is None and self._log is not None:
            self._log.close()
            self._log = None


@atexit.register
def _kill_leftovers() -> None:
    for server in list(_running):
        with contextlib.suppress(Exception):
            server.kill()
