"""Settings: defaults per role, precedence of the sources, normalisation, and every validation."""

from __future__ import annotations

import dataclasses
import io
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsched.errors import InvalidArgument
from dsched_server.config import (
    Role,
    Settings,
    build_arg_parser,
    configure_logging,
    load_settings,
    normalize_db_url,
)
from dsched_server.heartbeat import Thresholds

HOME = {"HOME": "/home/dev"}


def load(argv: list[str] | None = None, role: Role = "standalone", **env: str) -> Settings:
    return load_settings(argv or [], {**HOME, **env}, role=role)


def violations(
    argv: list[str] | None = None, role: Role = "standalone", **env: str
) -> dict[str, str]:
    with pytest.raises(InvalidArgument) as info:
        load(argv, role, **env)
    return {v.field: v.description for v in info.value.violations}


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_standalone_defaults() -> None:
    s = load()
    assert s.role == "standalone"
    assert s.data_dir == Path("/home/dev/.dsched")
    assert (s.host, s.port, s.worker_port) == ("127.0.0.1", 5678, 0)
    assert s.db_url == "sqlite+aiosqlite:////home/dev/.dsched/dsched.db"
    assert s.registry == "embedded" and s.embedded_registry
    assert (s.worker_group, s.heartbeat_interval, s.failover_delay) == ("default", 5.0, 4.0)
    assert (s.host_selector, s.warmup_seconds, s.outbox_fsync) == ("lower_weight", 600.0, False)
    assert s.worker_slots >= 4
    assert (s.log_level, s.shutdown_timeout) == ("INFO", 30.0)
    assert s.thresholds == Thresholds(cpu=0.9, memory=0.9, disk=0.9)
    assert s.address == "127.0.0.1:5678"


def test_master_and_worker_defaults() -> None:
    master, worker = load(role="master"), load(role="worker")
    assert (master.port, worker.port) == (5678, 1234)
    assert master.registry == worker.registry == "127.0.0.1:2181/dsched"
    assert master.zookeeper == ("127.0.0.1:2181", "/dsched")
    assert (master.registry_session_timeout, master.registry_auth) == (4.0, "")
    assert master.registry_credentials is None
    with pytest.raises(ValueError):
        _ = load().zookeeper


def test_direct_construction_derives_the_sqlite_url(tmp_path: Path) -> None:
    s = Settings(data_dir=tmp_path)
    assert s.db_url == f"sqlite+aiosqlite:///{tmp_path}/dsched.db"
    assert Settings(data_dir=tmp_path, db_url="postgresql+asyncpg://h/db").db_url.endswith("h/db")


def test_precedence_is_defaults_file_environment_flags(tmp_path: Path) -> None:
    config = write(tmp_path / "dsched.toml", 'port = 1111\nhost = "10.0.0.1"\nlog_level = "debug"')
    assert load(["--config", str(config)]).port == 1111
    assert load(["--config", str(config)], DSCHED_PORT="2222").port == 2222
    s = load(["--config", str(config), "--port", "3333"], DSCHED_PORT="2222")
    assert (s.port, s.host, s.log_level) == (3333, "10.0.0.1", "DEBUG")
    assert load(DSCHED_CONFIG=str(config)).port == 1111
    other = write(tmp_path / "other.toml", "port = 4444")
    assert load(["--config", str(other)], DSCHED_CONFIG=str(config)).port == 4444


def test_role_tables_override_the_top_level(tmp_path: Path) -> None:
    config = write(
        tmp_path / "dsched.toml",
        'registry = "zk:2181"\nport = 7000\n[worker]\nport = 7001\nworker_slots = 3\n'
        "[master]\nworker_slots = 99\n",
    )
    worker = load(["--config", str(config)], role="worker")
    master = load(["--config", str(config)], role="master")
    assert (worker.port, worker.worker_slots, worker.registry) == (7001, 3, "zk:2181")
    assert (master.port, master.worker_slots) == (7000, 99)


