#!/usr/bin/env python3
"""A dsched cluster on this machine, on loopback only: ZooKeeper, PostgreSQL, 2 masters, 3 workers.

Run it as ``deploy/local-cluster/up``, ``down`` or ``status`` (links to this file; the name says
what to do). Only the standard library is used, so any Python 3.11+ runs it; the servers are the
``dsched`` next to the repository's ``.venv`` (or ``$DSCHED_BIN``).

``up`` starts ZooKeeper from the Debian package (``/usr/share/java/zookeeper.jar``) with a private
dataDir, makes sure PostgreSQL runs (starting the system service if it is down) and that the
database exists, starts the masters and then the workers, each with its own data directory and
log file, waits for every ready line and prints how to connect. Everything lives in the run
directory, with each process's pid in ``pids/``. ``down`` sends SIGTERM to the workers, then the
masters, then ZooKeeper, waiting (bounded) for each. ``status`` shows what runs.

Environment (defaults in brackets):

* ``DSCHED_CLUSTER_DIR``: run directory [/tmp/dsched-local-cluster]
* ``DSCHED_CLUSTER_ZK_PORT``: ZooKeeper's client port [2181 if free, else any free port]
* ``DSCHED_CLUSTER_MASTER_PORTS``: one ``CLIENT:CLUSTER`` pair per master, the ports of its client
  listener and of its cluster listener (where workers report); a bare ``CLIENT`` gives the cluster
  listener any free port [5678:5679 5680:5681]
* ``DSCHED_CLUSTER_WORKER_PORTS``: one port per worker [1234 1235 1236]
* ``DSCHED_CLUSTER_DB_URL``: the metadata database
  [postgresql://postgres@127.0.0.1:5432/dsched_local]; created if missing
* ``DSCHED_BIN``: the ``dsched`` executable [<repo>/.venv/bin/dsched, else the one on PATH]
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
ZOOKEEPER_JARS = ("/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-simple.jar")
ZOOKEEPER_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
CHROOT = "/dsched"
READY_TIMEOUT_S = 60.0
# Servers stop within their shutdown_timeout (30 s by default) whatever does not answer.
STOP_TIMEOUT_S = 45.0
POLL_S = 0.1


class Failure(Exception):
    """Something the operator must fix; the message says what."""


def env(name: str, default: str) -> str:
    return os.environ.get(name, "").strip() or default


def run_dir() -> Path:
    return Path(env("DSCHED_CLUSTER_DIR", "/tmp/dsched-local-cluster")).absolute()


def dsched_bin() -> str:
    if os.environ.get("DSCHED_BIN"):
        return os.environ["DSCHED_BIN"]
    local = REPO / ".venv" / "bin" / "dsched"
    found = str(local) if local.exists() else shutil.which("dsched")
    if not found:
        raise Failure("no dsched executable: run `make setup` or set DSCHED_BIN")
    return found


def port_free(port: int) -> bool:
    """True if a server could listen on ``port`` now.

    Binds the way the servers do (ZooKeeper and gRPC set SO_REUSEADDR): a port whose last
    connections linger in TIME_WAIT, as the server's side of every connection it closed does for a
    minute after ``down``, is free for them; only a listener makes it taken. A bind without
    SO_REUSEADDR would call it taken, and ``up`` right after ``down`` would fail.
    """
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def any_free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ---------------------------------------------------------------------------------- processes


def pid_file(name: str) -> Path:
    return run_dir() / "pids" / f"{name}.pid"


def recorded() -> dict[str, int]:
    """The processes ``up`` started, by name, in start order (ZooKeeper first)."""
    files = sorted((run_dir() / "pids").glob("*.pid"), key=lambda p: p.stat().st_mtime_ns)
    return {p.stem: int(p.read_text()) for p in files}


def alive(pid: int, name: str) -> bool:
    """True if ``pid`` runs and is still the process we started (pids get reused)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    marker = ZOOKEEPER_MAIN if name == "zookeeper" else f" {name.split('-')[0]} "
    return state not in ("Z", "X") and marker in cmdline


