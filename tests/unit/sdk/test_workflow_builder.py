"""Workflows as code: attaching tasks, dependency operators, options and to_spec."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

import dsched
from dsched import Shell, Workflow
from dsched.options import Priority, TimeoutStrategy
from dsched.spec import ShellSpec
from dsched.workflow import collect


def _upstream(wf: Workflow) -> dict[str, tuple[str, ...]]:
    return {t.name: t.upstream for t in wf.to_spec().tasks}


def test_tasks_attach_to_the_open_block_in_order() -> None:
    with Workflow("wf") as wf:
        a = Shell("a", "echo a")
        b = Shell("b", "echo b")
    assert wf.tasks == (a, b)
    assert wf["b"] is b and a.workflow is wf


def test_task_outside_a_block_is_a_clear_error() -> None:
    with pytest.raises(RuntimeError, match=r"Shell\('x'\) was created outside a workflow"):
        Shell("x", "echo x")
    with Workflow("wf"):
        pass
    with pytest.raises(RuntimeError, match="outside a workflow"):
        Shell("y", "echo y")  # the block has ended


def test_explicit_workflow_argument() -> None:
    wf = Workflow("wf")
    task = Shell("a", "echo a", workflow=wf)
    assert wf.tasks == (task,)


def test_nested_blocks_attach_to_the_innermost() -> None:
    with Workflow("outer") as outer:
        a = Shell("a", "x")
        with Workflow("inner") as inner:
            b = Shell("b", "x")
        c = Shell("c", "x")
    assert outer.tasks == (a, c) and inner.tasks == (b,)


def test_blocks_are_per_thread() -> None:
    errors: list[BaseException] = []

    def other() -> None:
        try:
            Shell("t", "x")
        except RuntimeError as exc:
            errors.append(exc)

    with Workflow("wf") as wf:
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
    assert len(errors) == 1 and wf.tasks == ()


def test_duplicate_names_are_rejected_with_a_field_path() -> None:
    with Workflow("wf"):
        Shell("a", "x")
        Shell("b", "x")
        with pytest.raises(dsched.InvalidWorkflow) as caught:
            Shell("a", "y")
    assert caught.value.violations == (
        dsched.FieldViolation("workflow.tasks[2].name", "duplicate task name 'a' (also tasks[0])"),
    )


def test_rshift_and_lshift() -> None:
    with Workflow("wf") as wf:
        a, b, c = Shell("a", "x"), Shell("b", "x"), Shell("c", "x")
        assert (a >> b) is b
        assert (c << b) is b
    assert _upstream(wf) == {"a": (), "b": ("a",), "c": ("b",)}


def test_chains_read_left_to_right() -> None:
    with Workflow("wf") as wf:
        a, b, c, d = (Shell(n, "x") for n in "abcd")
        a >> b >> c >> d
    assert _upstream(wf) == {"a": (), "b": ("a",), "c": ("b",), "d": ("c",)}


def test_lists_on_either_side() -> None:
    with Workflow("wf") as wf:
        a, b, c, d, e = (Shell(n, "x") for n in "abcde")
        result = a >> [b, c] >> d
        assert result is d
        [b, c] << e  # b and c also after e
    assert _upstream(wf) == {"a": (), "b": ("a", "e"), "c": ("a", "e"), "d": ("b", "c"), "e": ()}


def test_list_lshift_returns_the_right_operand_and_fan_in() -> None:
    with Workflow("wf") as wf:
        a, b, c = Shell("a", "x"), Shell("b", "x"), Shell("c", "x")
        assert ([a, b] << c) is c
        assert (c << (a, b)) == (a, b)
    assert _upstream(wf) == {"a": ("c",), "b": ("c",), "c": ("a", "b")}


def test_repeated_edges_are_kept_once() -> None:
    with Workflow("wf") as wf:
        a, b = Shell("a", "x"), Shell("b", "x")
        a >> b
        b << a
        b.set_upstream([a])
    assert _upstream(wf)["b"] == ("a",)


def test_operators_reject_other_types() -> None:
    with Workflow("wf"):
        a = Shell("a", "x")
        with pytest.raises(TypeError):
            a >> "b"  # type: ignore[type-var]
        with pytest.raises(TypeError):
            a >> [a, 3]  # type: ignore[type-var]


def test_edges_cannot_cross_workflows() -> None:
    with Workflow("one"):
        a = Shell("a", "x")
    with Workflow("two"), pytest.raises(ValueError, match="edges cannot cross workflows"):
        a >> Shell("b", "x")


def test_to_spec_carries_every_option() -> None:
    with Workflow("wf", project="p", description="d", params={"n": 1, "ok": True}) as wf:
        Shell(
            "a",
            "echo $n",
            description="task",
            retries=2,
            retry_interval=30,
            timeout=timedelta(minutes=5),
            timeout_strategy="warn_fail",
            priority="high",
            worker_group="gpu",
            params={"x": 1.5, "none": None},
            delay=0.5,
            disabled=True,
        )
    spec = wf.to_spec()
    assert (spec.project, spec.name, spec.description) == ("p", "wf", "d")
    assert spec.params == {"n": "1", "ok": "true"}
    (task,) = spec.tasks
    assert task.kind == ShellSpec(script="echo $n")
    assert task.retry_interval == timedelta(seconds=30)
    assert task.timeout == timedelta(minutes=5)
    assert task.delay == timedelta(milliseconds=500)
    assert task.timeout_strategy is TimeoutStrategy.WARN_FAIL
    assert task.priority is Priority.HIGH
    assert (task.description, task.retries, task.worker_group, task.disabled) == (
        "task",
        2,
        "gpu",
        True,
    )
    assert task.params == {"x": "1.5", "none": ""}


def test_project_defaults_to_default() -> None:
    with Workflow("wf") as wf:
        Shell("a", "x")
    assert wf.project is None and wf.to_spec().project == "default"


def test_bad_option_values_fail_at_construction() -> None:
    with Workflow("wf"):
        with pytest.raises(dsched.InvalidArgument, match="priority must be one of HIGHEST"):
            Shell("a", "x", priority="urgent")
        with pytest.raises(dsched.InvalidArgument, match="retry_interval must be a timedelta"):
            Shell("b", "x", retry_interval="30s")  # type: ignore[arg-type]
        with pytest.raises(dsched.InvalidArgument):
            Shell("c", "x", timeout=float("nan"))


def test_validate_reports_every_problem_with_paths() -> None:
    with Workflow("wf") as wf:
        a = Shell("a", "echo a", retries=-1, retry_interval=-5)
        b = Shell("b", "   ")
        a >> b >> a
    with pytest.raises(dsched.InvalidWorkflow) as caught:
        wf.validate()
    fields = [v.field for v in caught.value.violations]
    assert "workflow.tasks[0].retries" in fields
    assert "workflow.tasks[0].retry_interval" in fields
    assert "workflow.tasks[1].shell.script" in fields


def test_cycle_is_reported_as_cycle_detected() -> None:
    with Workflow("wf") as wf:
        a, b, c = Shell("a", "x"), Shell("b", "x"), Shell("c", "x")
        a >> b >> c >> a
    with pytest.raises(dsched.InvalidWorkflow) as caught:
        wf.validate()
    assert caught.value.reason == "CYCLE_DETECTED"
    assert "cycle" in caught.value.violations[0].description


def test_collect_sees_every_entered_workflow_once() -> None:
    before = Workflow("before")
    with collect() as found:
        with Workflow("one") as one:
            Shell("a", "x")
        with one:  # entered again: still one entry
            Shell("b", "x")
        with before:
            pass
        Workflow("never-entered")
    with Workflow("after"):
        pass
    assert found == [one, before]