def test_paths_relative_to_the_file_or_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "etc").mkdir()
    config = write(tmp_path / "etc" / "dsched.toml", 'data_dir = "../state"')
    assert load(["--config", str(config)]).data_dir == tmp_path / "etc" / ".." / "state"
    monkeypatch.chdir(tmp_path)
    assert load(["--data-dir", "here"]).data_dir == tmp_path / "here"
    assert load(DSCHED_DATA_DIR="~/x").data_dir == Path("/home/dev/x")
    s = load(["--data-dir", "/srv/dsched"])
    assert s.db_url == "sqlite+aiosqlite:////srv/dsched/dsched.db"


def test_only_the_given_environment_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSCHED_PORT", "1")
    assert load_settings([], {"HOME": "/h"}, role="master").port == 5678


def test_environment_values_are_parsed() -> None:
    s = load(
        DSCHED_OUTBOX_FSYNC="yes",
        DSCHED_WORKER_SLOTS=" 12 ",
        DSCHED_HEARTBEAT_INTERVAL="0.5",
        DSCHED_FAILOVER_DELAY="0",
        DSCHED_HOST_SELECTOR="Round-Robin",
        DSCHED_LOG_LEVEL="warning",
        DSCHED_CPU_THRESHOLD="1",
        DSCHED_MEMORY_THRESHOLD="0.5",
        DSCHED_DISK_THRESHOLD="0.75",
        DSCHED_WARMUP_SECONDS="60",
        DSCHED_WORKER_GROUP="etl.gpu-1",
    )
    assert s.outbox_fsync is True
    assert (s.worker_slots, s.heartbeat_interval, s.failover_delay) == (12, 0.5, 0.0)
    assert (s.host_selector, s.log_level, s.warmup_seconds) == ("round_robin", "WARNING", 60.0)
    assert s.thresholds == Thresholds(cpu=1.0, memory=0.5, disk=0.75)
    assert s.worker_group == "etl.gpu-1"
    for word, value in (("0", False), ("off", False), ("TRUE", True), ("1", True)):
        assert load(DSCHED_OUTBOX_FSYNC=word).outbox_fsync is value


@pytest.mark.parametrize(
    ("given", "normalised"),
    [
        ("sqlite:///tmp/d.db", "sqlite+aiosqlite:///tmp/d.db"),
        ("sqlite+aiosqlite:////abs/d.db", "sqlite+aiosqlite:////abs/d.db"),
        ("sqlite://", "sqlite+aiosqlite://"),
        ("postgresql://u:p@db:5432/x", "postgresql+asyncpg://u:p@db:5432/x"),
        ("postgres://db/x", "postgresql+asyncpg://db/x"),
        ("postgresql+asyncpg://db/x", "postgresql+asyncpg://db/x"),
        ("mysql://root@db/x", "mysql+aiomysql://root@db/x"),
        ("mariadb://root@db:3306/x", "mysql+aiomysql://root@db:3306/x"),
        ("mysql+aiomysql://db/x", "mysql+aiomysql://db/x"),
    ],
)
def test_database_urls_are_normalised_to_async_drivers(given: str, normalised: str) -> None:
    assert normalize_db_url(given) == normalised
    assert load(["--db", given]).db_url == normalised


def test_shutdown_timeout_from_every_source(tmp_path: Path) -> None:
    config = write(tmp_path / "w.toml", "shutdown_timeout = 12\n[master]\nshutdown_timeout = 8.5")
    assert load(["--config", str(config)], role="worker").shutdown_timeout == 12.0
    assert load(["--config", str(config)], role="master").shutdown_timeout == 8.5
    assert load(role="master", DSCHED_SHUTDOWN_TIMEOUT="5").shutdown_timeout == 5.0
    assert load(["--shutdown-timeout", "3"], DSCHED_SHUTDOWN_TIMEOUT="5").shutdown_timeout == 3.0


