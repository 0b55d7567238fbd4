"""Workflow validation: hostile input is rejected with precise field paths; valid DAGs pass."""

from __future__ import annotations

import dataclasses
import itertools
import random
import time
from collections.abc import Callable
from datetime import timedelta

import pytest

from dsched.errors import (
    MAX_DESCRIPTION_BYTES,
    MAX_VIOLATIONS,
    FieldViolation,
    InvalidArgument,
    InvalidWorkflow,
    clip,
    error_class,
)
from dsched.names import MAX_NAME_BYTES, MAX_NAME_LENGTH, MAX_PARAM_NAME_LENGTH, param_path
from dsched.spec import (
    MAX_DELAY,
    MAX_DESCRIPTION_LENGTH,
    MAX_EDGES,
    MAX_PARAM_VALUE_BYTES,
    MAX_PARAMS,
    MAX_RETRIES,
    MAX_RETRY_INTERVAL,
    MAX_SCRIPT_BYTES,
    MAX_TASKS,
    MAX_TIMEOUT,
    MAX_UPSTREAMS_PER_TASK,
    ShellSpec,
    TaskSpec,
    WorkflowSpec,
    check_workflow,
    find_cycle,
    validate_workflow,
)
from dsched_server.core.dag import Dag

US = timedelta(microseconds=1)


def t(name: str = "t", *upstream: str, **kw: object) -> TaskSpec:
    fields: dict[str, object] = {"name": name, "kind": ShellSpec(script="echo hi")}
    fields.update(kw)
    return TaskSpec(upstream=upstream, **fields)  # type: ignore[arg-type]


def wf(*tasks: TaskSpec, **kw: object) -> WorkflowSpec:
    fields: dict[str, object] = {"project": "proj", "name": "wf", "tasks": tasks or (t(),)}
    fields.update(kw)
    return WorkflowSpec(**fields)  # type: ignore[arg-type]


def violations(spec: WorkflowSpec) -> list[FieldViolation]:
    found, _ = validate_workflow(spec)
    return found


def only(spec: WorkflowSpec) -> FieldViolation:
    """The single violation of ``spec`` (fails if there are none or several)."""
    found = violations(spec)
    assert len(found) == 1, found
    return found[0]


def rejected(spec: WorkflowSpec, reason: str = "INVALID_WORKFLOW") -> InvalidArgument:
    """The error ``check_workflow`` raises: InvalidWorkflow, or InvalidArgument for a refused
    parameter name (the class the server's answer decodes to)."""
    with pytest.raises(InvalidArgument) as info:
        check_workflow(spec)
    assert info.value.reason == reason
    assert isinstance(info.value, InvalidWorkflow) == (not reason.endswith("_PARAMETER_NAME"))
    return info.value


# ------------------------------------------------------------------------------- valid workflows


def test_a_minimal_workflow_is_valid() -> None:
    assert validate_workflow(wf()) == ([], False)
    check_workflow(wf())


def test_every_limit_is_inclusive() -> None:
    at_limit = t(
        "x" * MAX_NAME_LENGTH,
        description="d" * (MAX_DESCRIPTION_LENGTH - 3) + "\t\r\n",
        retries=MAX_RETRIES,
        retry_interval=MAX_RETRY_INTERVAL,
        timeout=MAX_TIMEOUT,
        delay=MAX_DELAY,
        worker_group="g" * MAX_NAME_LENGTH,
        kind=ShellSpec(script="#" * MAX_SCRIPT_BYTES),
        params={f"P{i}": "v" for i in range(MAX_PARAMS - 1)}
        | {"p" * MAX_PARAM_NAME_LENGTH: "v" * MAX_PARAM_VALUE_BYTES},
    )
    spec = wf(
        at_limit,
        project="p" * MAX_NAME_LENGTH,
        name="w" * MAX_NAME_LENGTH,
        params={f"G{i}": "v" for i in range(MAX_PARAMS)},
    )
    assert violations(spec) == []


@pytest.mark.parametrize("name", ["a", "Z", "9", "9lives", "a.b-c_d", "v1.2.3", "x" * 64])
def test_good_names_pass(name: str) -> None:
    assert violations(wf(t(name), project=name, name=name)) == []


