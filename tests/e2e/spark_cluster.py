"""A real Spark standalone cluster for tests: one master and one worker started from the installed
pyspark package (``spark-class org.apache.spark.deploy.master.Master`` / ``...worker.Worker``) on
127.0.0.1, free ports, ``SPARK_LOCAL_IP=127.0.0.1``; torn down (process groups killed) after.

The master's web UI answers ``/json/`` with its active and completed applications: what the tests
count applications by, from Spark's own point of view.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsched_worker.tasks.spark import installed_spark_home
from tests import lifeline
from tests.conftest import free_port
from tests.e2e.conftest import clean_env

UP_TIMEOUT_S = 180.0


@dataclass
class SparkCluster:
    master_url: str
    web_url: str
    procs: list[subprocess.Popen[bytes]]
    logs: list[Path]

    def state(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.web_url}/json/", timeout=10) as answer:
            doc: dict[str, Any] = json.load(answer)
        return doc

    def apps(self, name: str) -> tuple[list[str], list[str]]:
        """The ids of the active and of the completed applications called ``name``."""
        doc = self.state()
        return (
            [a["id"] for a in doc["activeapps"] if a["name"] == name],
            [a["id"] for a in doc["completedapps"] if a["name"] == name],
        )

    def output(self) -> str:
        return "\n".join(p.read_text(errors="replace")[-3000:] for p in self.logs)


def _start(argv: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    lifeline.guard(proc)
    return proc


def _stop(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)


def spark_cluster(tmp: Path) -> Iterator[SparkCluster]:
    """Starts the cluster, yields it once its worker registered, kills it afterwards."""
    home = installed_spark_home()
    assert home is not None, "pyspark is not installed (pip install -e '.[dev]')"
    spark_class = str(home / "bin" / "spark-class")
    env = clean_env(SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=str(tmp))
    props = tmp / "spark.properties"
    # No REST submission server: it would take port 6066, shared by every cluster on the host.
    props.write_text("spark.master.rest.enabled false\nspark.worker.cleanup.enabled false\n")
    port, web = free_port(), free_port()
    master_url, web_url = f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{web}"
    logs = [tmp / "master.log", tmp / "worker.log"]
    master = _start(
        [
            *(spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1"),
            *("--port", str(port), "--webui-port", str(web), "--properties-file", str(props)),
        ],
        logs[0],
        env,
    )
    procs = [master]
    cluster = SparkCluster(master_url, web_url, procs, logs)
    try:
        _wait(cluster, workers=0)
        worker = _start(
            [
                *(spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1"),
                *("--port", str(free_port()), "--webui-port", str(free_port())),
                *("--cores", "2", "--memory", "1g", "--work-dir", str(tmp / "work")),
                *("--properties-file", str(props), master_url),
            ],
            logs[1],
            env,
        )
        procs.append(worker)
        _wait(cluster, workers=1)
        yield cluster
    finally:
        for proc in reversed(procs):
            _stop(proc)


def _wait(cluster: SparkCluster, *, workers: int) -> None:
    deadline = time.monotonic() + UP_TIMEOUT_S
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in cluster.procs):
            raise AssertionError(f"a Spark daemon exited:\n{cluster.output()}")
        with contextlib.suppress(OSError, ValueError):
            doc = cluster.state()
            if doc.get("status") == "ALIVE" and doc.get("aliveworkers", 0) >= workers:
                return
        time.sleep(0.5)  # no event to wait on: a JVM daemon coming up answers HTTP or not
    raise AssertionError(f"Spark standalone not up within {UP_TIMEOUT_S}s:\n{cluster.output()}")