def test_registry_session_and_credentials(tmp_path: Path) -> None:
    s = load(role="master", DSCHED_REGISTRY_SESSION_TIMEOUT="30", DSCHED_REGISTRY_AUTH="ds:p:w")
    assert s.registry_session_timeout == 30.0
    assert s.registry_credentials == ("ds", "p:w")  # the user ends at the first colon
    config = write(tmp_path / "m.toml", 'registry_auth = "a:b"\nregistry_session_timeout = 2')
    from_file = load(["--config", str(config)], role="worker")
    assert (from_file.registry_credentials, from_file.registry_session_timeout) == (("a", "b"), 2.0)
    # A secret never goes on a command line, where every user of the host can read it.
    assert "argv" in violations(["--registry-auth", "a:b"], "master")
    assert "--registry-auth" not in build_arg_parser("worker").format_help()


@pytest.mark.parametrize("value", ["s3cret", ":s3cret", "s3cret:", "s3 cret:x", "s3cret\x07:x"])
def test_malformed_registry_auth_is_rejected_without_echoing_it(value: str) -> None:
    found = violations(None, "master", DSCHED_REGISTRY_AUTH=value)
    assert "user:password" in found["DSCHED_REGISTRY_AUTH"]
    assert "s3" not in found["DSCHED_REGISTRY_AUTH"]


def test_passwords_stay_out_of_repr_and_logs() -> None:
    s = load(["--db", "postgresql://app:s3cret@db/x"], DSCHED_REGISTRY_AUTH="dsched:zk-s3cret")
    assert "s3cret" not in repr(s)
    assert s.safe_db_url == "postgresql+asyncpg://app:***@db/x"
    assert load(["--db", "postgresql://app@db/x"]).safe_db_url == "postgresql+asyncpg://app@db/x"


BAD_FLAGS: list[tuple[Role, list[str], str, str]] = [
    ("standalone", ["--port", "70000"], "--port", "at most 65535"),
    ("standalone", ["--port", "-1"], "--port", "at least 0"),
    ("standalone", ["--port", "http"], "--port", "integer"),
    ("standalone", ["--worker-port", "65536"], "--worker-port", "at most 65535"),
    ("standalone", ["--port", "7000", "--worker-port", "7000"], "--worker-port", "differ"),
    ("worker", ["--slots", "0"], "--slots", "at least 1"),
    ("master", ["--shutdown-timeout", "0.5"], "--shutdown-timeout", "at least 1"),
    ("worker", ["--shutdown-timeout", "soon"], "--shutdown-timeout", "a number"),
    ("worker", ["--slots", "1.5"], "--slots", "integer"),
    ("standalone", ["--db", "oracle://db/x"], "--db", "unsupported"),
    ("standalone", ["--db", "just-a-path.db"], "--db", "unsupported"),
    ("standalone", ["--db", "postgresql:///x"], "--db", "needs a host"),
    ("standalone", ["--db", "postgresql://db:port/x"], "--db", "malformed"),
    ("standalone", ["--db", "sqlite://relative.db"], "--db", "sqlite:///"),
    ("worker", ["--group", "bad group"], "--group", "worker group"),
    ("worker", ["--group=-lead"], "--group", "worker group"),
    ("worker", ["--group", "g" * 65], "--group", "worker group"),
    ("worker", ["--registry", "embedded"], "--registry", "dsched standalone"),
    ("master", ["--registry", "embedded"], "--registry", "dsched standalone"),
    ("master", ["--registry", "zk:99999"], "--registry", "host[:port]"),
    ("master", ["--registry", "zk:2181,"], "--registry", "host[:port]"),
    ("master", ["--registry", "zk:2181/a//b"], "--registry", "empty segment"),
    ("master", ["--registry", "user@zk:2181"], "--registry", "host[:port]"),
    ("standalone", ["--host", ""], "--host", "host name"),
    ("standalone", ["--host", "a b"], "--host", "host name"),
    ("standalone", ["--host", "me@box"], "--host", "host name"),
    ("standalone", ["--log-level", "LOUD"], "--log-level", "one of"),
    ("standalone", ["--data-dir", ""], "--data-dir", "empty"),
]


@pytest.mark.parametrize(("role", "argv", "field", "message"), BAD_FLAGS)
def test_bad_flags_name_the_flag(role: Role, argv: list[str], field: str, message: str) -> None:
    found = violations(argv, role)
    assert field in found, found
    assert message in found[field]