def test_free_text_may_hold_tabs_newlines_and_unicode() -> None:
    text = "Größe\tof the 日本 batch\r\nline two ✓ \u202e bidi is text, not a control"
    assert violations(wf(t(description=text), description=text)) == []


def test_a_fan_out_of_max_tasks_is_valid() -> None:
    tasks = [t("root"), *(t(f"leaf{i}", "root") for i in range(MAX_TASKS - 1))]
    assert validate_workflow(wf(*tasks)) == ([], False)


@pytest.mark.parametrize("backwards", [False, True], ids=["forwards", "backwards"])
def test_a_chain_of_max_tasks_is_valid(backwards: bool) -> None:
    tasks = [t(f"c{i}", *([f"c{i - 1}"] if i else [])) for i in range(MAX_TASKS)]
    if backwards:
        tasks.reverse()
    assert validate_workflow(wf(*tasks)) == ([], False)


def test_a_dense_dag_at_the_edge_limit_is_valid() -> None:
    # 20 sources, 1000 sinks each depending on all 20 sources: exactly MAX_EDGES edges.
    sources = [t(f"s{i}") for i in range(20)]
    sinks = [t(f"k{i}", *(s.name for s in sources)) for i in range(MAX_EDGES // 20)]
    assert validate_workflow(wf(*sources, *sinks)) == ([], False)


def test_a_task_may_have_max_upstreams() -> None:
    ups = [t(f"u{i}") for i in range(MAX_UPSTREAMS_PER_TASK)]
    assert violations(wf(*ups, t("sink", *(u.name for u in ups)))) == []


# ------------------------------------------------------------------------------- graph shape


def test_an_empty_workflow_is_rejected() -> None:
    spec = WorkflowSpec(project="p", name="w", tasks=())
    assert only(spec) == FieldViolation("workflow.tasks", "a workflow needs at least one task")
    rejected(spec)


def test_more_than_max_tasks_is_rejected_before_looking_at_them() -> None:
    tasks = [t(f"n{i}") for i in range(MAX_TASKS + 1)]
    tasks[5] = t("bad name")  # not even looked at: the size check bounds the work
    assert only(wf(*tasks)) == FieldViolation("workflow.tasks", f"more than {MAX_TASKS} tasks")


def test_more_than_max_edges_is_rejected() -> None:
    sources = [t(f"s{i}") for i in range(21)]
    sinks = [t(f"k{i}", *(s.name for s in sources)) for i in range(MAX_EDGES // 21 + 1)]
    assert only(wf(*sources, *sinks)) == FieldViolation(
        "workflow.tasks", f"more than {MAX_EDGES} edges"
    )


def test_too_many_upstreams_on_one_task_is_rejected() -> None:
    ups = [t(f"u{i}") for i in range(MAX_UPSTREAMS_PER_TASK + 1)]
    found = only(wf(*ups, t("sink", *(u.name for u in ups))))
    assert found == FieldViolation(
        f"workflow.tasks[{MAX_UPSTREAMS_PER_TASK + 1}].upstream_tasks", "too many upstream tasks"
    )


def test_duplicate_task_names_flag_every_later_copy() -> None:
    found = violations(wf(t("a"), t("b"), t("a"), t("a")))
    assert found == [
        FieldViolation("workflow.tasks[2].name", "duplicate task name 'a'"),
        FieldViolation("workflow.tasks[3].name", "duplicate task name 'a'"),
    ]


def test_an_unknown_upstream_is_rejected_at_its_task() -> None:
    assert only(wf(t("a"), t("b", "a", "ghost"))) == FieldViolation(
        "workflow.tasks[1].upstream_tasks", "unknown upstream task 'ghost'"
    )


def test_a_self_edge_is_rejected() -> None:
    assert only(wf(t("a"), t("b", "b"))) == FieldViolation(
        "workflow.tasks[1].upstream_tasks", "task 'b' depends on itself"
    )
    rejected(wf(t("a"), t("b", "b")))


def test_an_upstream_listed_twice_is_rejected() -> None:
    assert only(wf(t("a"), t("b", "a", "a"))) == FieldViolation(
        "workflow.tasks[1].upstream_tasks", "upstream task 'a' listed twice"
    )


def assert_cycle_reported(spec: WorkflowSpec) -> list[str]:
    err = rejected(spec, "CYCLE_DETECTED")
    found, cyclic = validate_workflow(spec)
    assert cyclic
    # The exception carries the violations clipped to the error bounds; validation, whole.
    assert list(err.violations) == [
        FieldViolation(v.field, clip(v.description, MAX_DESCRIPTION_BYTES), v.reason) for v in found
    ]
    (violation,) = [v for v in found if v.description.startswith("cycle: ")]
    path = violation.description.removeprefix("cycle: ").split(" -> ")
    assert path[0] == path[-1]
    assert len(set(path[:-1])) == len(path) - 1  # a simple cycle
    by_name = {task.name: i for i, task in enumerate(spec.tasks)}
    for up, down in itertools.pairwise(path):
        assert up in spec.tasks[by_name[down]].upstream, (up, down)  # in execution order
    # the field names the task whose upstream list closes the reported edge path[0] -> path[1]
    assert violation.field == f"workflow.tasks[{by_name[path[1]]}].upstream_tasks"
    return path


def test_a_two_task_cycle_is_reported_with_its_path() -> None:
    path = assert_cycle_reported(wf(t("a", "b"), t("b", "a")))
    assert sorted(path[:-1]) == ["a", "b"]


def test_a_cycle_deep_in_a_larger_graph_is_reported_with_just_the_cycle() -> None:
    # entry -> x -> y -> z -> x, plus unrelated tasks
    spec = wf(
        t("entry"), t("x", "entry", "z"), t("y", "x"), t("z", "y"), t("other"), t("o2", "other")
    )
    path = assert_cycle_reported(spec)
    assert sorted(path[:-1]) == ["x", "y", "z"]
    assert check_message(spec).startswith("workflow 'wf' is invalid (workflow.tasks[")


def check_message(spec: WorkflowSpec) -> str:
    with pytest.raises(InvalidWorkflow) as info:
        check_workflow(spec)
    return str(info.value)


def test_a_cycle_is_reported_alongside_field_violations() -> None:
    spec = wf(t("a", "b", retries=-1), t("b", "a"))
    err = rejected(spec, "CYCLE_DETECTED")
    assert err.violations[0].field == "workflow.tasks[0].retries"
    assert any(v.description.startswith("cycle: ") for v in err.violations)


def test_a_long_cycle_is_found_without_recursion() -> None:
    n = MAX_TASKS
    tasks = [t(f"c{i}", f"c{(i - 1) % n}") for i in range(n)]
    path = assert_cycle_reported(wf(*tasks))
    assert len(path) == n + 1


# ------------------------------------------------------------------------------- names


# Refused as project, workflow, task and worker group names alike.
BAD_NAMES = {
    "empty": "",
    "too-long": "x" * (MAX_NAME_LENGTH + 1),
    "too-long-cjk": "表" * (MAX_NAME_LENGTH + 1),
    "too-many-bytes": "r" + "\U0001f600" * (MAX_NAME_BYTES // 4),  # 1 + 48 x 4 = 193 bytes
    "leading-space": " a",
    "trailing-space": "a ",
    "trailing-newline": "a\n",
    "tab": "a\tb",
    "nul": "a\x00",
    "escape": "a\x1b[31m",
    "c1-csi": "a\x9b",
    "leading-dash": "-rf",
    "leading-dot": ".hidden",
    "leading-underscore": "_a",
    "leading-mark": "\u0301a",
    "leading-dollar": "$(id)",
    "slash": "a/b",
    "backslash": "a\\b",
    "dot-dot": "../etc",
    "zero-width-space": "a\u200bb",
    "zero-width-joiner": "a\u200db",
    "byte-order-mark": "\ufeffa",
    "rtl-override": "a\u202eb",
    "rtl-isolate": "a\u2067b",
    "arabic-letter-mark": "a\u061cb",
    "no-break-space": "a\u00a0b",
    "ideographic-space": "每日\u3000报表",
    "line-separator": "a\u2028b",
    "private-use": "a\ue000",
    "unassigned": "a\U0003fffe",
    "lone-surrogate": "a\udc80",
    "hangul-filler": "a\u3164b",
    "variation-selector": "a\ufe0fb",
    "not-nfc": "cafe\u0301",  # e + combining acute: NFC is "café"
    "not-nfc-hangul": "\u1112\u1161\u11ab",  # conjoining jamo of 한
}
# Accepted as project, workflow and task names; refused as worker groups (ASCII only).
UNICODE_NAMES = {
    "chinese": "每日报表",
    "chinese-mixed": "每日报表_v2 (华东)",
    "japanese": "日次レポート",
    "korean": "일일 보고서",
    "latin-1": "café",
    "german": "Straße",
    "cyrillic": "отчёт",
    "arabic": "تقرير يومي",
    "hebrew": "דוח",
    "hindi": "दैनिक रिपोर्ट",
    "thai": "รายงาน",
    "fullwidth": "\uff41",
    "arabic-digit": "\u0661",
    "emoji": "report \U0001f4ca",
    "space": "my task",
    "punctuation": "a;b,c!d#e",
    "max-code-points": "表" * MAX_NAME_LENGTH,  # 64 x 3 = 192 bytes: both limits exactly
    "max-bytes": "rrrr" + "\U0001f600" * (MAX_NAME_BYTES // 4 - 1),  # 4 + 47 x 4 = 192 bytes
}
WHERE = ["workflow.project", "workflow.name", "workflow.tasks[0].name"]


def named(where: str, name: str) -> WorkflowSpec:
    if where == "workflow.project":
        return wf(project=name)
    if where == "workflow.name":
        return wf(name=name)
    if where == "workflow.tasks[0].name":
        return wf(t(name))
    return wf(t(worker_group=name))


@pytest.mark.parametrize("name", BAD_NAMES.values(), ids=BAD_NAMES.keys())
@pytest.mark.parametrize("where", [*WHERE, "workflow.tasks[0].worker_group"])
def test_bad_names_are_rejected_at_their_field(name: str, where: str) -> None:
    spec = named(where, name)
    if where.endswith("worker_group") and name == "":
        assert violations(spec) == []  # empty worker group: the default one
        return
    found = only(spec)
    assert found.field == where
    assert found.description


@pytest.mark.parametrize("name", UNICODE_NAMES.values(), ids=UNICODE_NAMES.keys())
@pytest.mark.parametrize("where", WHERE)
def test_names_in_any_script_are_accepted(name: str, where: str) -> None:
    assert violations(named(where, name)) == []


@pytest.mark.parametrize("name", UNICODE_NAMES.values(), ids=UNICODE_NAMES.keys())
def test_worker_groups_stay_ascii(name: str) -> None:
    assert only(named("workflow.tasks[0].worker_group", name)).field == (
        "workflow.tasks[0].worker_group"
    )


def test_a_name_violation_says_what_is_wrong() -> None:
    assert only(wf(name="")).description == "workflow name must not be empty"
    assert only(wf(project="x" * 65)).description == "project name is longer than 64 characters"
    assert "must start with a letter or digit" in only(wf(t("-x"))).description
    assert only(wf(t("a\u202eb"))).description == (
        "task name contains U+202E (RIGHT-TO-LEFT OVERRIDE), a format character (e.g. a bidi "
        "control or zero-width character)"
    )
    assert "normal form NFC" in only(wf(name="cafe\u0301")).description
    assert only(wf(name="r" + "\U0001f600" * 48)).description == (
        "workflow name is longer than 192 bytes in UTF-8"
    )
    assert "path separator" in only(wf(name="a/b")).description


def test_a_refused_name_is_not_normalised_into_an_accepted_one() -> None:
    # "café" in NFC is accepted and "cafe" + U+0301 is refused: the client learns that its
    # spelling differs instead of getting an object whose name is not the one it sent.
    assert violations(wf(name="caf\u00e9")) == []
    assert only(wf(name="cafe\u0301")).field == "workflow.name"


# ------------------------------------------------------------------------------- free text


CONTROL_CHARS = ["\x00", "\x07", "\x08", "\x0b", "\x0c", "\x1b[2J", "\x7f", "\x85", "\x9b31m"]


@pytest.mark.parametrize("bad", CONTROL_CHARS, ids=[repr(c) for c in CONTROL_CHARS])
def test_descriptions_with_control_characters_are_rejected(bad: str) -> None:
    text = f"looks fine{bad}"
    assert only(wf(description=text)) == FieldViolation(
        "workflow.description", "contains control characters"
    )
    assert only(wf(t(description=text))) == FieldViolation(
        "workflow.tasks[0].description", "contains control characters"
    )


def test_an_over_long_description_is_rejected() -> None:
    assert only(wf(description="d" * (MAX_DESCRIPTION_LENGTH + 1))) == FieldViolation(
        "workflow.description", f"longer than {MAX_DESCRIPTION_LENGTH} characters"
    )


@pytest.mark.parametrize(
    "spec_of",
    [
        lambda s: wf(description=s),
        lambda s: wf(t(kind=ShellSpec(script=f"echo {s}"))),
        lambda s: wf(params={"A": s}),
        lambda s: wf(t(params={"A": s})),
    ],
    ids=["description", "script", "workflow-param", "task-param"],
)
def test_text_that_is_not_encodable_is_a_violation_not_a_crash(
    spec_of: Callable[[str], WorkflowSpec],
) -> None:
    # A lone surrogate (os.environ / os.fsdecode produce them for undecodable bytes) cannot be sent
    # as a proto string: it must be reported like any other bad field, not raise UnicodeEncodeError.
    found = only(spec_of("x\udc80y"))
    assert "Unicode" in found.description


# ------------------------------------------------------------------------------- task fields


@pytest.mark.parametrize("retries", [-1, MAX_RETRIES + 1, -(2**63), 2**63])
def test_retries_out_of_range_are_rejected(retries: int) -> None:
    assert only(wf(t(retries=retries))) == FieldViolation(
        "workflow.tasks[0].retries", f"must be between 0 and {MAX_RETRIES}"
    )


@pytest.mark.parametrize(
    ("field", "limit"),
    [("retry_interval", MAX_RETRY_INTERVAL), ("timeout", MAX_TIMEOUT), ("delay", MAX_DELAY)],
)
@pytest.mark.parametrize("excess", ["negative", "just-over", "huge", "very-negative"])
def test_durations_out_of_range_are_rejected(field: str, limit: timedelta, excess: str) -> None:
    value = {
        "negative": -US,
        "just-over": limit + US,
        "huge": timedelta.max,
        "very-negative": timedelta.min,
    }[excess]
    task = {
        "retry_interval": t(retry_interval=value),
        "timeout": t(timeout=value),
        "delay": t(delay=value),
    }[field]
    found = only(wf(task))
    assert found.field == f"workflow.tasks[0].{field}"
    expected = "must not be negative" if value < timedelta(0) else f"must be at most {limit}"
    assert found.description == expected


@pytest.mark.parametrize("script", ["", " ", "\n\t  \n"], ids=["empty", "space", "blank"])
def test_an_empty_script_is_rejected(script: str) -> None:
    assert only(wf(t(kind=ShellSpec(script=script)))) == FieldViolation(
        "workflow.tasks[0].shell.script", "must not be empty"
    )


def test_a_script_with_nul_is_rejected() -> None:
    assert only(wf(t(kind=ShellSpec(script="echo a\x00b")))) == FieldViolation(
        "workflow.tasks[0].shell.script", "contains a NUL character"
    )


def test_an_oversized_script_is_measured_in_bytes() -> None:
    script = "é" * (MAX_SCRIPT_BYTES // 2 + 1)  # under the limit in characters, over in bytes
    assert only(wf(t(kind=ShellSpec(script=script)))) == FieldViolation(
        "workflow.tasks[0].shell.script", "is larger than 256 KiB"
    )


def test_a_task_without_a_kind_is_rejected() -> None:
    assert only(wf(t(kind=None))) == FieldViolation(
        "workflow.tasks[0].kind", "a task type (e.g. shell) is required"
    )


# ------------------------------------------------------------------------------- parameters


BAD_PARAM_NAMES = ["", "1abc", "a-b", "a b", "a=b", "PATH;x", "é", "a\x00", "p" * 129]


@pytest.mark.parametrize("key", BAD_PARAM_NAMES, ids=[repr(k)[:12] for k in BAD_PARAM_NAMES])
@pytest.mark.parametrize("level", ["workflow", "task"])
def test_parameter_names_must_be_identifiers(key: str, level: str) -> None:
    spec = wf(params={key: "v"}) if level == "workflow" else wf(t(params={key: "v"}))
    path = "workflow.params" if level == "workflow" else "workflow.tasks[0].params"
    found = only(spec)
    assert found.field == param_path(path, key)
    assert found.reason == "INVALID_PARAMETER_NAME"
    assert "is not an identifier" in found.description
    assert type(rejected(spec, "INVALID_PARAMETER_NAME")) is InvalidArgument


def test_an_over_long_parameter_name_is_cut_in_the_field_path() -> None:
    key = "p" * 100_000
    found = only(wf(params={key: "v"}))
    assert found.field == "workflow.params['" + "p" * MAX_PARAM_NAME_LENGTH + "'...]"
    assert len(found.description) < 400


@pytest.mark.parametrize(
    "key", ["DSCHED_TOKEN", "dsched_x", "Dsched_", "DSCHED_", "BASH_ENV", "ld_preload", "Path"]
)
def test_reserved_parameter_names_are_refused(key: str) -> None:
    found = only(wf(t(params={key: "v"})))
    assert found.field == f"workflow.tasks[0].params[{key!r}]"
    assert found.reason == "RESERVED_PARAMETER_NAME"
    assert f"parameter name {key!r} is reserved: " in found.description
    assert type(rejected(wf(t(params={key: "v"})), "RESERVED_PARAMETER_NAME")) is InvalidArgument


def test_a_reserved_name_outranks_an_invalid_one_and_a_cycle_in_the_reason() -> None:
    cycle = [t("a", "b"), t("b", "a")]
    rejected(wf(*cycle), "CYCLE_DETECTED")
    rejected(wf(*cycle, params={"1x": "v"}), "INVALID_PARAMETER_NAME")
    err = rejected(wf(*cycle, params={"1x": "v", "LD_PRELOAD": "x"}), "RESERVED_PARAMETER_NAME")
    # Every problem is still listed, the cycle too (its violation has no reason of its own).
    assert [v.reason for v in err.violations] == [
        "INVALID_PARAMETER_NAME",
        "RESERVED_PARAMETER_NAME",
        "",
    ]


@pytest.mark.parametrize(
    "key", ["_", "a1", "A_B", "DSCHEDX", "MY_DSCHED_VAR", "day", "LC_ALL", "TZ", "user", "MY_PATH"]
)
def test_ordinary_parameter_names_pass(key: str) -> None:
    assert violations(wf(params={key: "v"})) == []


def test_a_parameter_value_with_nul_is_rejected() -> None:
    assert only(wf(params={"A": "x\x00"})) == FieldViolation(
        "workflow.params['A']", "value contains a NUL character"
    )


def test_an_oversized_parameter_value_is_measured_in_bytes() -> None:
    value = "€" * (MAX_PARAM_VALUE_BYTES // 3 + 1)
    assert only(wf(t(params={"A": value}))) == FieldViolation(
        "workflow.tasks[0].params['A']", "value is larger than 64 KiB"
    )


def test_parameter_values_may_hold_newlines_and_shell_syntax() -> None:
    # They reach the task as environment variables, never as script text.
    assert violations(wf(params={"A": "$(rm -rf /); `id`\n'\""})) == []


@pytest.mark.parametrize("level", ["workflow", "task"])
def test_too_many_parameters_is_one_violation(level: str) -> None:
    params = {f"P{i}": "v" for i in range(MAX_PARAMS + 1)}
    spec = wf(params=params) if level == "workflow" else wf(t(params=params))
    path = "workflow.params" if level == "workflow" else "workflow.tasks[0].params"
    assert only(spec) == FieldViolation(path, f"more than {MAX_PARAMS} parameters")


# ------------------------------------------------------------------------------- reporting


def test_every_violation_is_reported_in_field_order() -> None:
    spec = wf(
        t("ok"),
        t("bad/name", retries=-1, kind=None, params={"1x": "v"}),
        t("c", "ghost"),
        project="",
        description="\x00",
    )
    assert [v.field for v in violations(spec)] == [
        "workflow.project",
        "workflow.description",
        "workflow.tasks[1].name",
        "workflow.tasks[1].retries",
        "workflow.tasks[1].kind",
        "workflow.tasks[1].params['1x']",
        "workflow.tasks[2].upstream_tasks",
    ]


def test_check_workflow_raises_an_invalid_argument_with_every_violation() -> None:
    spec = wf(t("a", "ghost"), t("a"), project="p1", name="w1")
    err = rejected(spec)
    assert isinstance(err, InvalidArgument)
    assert err.code == "INVALID_ARGUMENT"
    assert err.metadata == {"project": "p1", "workflow": "w1"}
    assert list(err.violations) == violations(spec)
    assert err.field == "workflow.tasks[1].name"
    assert "workflow.tasks[0].upstream_tasks: unknown upstream task 'ghost'" in str(err)


@pytest.mark.parametrize("reason", ["INVALID_WORKFLOW", "CYCLE_DETECTED"])
def test_both_reasons_map_back_to_invalid_workflow(reason: str) -> None:
    assert error_class("INVALID_ARGUMENT", reason) is InvalidWorkflow


def test_validation_does_not_mutate_the_spec() -> None:
    spec = wf(t("a", params={"A": "1"}), params={"G": "2"})
    before = dataclasses.replace(spec)
    check_workflow(spec)
    assert spec == before


# ------------------------------------------------------------------------------- find_cycle


def test_find_cycle_on_acyclic_graphs() -> None:
    assert find_cycle({}) is None
    assert find_cycle({"a": []}) is None
    assert find_cycle({"a": [], "b": ["a"], "c": ["a", "b"]}) is None


def test_find_cycle_reports_a_self_loop() -> None:
    assert find_cycle({"a": ["a"]}) == ["a", "a"]


def test_find_cycle_ignores_edges_to_unknown_nodes() -> None:
    assert find_cycle({"a": ["ghost"], "b": ["a"]}) is None


def test_find_cycle_accepts_one_shot_iterables() -> None:
    assert find_cycle({"a": iter(["b"]), "b": iter(["a"])}) in (["a", "b", "a"], ["b", "a", "b"])


@pytest.mark.parametrize("n", [MAX_TASKS, 100_000])
def test_find_cycle_is_linear_on_long_chains(n: int) -> None:
    chain = {f"c{i}": [f"c{i - 1}"] if i else [] for i in range(n)}
    started = time.perf_counter()
    assert find_cycle(chain) is None
    assert find_cycle(dict(reversed(chain.items()))) is None
    # A generous bound: a quadratic walk of 100k nodes takes minutes, a linear one milliseconds.
    assert time.perf_counter() - started < 10


def test_find_cycle_agrees_with_the_dag_on_random_graphs() -> None:
    rng = random.Random(99)
    for _ in range(300):
        n = rng.randint(1, 25)
        names = [f"n{i}" for i in range(n)]
        edges = {x: rng.sample(names, rng.randint(0, min(3, n))) for x in names}
        cycle = find_cycle(edges)
        tasks = tuple(t(x, *ups) for x, ups in edges.items())
        try:
            Dag(WorkflowSpec(project="p", name="w", tasks=tasks))
            acyclic = True
        except ValueError:
            acyclic = False
        assert (cycle is None) == acyclic, edges
        if cycle is not None:
            assert cycle[0] == cycle[-1]
            for up, down in itertools.pairwise(cycle):
                assert up in edges[down]


def test_the_error_of_thousands_of_violations_is_bounded() -> None:
    tasks = tuple(TaskSpec(name=f"-{i}", kind=ShellSpec(script="echo")) for i in range(MAX_TASKS))
    err = rejected(WorkflowSpec(project="p", name="w", tasks=tasks))
    assert len(err.violations) == MAX_VIOLATIONS
    assert err.omitted_violations == MAX_TASKS - MAX_VIOLATIONS
    assert str(err).endswith(f"; and {MAX_TASKS - MAX_VIOLATIONS} more)")
    assert len(str(err).encode()) < MAX_VIOLATIONS * 512
