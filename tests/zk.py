"""A real ZooKeeper server for tests: one JVM in its own process group, on 127.0.0.1 only.

:class:`ZooKeeperServer` runs Debian's ZooKeeper (``/usr/share/java/zookeeper.jar``, whose manifest
names its dependencies) in standalone mode with a generated ``zoo.cfg`` under ``run_dir``: dataDir
``run_dir/data``, admin server off, the four-letter words ``ruok,stat,srvr,mntr,cons`` allowed, and
the server's log in ``run_dir/zookeeper.log``. ``start`` returns once the server answers ``ruok``
and ``srvr`` reports it serving.

The fault hooks play what a cluster meets: ``kill`` (SIGKILL; ``restart`` then brings the same port
and dataDir back, so sessions within their timeout survive), ``pause``/``resume`` (SIGSTOP/SIGCONT:
the clients' sessions expire if the pause outlasts them) and ``expire_session`` (ends one client's
session the way ZooKeeper does after its timeout).

A JVM must never outlive the tests: ``close`` kills the process group, an ``atexit`` hook does the
same for every server still running when the interpreter exits, and the lifeline
(:mod:`tests.lifeline`) when pytest is killed.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from tests import lifeline
from tests.conftest import free_port

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
# ZooKeeper logs through slf4j; without a binding it would log nothing, so its log would be empty
# when a test needs it most.
SLF4J_BINDING = Path("/usr/share/java/slf4j-simple.jar")
# zookeeper.jar's manifest names the Netty jars it always needs; the server layer also needs these.
NETTY = (Path("/usr/share/java/netty-codec.jar"), Path("/usr/share/java/netty-resolver.jar"))
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
JVM_FLAGS = (
    "-Xmx256m",
    # A small heap and a short-lived test server: the serial collector and the C1 compiler start
    # fastest and use the fewest threads on a 2-core box.
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Djava.net.preferIPv4Stack=true",
    "-Dzookeeper.admin.enableServer=false",
    # ZooKeeper 3.8.0's NIO connection layer accepts clients before the server is up and, closing
    # them, dies on a NullPointerException before the socket is closed: a client that reconnects
    # in that instant of a restart hangs for its whole connect timeout and loses its session.
    # The Netty layer closes the channel first.
    "-Dzookeeper.serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
    "-Dorg.slf4j.simpleLogger.showDateTime=true",
    "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
)
FOUR_LETTER_WORDS = "ruok,stat,srvr,mntr,cons"
_POLL_S = 0.05  # test tooling: a short sleep between readiness probes is fine

_running: set[ZooKeeperServer] = set()


def four_letter_word(port: int, word: str, timeout: float = 2.0) -> str:
    """Sends a four-letter command (``ruok``, ``srvr``, ``cons``...) and returns the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(word.encode("ascii"))
        chunks: list[bytes] = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