BAD_ENV = [
    ("DSCHED_HEARTBEAT_INTERVAL", "0", "above 0"),
    ("DSCHED_HEARTBEAT_INTERVAL", "nan", "finite"),
    ("DSCHED_HEARTBEAT_INTERVAL", "soon", "a number"),
    ("DSCHED_FAILOVER_DELAY", "-1", "at least 0"),
    ("DSCHED_FAILOVER_DELAY", "inf", "finite"),
    ("DSCHED_WARMUP_SECONDS", "-5", "at least 0"),
    ("DSCHED_CPU_THRESHOLD", "0", "above 0"),
    ("DSCHED_MEMORY_THRESHOLD", "1.5", "at most 1"),
    ("DSCHED_DISK_THRESHOLD", "90%", "a number"),
    ("DSCHED_OUTBOX_FSYNC", "maybe", "true or false"),
    ("DSCHED_HOST_SELECTOR", "fastest", "lower_weight, round_robin, random"),
    ("DSCHED_PORT", "", "integer"),
    ("DSCHED_DB_URL", "mongodb://db", "unsupported"),
    ("DSCHED_WORKER_SLOTS", "many", "integer"),
    ("DSCHED_REGISTRY_SESSION_TIMEOUT", "1.5", "at least 2"),
    ("DSCHED_REGISTRY_SESSION_TIMEOUT", "61", "at most 60"),
    ("DSCHED_REGISTRY_SESSION_TIMEOUT", "ten", "a number"),
    ("DSCHED_TASK_ENV_ALLOW", "SPARK_HOME,DSCHED_DB_URL", "outside DSCHED_*"),
    ("DSCHED_TASK_ENV_ALLOW", "dsched_*", "outside DSCHED_*"),
    ("DSCHED_TASK_ENV_ALLOW", "A-B", "not an environment variable name"),
    ("DSCHED_TASK_ENV_ALLOW", "*", "not an environment variable name"),
    ("DSCHED_TASK_ENV_ALLOW", "A*B", "not an environment variable name"),
]


@pytest.mark.parametrize(("name", "value", "message"), BAD_ENV)
def test_bad_environment_names_the_variable(name: str, value: str, message: str) -> None:
    found = violations(None, "standalone", **{name: value})
    assert message in found[name], found


def test_task_env_allow_is_a_list_of_names_and_prefixes(tmp_path: Path) -> None:
    assert load().task_env_allow_list == ()
    s = load(role="worker", DSCHED_TASK_ENV_ALLOW=" SPARK_HOME, HADOOP_* KRB5CCNAME ")
    assert s.task_env_allow == "SPARK_HOME,HADOOP_*,KRB5CCNAME"
    assert s.task_env_allow_list == ("SPARK_HOME", "HADOOP_*", "KRB5CCNAME")
    config = write(tmp_path / "w.toml", '[worker]\ntask_env_allow = "SITE"\n')
    assert load(["--config", str(config)], "worker").task_env_allow_list == ("SITE",)


def test_bad_file_values_name_the_file_and_key(tmp_path: Path) -> None:
    config = write(
        tmp_path / "d.toml",
        'port = "80"\noutbox_fsync = "yes"\nheartbeat_interval = true\nnope = 1\n'
        "master = 3\n[worker]\nworker_slots = 0\ntypo = 1\n",
    )
    found = violations(["--config", str(config)], "worker")
    assert "integer" in found[f"{config}:port"]
    assert "true or false" in found[f"{config}:outbox_fsync"]
    assert "a number" in found[f"{config}:heartbeat_interval"]
    assert found[f"{config}:nope"] == "unknown setting"
    assert "table" in found[f"{config}:master"]
    assert "at least 1" in found[f"{config}:[worker].worker_slots"]
    assert found[f"{config}:[worker].typo"] == "unknown setting"


def test_unreadable_or_invalid_files(tmp_path: Path) -> None:
    assert "cannot read" in violations(["--config", str(tmp_path / "missing.toml")])["--config"]
    broken = write(tmp_path / "broken.toml", "port = ")
    assert "not valid TOML" in violations(DSCHED_CONFIG=str(broken))["DSCHED_CONFIG"]