# The processes this invocation started. While it waits for them it asks them, not /proc: a child
# that has not exec'd yet still shows this script's command line there, which ``alive`` would take
# for an exited server.
_STARTED: dict[str, subprocess.Popen[bytes]] = {}


def spawn(name: str, argv: list[str], log: Path) -> int:
    """Starts a detached process (its own session: a Ctrl-C in this terminal does not reach it)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        proc = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=log.parent,
            start_new_session=True,
        )
    _STARTED[name] = proc
    pid_file(name).parent.mkdir(parents=True, exist_ok=True)
    pid_file(name).write_text(f"{proc.pid}\n")
    return proc.pid


def wait_until(
    check: Callable[[], object], what: str, timeout: float, log: Path | None = None
) -> str:
    """Polls ``check()`` until it returns something true (bounded); raises Failure with the tail
    of ``log`` if it does not."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return str(result)
        time.sleep(POLL_S)
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:]) if log else ""
    raise Failure(
        f"{what} not within {timeout:g} s" + (f"; the end of {log}:\n{tail}" if log else "")
    )


def terminate(procs: dict[str, int], timeout: float) -> None:
    """SIGTERM to all of ``procs`` at once, then waits (bounded) for them; SIGKILL for the rest."""
    for name, pid in procs.items():
        if alive(pid, name):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while any(alive(pid, name) for name, pid in procs.items()) and time.monotonic() < deadline:
        time.sleep(POLL_S)
    for name, pid in procs.items():
        if alive(pid, name):
            print(f"{name} (pid {pid}) ignored SIGTERM for {timeout:g} s: killing it")
            os.kill(pid, signal.SIGKILL)
        pid_file(name).unlink(missing_ok=True)


# ---------------------------------------------------------------------------------- ZooKeeper


def zookeeper_port() -> int:
    if os.environ.get("DSCHED_CLUSTER_ZK_PORT"):
        return int(os.environ["DSCHED_CLUSTER_ZK_PORT"])
    return 2181 if port_free(2181) else any_free_port()


def ruok(port: int) -> str:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"ruok")
            return sock.recv(16).decode(errors="replace")
    except OSError:
        return ""


def start_zookeeper() -> int:
    port = zookeeper_port()
    if not port_free(port):
        raise Failure(f"port {port} is taken: set DSCHED_CLUSTER_ZK_PORT to a free port")
    missing = [jar for jar in ZOOKEEPER_JARS[:1] if not Path(jar).exists()]
    if missing or not shutil.which("java"):
        raise Failure("ZooKeeper is not installed: apt-get install zookeeper")
    home = run_dir() / "zookeeper"
    (home / "data").mkdir(parents=True, exist_ok=True)
    config = home / "zoo.cfg"
    config.write_text(
        f"tickTime=1000\ndataDir={home / 'data'}\nclientPort={port}\n"
        "clientPortAddress=127.0.0.1\nadmin.enableServer=false\n"
        "4lw.commands.whitelist=ruok,srvr,stat,mntr,cons\nmaxClientCnxns=0\n"
    )
    classpath = ":".join(jar for jar in ZOOKEEPER_JARS if Path(jar).exists())
    argv = ["java", "-Xmx256m", "-Djava.net.preferIPv4Stack=true", "-cp", classpath]
    log = home / "zookeeper.log"
    spawn("zookeeper", [*argv, ZOOKEEPER_MAIN, str(config)], log)
    (run_dir() / "zookeeper.port").write_text(f"{port}\n")
    wait_until(lambda: ruok(port) == "imok", f"ZooKeeper on port {port}", 30, log)
    print(f"zookeeper    127.0.0.1:{port}  (data and log in {home})")
    return port


# --------------------------------------------------------------------------------- PostgreSQL


def psql(admin_url: str, sql: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["psql", admin_url, "-v", "ON_ERROR_STOP=1", "-tAc", sql],
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )


def ensure_database(url: str) -> None:
    """Starts the local PostgreSQL service if it is down and creates the database if missing."""
    if shutil.which("psql") is None:
        raise Failure("psql not found: apt-get install postgresql")
    parts = urlsplit(re.sub(r"^postgres(ql)?(\+\w+)?://", "postgresql://", url))
    name = parts.path.lstrip("/")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise Failure(f"database name {name!r}: use letters, digits and underscores")
    host, port = parts.hostname or "127.0.0.1", str(parts.port or 5432)
    admin = parts._replace(path="/postgres").geturl()
    if subprocess.run(["pg_isready", "-q", "-h", host, "-p", port], timeout=30).returncode != 0:
        if host not in ("127.0.0.1", "localhost"):
            raise Failure(f"PostgreSQL at {host}:{port} does not answer")
        print("postgresql   is down: starting the system service")
        start_postgresql()
        wait_until(
            lambda: subprocess.run(["pg_isready", "-q", "-h", host, "-p", port]).returncode == 0,
            f"PostgreSQL on {host}:{port}",
            60,
        )
    found = psql(admin, f"SELECT 1 FROM pg_database WHERE datname = '{name}'")
    if found.returncode != 0:
        raise Failure(f"cannot query PostgreSQL at {host}:{port}: {found.stderr.strip()}")
    if found.stdout.strip() != "1":
        created = psql(admin, f"CREATE DATABASE {name}")
        if created.returncode != 0:
            raise Failure(f"cannot create database {name}: {created.stderr.strip()}")
    print(f"postgresql   {host}:{port}/{name}")


def start_postgresql() -> None:
    versions = sorted(p.name for p in Path("/usr/lib/postgresql").glob("*") if p.name.isdigit())
    commands = [["pg_ctlcluster", v, "main", "start"] for v in reversed(versions)]
    commands.append(["service", "postgresql", "start"])
    for command in commands:
        if shutil.which(command[0]):
            result = subprocess.run(command, capture_output=True, text=True, timeout=60)
            if result.returncode == 0:
                return
    raise Failure("PostgreSQL is down and could not be started (try: service postgresql start)")


# ------------------------------------------------------------------------------------ servers


def ports(name: str, default: str) -> list[int]:
    return [int(p) for p in env(name, default).replace(",", " ").split()]


def master_ports() -> dict[int, int]:
    """Client port -> cluster port (0: any free port) of each master."""
    pairs = env("DSCHED_CLUSTER_MASTER_PORTS", "5678:5679 5680:5681").replace(",", " ").split()
    out = {}
    for pair in pairs:
        client, _, cluster = pair.partition(":")
        out[int(client)] = int(cluster or 0)
    return out


def start_servers(role: str, args_of: dict[int, list[str]]) -> list[str]:
    """Starts one ``dsched ROLE`` per port, then waits for each ready line; returns them."""
    logs: dict[int, tuple[Path, int]] = {}
    for port, args in args_of.items():
        taken = [p for p in (port, *cluster_port_of(args)) if p and not port_free(p)]
        if taken:
            variable = f"DSCHED_CLUSTER_{role.upper()}_PORTS"
            raise Failure(f"port {taken[0]} for a {role} is taken: set {variable}")
        data = run_dir() / f"{role}-{port}"
        argv = [dsched_bin(), role, "--host", "127.0.0.1", "--port", str(port), "--data-dir"]
        log = data / "dsched.log"
        # The log is appended to: only what this run writes counts (not an earlier ready line).
        logs[port] = log, log.stat().st_size if log.exists() else 0
        spawn(f"{role}-{port}", [*argv, str(data), *args], log)
    lines = []
    for port, (log, start) in logs.items():
        proc = _STARTED[f"{role}-{port}"]

        def ready(
            log: Path = log,
            start: int = start,
            proc: subprocess.Popen[bytes] = proc,
            port: int = port,
        ) -> str:
            with log.open("rb") as f:
                f.seek(start)
                text = f.read().decode(errors="replace")
            line = next(
                (ln for ln in text.splitlines() if ln.startswith(f"dsched {role} is up")), ""
            )
            if not line and proc.poll() is not None:
                raise Failure(f"{role} on port {port} exited; the end of {log}:\n{text[-3000:]}")
            return line

        lines.append(wait_until(ready, f"{role} on port {port}", READY_TIMEOUT_S, log))
        print(f"{role}-{port:<6} {lines[-1]}")
    return lines


