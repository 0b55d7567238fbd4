"""The CLI's parts that need no server: server subcommand wiring, parsing, formatting."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from dsched.cli import format as fmt
from dsched.cli.commands import parse_params
from dsched.cli.logs import event_line
from dsched.cli.main import main
from dsched.errors import InvalidArgument
from dsched.results import InstanceEvent
from dsched.states import InstanceEventKind, TaskState, WorkflowState


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, list[str]]]:
    """Stand-ins for ``dsched_server.standalone``, ``dsched_server.processes`` and
    ``dsched_worker.main`` recording the argv each entry point gets."""
    calls: dict[str, list[str]] = {}
    standalone = types.ModuleType("dsched_server.standalone")
    processes = types.ModuleType("dsched_server.processes")
    worker = types.ModuleType("dsched_worker.main")

    def entry(name: str, code: int | None) -> object:
        def run(argv: list[str]) -> int | None:
            calls[name] = argv
            return code

        return run

    standalone.main = entry("standalone", None)  # type: ignore[attr-defined]
    processes.master_main = entry("master", 0)  # type: ignore[attr-defined]
    worker.worker_main = entry("worker", 3)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "dsched_server.standalone", standalone)
    monkeypatch.setitem(sys.modules, "dsched_server.processes", processes)
    monkeypatch.setitem(sys.modules, "dsched_worker.main", worker)
    yield calls


def test_standalone_passes_port_and_data_dir(servers: dict[str, list[str]]) -> None:
    assert main(["standalone", "--port", "7000", "--data-dir", "/tmp/d"]) == 0
    assert servers["standalone"] == ["--port", "7000", "--data-dir", "/tmp/d"]
    assert main(["standalone"]) == 0
    assert servers["standalone"] == []
    # Every option reaches the server as given, values next to their flags.
    assert main(["standalone", "--worker", "process", "--db", "sqlite:///x", "--port", "1"]) == 0
    assert servers["standalone"] == ["--worker", "process", "--db", "sqlite:///x", "--port", "1"]


def test_master_and_worker_pass_their_arguments_through(servers: dict[str, list[str]]) -> None:
    assert main(["master", "--config", "m.yaml", "--port", "1"]) == 0
    assert servers["master"] == ["--config", "m.yaml", "--port", "1"]
    assert main(["worker", "--group", "gpu"]) == 3  # the entry point's code is the exit code
    assert servers["worker"] == ["--group", "gpu"]


def test_missing_server_module_is_an_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "dsched_server.standalone", None)  # makes the import fail
    assert main(["standalone"]) == 1
    assert capsys.readouterr().err == (
        "error: dsched standalone needs the server, which is not installed here (import of "
        "dsched_server.standalone halted; None in sys.modules): pip install 'dsched[server]'\n"
    )


@pytest.mark.parametrize("command", ["standalone", "master", "worker"])
def test_missing_server_dependency_names_the_extra(
    command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # What an SDK-only install meets (tests/packaging runs the real one); faked here because
    # this process has the server's modules loaded already.
    def import_module(name: str) -> types.ModuleType:
        raise ModuleNotFoundError("No module named 'sqlalchemy'", name="sqlalchemy")

    monkeypatch.setattr("dsched.cli.main.importlib.import_module", import_module)
    assert main([command]) == 1
    err = capsys.readouterr().err
    assert err == (
        f"error: dsched {command} needs the server, which is not installed here "
        "(No module named 'sqlalchemy'): pip install 'dsched[server]'\n"
    )


def test_broken_server_module_is_an_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def import_module(name: str) -> types.ModuleType:
        raise ImportError("cannot import name 'x' from 'dsched_server.engine'")

    monkeypatch.setattr("dsched.cli.main.importlib.import_module", import_module)
    assert main(["master"]) == 1
    assert capsys.readouterr().err.startswith("error: the dsched server is not available here")


def test_missing_entry_point_is_an_error(
    servers: dict[str, list[str]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delattr(sys.modules["dsched_worker.main"], "worker_main")
    assert main(["worker"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: the dsched server here has no dsched_worker.main.worker_main")
    assert "worker" not in servers


def test_unknown_options_of_client_commands_are_usage_errors(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["info", "--bogus"])
    assert caught.value.code == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err


def test_parse_params() -> None:
    assert parse_params(["a=1", "b=x=y", "c="]) == {"a": "1", "b": "x=y", "c": ""}
    with pytest.raises(InvalidArgument):
        parse_params(["=1"])


def test_table_aligns_columns_without_trailing_spaces() -> None:
    text = fmt.table(("id", "name"), [(1, "a"), (22, None)])
    assert text.splitlines() == ["ID  NAME", "1   a", "22  -"]


def test_table_pads_by_terminal_width_for_names_in_any_script() -> None:
    # CJK characters take two columns, combining marks none: the next column still lines up.
    text = fmt.table(
        ("name", "state"), [("每日报表", "OK"), ("e\u0301t\u00e9", "OK"), ("ab", "OK")]
    )
    assert text.splitlines() == [
        "NAME      STATE",
        "每日报表  OK",
        "e\u0301t\u00e9       OK",
        "ab        OK",
    ]
    assert (fmt.width("每日报表"), fmt.width("e\u0301"), fmt.width("\uff41"), fmt.width("a")) == (
        8,
        1,
        2,
        1,
    )


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.25, "250ms"), (3.21, "3.2s"), (65, "1m05s"), (7325, "2h02m")],
)
def test_elapsed(seconds: float, text: str) -> None:
    assert fmt.elapsed(timedelta(seconds=seconds)) == text


def test_event_lines() -> None:
    when = datetime(2024, 1, 1, 12, 0, 1, tzinfo=UTC)
    task = InstanceEvent(
        sequence=1,
        workflow_instance_id=1,
        task_instance_id=5,
        task_name="extract",
        task_state=TaskState.FAILED,
        kind=InstanceEventKind.STATE,
        message="exit code 1",
        create_time=when,
    )
    local = when.astimezone().strftime("%H:%M:%S")
    assert event_line(task) == f"{local}  extract  FAILED  exit code 1"
    flow = InstanceEvent(
        sequence=2, workflow_instance_id=1, workflow_state=WorkflowState.RUNNING, create_time=when
    )
    assert event_line(flow) == f"{local}  workflow  RUNNING"
    warning = InstanceEvent(
        sequence=3,
        workflow_instance_id=1,
        task_instance_id=5,
        task_name="extract",
        kind=InstanceEventKind.TIMEOUT_WARNING,
        create_time=when,
    )
    assert event_line(warning) == f"{local}  extract  TIMEOUT_WARNING"