def test_all_problems_are_reported_together() -> None:
    found = violations(["--port", "x", "--slots", "0"], DSCHED_LOG_LEVEL="loud")
    assert set(found) == {"--port", "--slots", "DSCHED_LOG_LEVEL"}


@pytest.mark.parametrize(
    ("role", "argv"),
    [
        ("worker", ["--db", "sqlite://"]),  # workers never touch the database
        ("master", ["--slots", "4"]),
        ("master", ["--worker-port", "1"]),
        ("standalone", ["--bogus"]),
        ("standalone", ["--port"]),  # missing value
    ],
)
def test_flags_of_other_roles_are_rejected(role: Role, argv: list[str]) -> None:
    assert "argv" in violations(argv, role)


def test_help_lists_the_role_flags_with_their_variables() -> None:
    standalone = build_arg_parser("standalone").format_help()
    worker = build_arg_parser("worker").format_help()
    assert "--worker-port" in standalone and "--worker-port" not in worker
    assert "--db" not in worker and "--slots" in worker
    assert "DSCHED_WORKER_SLOTS" in worker
    with pytest.raises(ValueError):
        load_settings([], {}, role="scheduler")  # type: ignore[arg-type]


@pytest.fixture
def root_logger() -> Iterator[logging.Logger]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield root
    root.handlers[:] = handlers
    root.setLevel(level)
    logging.getLogger("kazoo").setLevel(logging.NOTSET)


def test_configure_logging_sets_level_and_replaces_itself(root_logger: logging.Logger) -> None:
    first, second = io.StringIO(), io.StringIO()
    configure_logging(load(role="master", DSCHED_LOG_LEVEL="warning"), first)
    configure_logging(load(role="worker", DSCHED_LOG_LEVEL="info"), second)
    logging.getLogger("dsched.test").info("hello")
    assert first.getvalue() == ""  # the first handler is gone, not doubled
    assert "INFO    worker dsched.test: hello" in second.getvalue()
    assert root_logger.level == logging.INFO
    assert logging.getLogger("kazoo").level == logging.WARNING


DEPLOY = Path(__file__).resolve().parents[3] / "deploy"
# Settings a role has no use for: the samples leave them out.
UNUSED: dict[Role, set[str]] = {
    "master": {
        *("worker_port", "worker_mode", "worker_slots", "outbox_fsync", "task_env_allow"),
        *("workdir_keep_failed", "log_retention_days", "spark_home"),
        *("python_interpreter", "http_allow"),
    },
    "worker": {
        *(
            "worker_port",
            "worker_mode",
            "db_url",
            "host_selector",
            "dispatch_timeout",
            "warmup_seconds",
            "min_schedule_interval",
        ),
        *("cluster_host", "cluster_port", "master_capacity", "instance_sweep_interval"),
        *("request_id_retention_days", "event_retention_days", "instance_retention_days"),
        "retention_interval",
        "datasource_key_file",  # only masters hold the key (README "Datasources")
    },
}


@pytest.mark.parametrize("role", ["master", "worker"])
def test_sample_configs_load_and_name_every_setting(role: Role) -> None:
    sample = DEPLOY / "config" / f"{role}.toml"
    s = load(["--config", str(sample)], role)
    assert s.role == role and s.data_dir == Path(f"/var/lib/dsched/{role}")
    assert s.zookeeper == ("127.0.0.1:2181", "/dsched") and s.registry_credentials is None
    text = sample.read_text()
    named = set(re.findall(r"^#? ?(\w+) = ", text, re.MULTILINE))
    settings = {f.name for f in dataclasses.fields(Settings)} - {"role"}
    assert named == settings - UNUSED[role]


def test_standalone_sample_config_loads() -> None:
    s = load(["--config", str(DEPLOY / "standalone" / "dsched.toml")])
    assert (s.data_dir, s.embedded_registry) == (Path("/var/lib/dsched"), True)