def cluster_port_of(args: list[str]) -> list[int]:
    return [int(args[i + 1]) for i, a in enumerate(args[:-1]) if a == "--cluster-port"]


def up() -> None:
    if any(alive(pid, name) for name, pid in recorded().items()):
        raise Failure(f"a local cluster already runs from {run_dir()}: run down first")
    run_dir().mkdir(parents=True, exist_ok=True)
    db = env("DSCHED_CLUSTER_DB_URL", "postgresql://postgres@127.0.0.1:5432/dsched_local")
    masters = master_ports()
    workers = ports("DSCHED_CLUSTER_WORKER_PORTS", "1234 1235 1236")
    try:
        ensure_database(db)
        registry = f"127.0.0.1:{start_zookeeper()}{CHROOT}"
        common = ["--registry", registry, "--db", db]
        start_servers(
            "master", {p: [*common, "--cluster-port", str(c)] for p, c in masters.items()}
        )
        start_servers("worker", {p: ["--registry", registry] for p in workers})
    except BaseException:
        print("start-up failed: stopping what was started", file=sys.stderr)
        down(quiet=True)
        raise
    cli = f"{dsched_bin()} --server 127.0.0.1:{next(iter(masters))}"
    example = REPO / "clients" / "python" / "examples" / "etl_pipeline.py"
    print(
        f"\nThe local cluster is up ({run_dir()}). Try:\n"
        f"  {cli} cluster\n"
        f"  {cli} submit {example}\n"
        f"  {cli} --project examples run etl_pipeline --wait --logs\n"
        f"Logs: {run_dir()}/<role>-<port>/dsched.log. Stop it: {HERE}/down"
    )


def down(quiet: bool = False) -> None:
    procs = recorded()
    if not procs and not quiet:
        print(f"nothing runs from {run_dir()}")
    # Workers first (their tasks report to the masters), then masters, then ZooKeeper.
    for role in ("worker", "master", "zookeeper"):
        group = {name: pid for name, pid in procs.items() if name.split("-")[0] == role}
        terminate(group, STOP_TIMEOUT_S if role != "zookeeper" else 15.0)
        for name, pid in group.items():
            if not quiet:
                print(f"{name:<12} stopped (pid {pid})")


def status() -> int:
    procs = recorded()
    if not procs:
        print(f"nothing runs from {run_dir()}")
        return 1
    running = 0
    for name, pid in procs.items():
        up_now = alive(pid, name)
        running += up_now
        where = ""
        if name == "zookeeper" and (run_dir() / "zookeeper.port").exists():
            where = f"127.0.0.1:{(run_dir() / 'zookeeper.port').read_text().strip()}"
        line = f"{name:<12} pid {pid:<8} {'running' if up_now else 'NOT RUNNING':<12} {where}"
        print(line.rstrip())
    masters = [n for n, pid in procs.items() if n.startswith("master-") and alive(pid, n)]
    if masters:
        target = f"127.0.0.1:{masters[0].split('-')[1]}"
        print()
        subprocess.run([dsched_bin(), "--server", target, "cluster"], timeout=60, check=False)
    return 0 if running == len(procs) else 1


def main() -> int:
    command = Path(sys.argv[0]).name
    if command not in ("up", "down", "status"):
        command = sys.argv[1] if len(sys.argv) > 1 else ""
    try:
        if command == "up":
            up()
        elif command == "down":
            down()
        elif command == "status":
            return status()
        else:
            print("usage: deploy/local-cluster/{up,down,status}", file=sys.stderr)
            return 2
    except Failure as failure:
        print(f"error: {failure}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