class ZooKeeperServer:
    """One standalone ZooKeeper server. Not thread-safe; use from the test's thread.

    ``port`` is fixed at construction (a free one if not given) and kept across ``restart``, as is
    the dataDir, so a restarted server restores its sessions. With ``tick_ms`` 1000 clients may
    negotiate session timeouts of 2 to 20 seconds.
    """

    def __init__(self, run_dir: Path, port: int | None = None, tick_ms: int = 1000) -> None:
        self.run_dir = run_dir
        self.port: int = port if port is not None else free_port()
        self.connect_string: str = f"127.0.0.1:{self.port}"
        self.tick_ms = tick_ms
        self.data_dir = run_dir / "data"
        self.config_path = run_dir / "zoo.cfg"
        self.log_path = run_dir / "zookeeper.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._paused = False

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self, timeout: float = 30.0) -> None:
        """Starts the JVM and returns once it answers ``ruok`` with ``imok`` and serves clients.

        Raises RuntimeError (with the tail of the server's log) if it exits or does not answer
        within ``timeout`` seconds; the process is killed in that case."""
        if self.running:
            raise RuntimeError(f"ZooKeeper on port {self.port} is already running")
        self._reap()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._write_config()
        jars = (ZOOKEEPER_JAR, *NETTY, SLF4J_BINDING)
        classpath = os.pathsep.join(str(p) for p in jars if p.exists())
        java = os.environ.get("JAVA", "java")
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - owned until the process is reaped
        self._proc = subprocess.Popen(
            [java, *JVM_FLAGS, "-cp", classpath, MAIN_CLASS, str(self.config_path)],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=self.run_dir,
            start_new_session=True,  # its own process group, so kill/pause reach the whole JVM
        )
        lifeline.guard(self._proc)
        self._paused = False
        _running.add(self)
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.kill()
            raise

    def stop(self) -> None:
        """SIGTERM, then waits for the exit (SIGKILL after 10 s). No-op if not running."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._signal(signal.SIGCONT)  # a stopped JVM cannot act on SIGTERM
            self._signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self._proc.wait(timeout=10)
        self._reap()

    def kill(self) -> None:
        """SIGKILLs the process group at once (a crash: nothing is shut down cleanly)."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._signal(signal.SIGKILL)
            self._proc.wait(timeout=10)
        self._reap()

    def restart(self, timeout: float = 30.0) -> None:
        """Starts the server again on the same port and dataDir (stopping it first if it runs)."""
        self.stop()
        self.start(timeout)

    def pause(self) -> None:
        """SIGSTOPs the server: connections stay open but nothing answers."""
        self._require_running()
        self._signal(signal.SIGSTOP)
        self._paused = True

    def resume(self) -> None:
        """SIGCONTs a paused server."""
        self._require_running()
        self._signal(signal.SIGCONT)
        self._paused = False

    def close(self) -> None:
        """Kills the server if it still runs and releases everything; idempotent."""
        self.kill()

    def __enter__(self) -> ZooKeeperServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- helpers for tests ---------------------------------------------------------------------

    def expire_session(self, client: Any, timeout: float = 10.0) -> None:
        """Ends a client's session the way ZooKeeper does after its timeout: its ephemeral nodes
        and locks go, other clients' watches fire, and the client learns it on its next contact
        (LOST). ``client`` is anything with a ``client_id`` of ``(session_id, password)`` (a
        KazooClient, a ZooKeeperRegistry) or that pair itself.

        It opens a second connection with the same session id and password and closes it: closing
        a session ends it for every connection that used it."""
        from kazoo.client import KazooClient  # tests that never expire sessions need not load it

        client_id = client if isinstance(client, tuple) else client.client_id
        if client_id is None:
            raise RuntimeError("the client has no session to expire")
        twin = KazooClient(hosts=self.connect_string, client_id=client_id, timeout=timeout)
        try:
            twin.start(timeout=timeout)
        finally:
            twin.stop()
            twin.close()

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    # -- internals -----------------------------------------------------------------------------

    def _write_config(self) -> None:
        self.config_path.write_text(
            "\n".join(
                [
                    f"tickTime={self.tick_ms}",
                    f"dataDir={self.data_dir}",
                    f"clientPort={self.port}",
                    "clientPortAddress=127.0.0.1",
                    "admin.enableServer=false",
                    f"4lw.commands.whitelist={FOUR_LETTER_WORDS}",
                    # Cluster tests open many clients from one address (the default allows 60).
                    "maxClientCnxns=0",
                    # The data is thrown away; a SIGKILL keeps the page cache, so no fsync needed.
                    "forceSync=no",
                    "",
                ]
            ),
            encoding="utf-8",
        )

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise RuntimeError(
                    f"ZooKeeper exited with {self._proc.returncode} while starting:\n"
                    + self.log_tail()
                )
            try:
                # ruok is answered as soon as the port listens; srvr shows a mode only once the
                # server serves sessions (before that it drops connecting clients).
                if four_letter_word(self.port, "ruok", timeout=1.0) == "imok" and (
                    "Mode:" in four_letter_word(self.port, "srvr", timeout=1.0)
                ):
                    return
            except OSError as exc:
                last = exc
            time.sleep(_POLL_S)
        raise RuntimeError(
            f"ZooKeeper on port {self.port} did not answer ruok within {timeout} s "
            f"(last error: {last!r}):\n{self.log_tail()}"
        )

    def _signal(self, sig: signal.Signals) -> None:
        assert self._proc is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, sig)

    def _require_running(self) -> None:
        if not self.running:
            raise RuntimeError(f"ZooKeeper on port {self.port} is not running")

    def _reap(self) -> None:
        """Forgets an exited process and closes the log file it wrote to."""
        if self._proc is not None and self._proc.poll() is not None:
            # Never signal a reaped process's group again: its id may belong to another by now.
            self._proc = None
            _running.discard(self)
        if self._proc is None and self._log is not None:
            self._log.close()
            self._log = None


@atexit.register
def _kill_leftovers() -> None:
    # Safety net for a test run that dies without closing its servers (an error in a fixture,
    # a KeyboardInterrupt): never leave a JVM behind.
    for server in list(_running):
        with contextlib.suppress(Exception):
            server.kill()