def test_worker_mode_and_the_registry_service() -> None:
    assert load().worker_mode in ("process", "in-process")
    assert load(["--worker", "in-process"]).worker_mode == "in-process"
    assert load([], DSCHED_WORKER_MODE="PROCESS").worker_mode == "process"
    with pytest.raises(InvalidArgument, match="must be one of process, in-process"):
        load(["--worker", "thread"])
    with pytest.raises(InvalidArgument):
        load(["--worker", "process"], "worker")  # a standalone's option only
    worker = load(["--registry", "grpc://127.0.0.1:4000"], "worker")
    assert worker.registry_service == "127.0.0.1:4000"
    assert load(role="worker").registry_service is None
    for bad in ("grpc://", "grpc://host", "grpc://:1", "grpc://h:0", "grpc://h:x"):
        with pytest.raises(InvalidArgument, match="is not grpc://host:port"):
            load(["--registry", bad], "worker")


def test_cluster_listener_and_capacity_defaults_per_role() -> None:
    master, standalone = load(role="master"), load()
    assert (master.cluster_host, master.cluster_port, master.master_capacity) == ("", 5679, 10000)
    # Standalone's only worker is on the same machine: loopback, any free port.
    assert (standalone.cluster_host, standalone.cluster_port) == ("127.0.0.1", 0)
    assert standalone.master_capacity == 10000


def test_cluster_listener_and_capacity_from_every_source(tmp_path: Path) -> None:
    conf = write(tmp_path / "d.toml", "cluster_port = 7001\nmaster_capacity = 50\n")
    s = load(["--config", str(conf)], "master")
    assert (s.cluster_port, s.master_capacity) == (7001, 50)
    s = load(["--config", str(conf)], "master", DSCHED_CLUSTER_PORT="7002", DSCHED_CLUSTER_HOST="h")
    assert (s.cluster_host, s.cluster_port) == ("h", 7002)
    s = load(["--cluster-port", "0", "--cluster-host", "10.0.0.1", "--capacity", "3"], "master")
    assert (s.cluster_host, s.cluster_port, s.master_capacity) == ("10.0.0.1", 0, 3)


@pytest.mark.parametrize(
    ("role", "argv", "field", "message"),
    [
        ("master", ["--cluster-port", "70000"], "--cluster-port", "at most 65535"),
        ("master", ["--cluster-host", "a b"], "--cluster-host", "not a host name"),
        ("master", ["--capacity", "0"], "--capacity", "at least 1"),
        ("master", ["--port", "5679"], "default cluster_port", "must differ"),
        ("master", ["--port", "7", "--cluster-port", "7"], "--cluster-port", "must differ"),
        ("standalone", ["--worker-port", "7", "--cluster-port", "7"], "--cluster-port", "differ"),
    ],
)
def test_bad_cluster_listener_settings(
    role: Role, argv: list[str], field: str, message: str
) -> None:
    found = violations(argv, role)
    assert message in found[field], found


def test_workers_have_no_cluster_listener_flags() -> None:
    assert "--cluster-port" in violations(["--cluster-port", "1"], "worker")["argv"]


def test_python_interpreter_and_http_allow_are_checked() -> None:
    s = load(DSCHED_HTTP_ALLOW=" https://a.example.com, http://127.0.0.1:8080/api ")
    assert s.http_allow_list == ("https://a.example.com", "http://127.0.0.1:8080/api")
    assert load().http_allow_list == ()
    python = load(DSCHED_PYTHON_INTERPRETER="/opt/py/bin/python3").python_interpreter
    assert python == "/opt/py/bin/python3"
    for name, value in (
        ("DSCHED_HTTP_ALLOW", "ftp://x"),
        ("DSCHED_HTTP_ALLOW", "http://a@b"),
        ("DSCHED_HTTP_ALLOW", "127.0.0.1"),
        ("DSCHED_HTTP_ALLOW", "http://a.*.com"),
        ("DSCHED_PYTHON_INTERPRETER", "python3 -c x"),
        ("DSCHED_PYTHON_INTERPRETER", "bin/python"),
    ):
        with pytest.raises(InvalidArgument):
            load_settings([], {**HOME, name: value}, role="standalone")
