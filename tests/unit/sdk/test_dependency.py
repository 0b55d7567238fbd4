"""The DEPENDENT task's definition: the SDK builder, validation, the wire and the store's JSON."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from dsched import AllOf, AnyOf, Dependency, Dependent, Shell, Workflow
from dsched.convert import task_spec_from_proto, task_spec_to_proto, workflow_spec_to_proto
from dsched.dependency import (
    DATE_VALUES,
    MAX_GROUPS,
    PREVIOUS_CYCLE,
    Cycle,
    DependencyFailure,
    DependencyGroup,
    DependencyItem,
    DependentSpec,
    Relation,
)
from dsched.errors import FieldViolation, InvalidArgument
from dsched.spec import TaskSpec, WorkflowSpec, encoded_size, validate_workflow
from dsched.v1 import dependent_pb2
from dsched_server.store.codec import task_from_json, task_to_json, task_type

ITEM = DependencyItem(project="p", workflow="up", cycle=Cycle.DAY, date_value="last1Days")


def spec_with(kind: DependentSpec, *, name: str = "report") -> WorkflowSpec:
    return WorkflowSpec(project="p", name=name, tasks=(TaskSpec(name="wait", kind=kind),))


def violations(kind: DependentSpec, *, name: str = "report") -> list[FieldViolation]:
    found, _ = validate_workflow(spec_with(kind, name=name))
    return found


def one(*items: DependencyItem, **options: object) -> DependentSpec:
    return DependentSpec(groups=(DependencyGroup(items=items),), **options)  # type: ignore[arg-type]


class TestBuilder:
    def test_bare_items_are_one_group_and_groups_follow(self) -> None:
        with Workflow("report", project="p") as wf:
            wait = Dependent(
                "wait",
                Dependency("p", "a", "day", "today"),
                Dependency("p", "b", "WEEK", "lastWeek", task="load"),
                AnyOf(Dependency("p", "c", Cycle.MONTH, "lastMonthEnd")),
                relation="or",
                on_failure="wait",
                failure_wait=600,
                check_interval=30,
            )
            wait >> Shell("publish", "true")
        kind = wf.to_spec().tasks[0].kind
        assert isinstance(kind, DependentSpec)
        assert [g.relation for g in kind.groups] == [Relation.AND, Relation.OR]
        assert kind.groups[0].items[1] == DependencyItem(
            project="p", workflow="b", task="load", cycle=Cycle.WEEK, date_value="lastWeek"
        )
        assert (kind.relation, kind.on_failure) == (Relation.OR, DependencyFailure.WAIT)
        assert (kind.failure_wait, kind.check_interval) == (
            timedelta(minutes=10),
            timedelta(seconds=30),
        )

    def test_an_unknown_cycle_is_refused_when_written(self) -> None:
        with pytest.raises(InvalidArgument, match="cycle must be one of"):
            Dependency("p", "a", "fortnight", "today")

    def test_all_of(self) -> None:
        group = AllOf(ITEM, ITEM)
        assert (group.relation, len(group.items)) == (Relation.AND, 2)


class TestValidation:
    def test_a_valid_dependent_passes(self) -> None:
        assert violations(one(ITEM)) == []

    @pytest.mark.parametrize(
        ("cycle", "value"), [(Cycle.DAY, "lastWeek"), (Cycle.HOUR, "today"), (Cycle.WEEK, "")]
    )
    def test_a_date_value_of_another_cycle_names_the_field(self, cycle: Cycle, value: str) -> None:
        bad = DependencyItem(project="p", workflow="up", cycle=cycle, date_value=value)
        (v,) = violations(one(bad))
        assert v.field == "workflow.tasks[0].dependent.groups[0].items[0].date_value"

    @pytest.mark.parametrize(
        "value",
        sorted({v for vs in DATE_VALUES.values() for v in vs} - PREVIOUS_CYCLE),
    )
    def test_depending_on_itself_for_the_current_cycle_is_refused(self, value: str) -> None:
        cycle = next(c for c, values in DATE_VALUES.items() if value in values)
        self_item = DependencyItem(project="p", workflow="report", cycle=cycle, date_value=value)
        (v,) = violations(one(self_item))
        assert v.field == "workflow.tasks[0].dependent.groups[0].items[0].workflow"
        assert "previous cycle" in v.description

    @pytest.mark.parametrize("value", sorted(PREVIOUS_CYCLE))
    def test_depending_on_its_previous_cycle_is_allowed(self, value: str) -> None:
        cycle = next(c for c, values in DATE_VALUES.items() if value in values)
        self_item = DependencyItem(project="p", workflow="report", cycle=cycle, date_value=value)
        assert violations(one(self_item)) == []

    def test_the_same_workflow_name_in_another_project_is_not_itself(self) -> None:
        other = DependencyItem(project="q", workflow="report", cycle=Cycle.DAY, date_value="today")
        assert violations(one(other)) == []

    def test_no_groups_and_empty_groups(self) -> None:
        assert [v.field for v in violations(DependentSpec(groups=()))] == [
            "workflow.tasks[0].dependent.groups"
        ]
        assert [v.field for v in violations(one())] == [
            "workflow.tasks[0].dependent.groups[0].items"
        ]

    def test_too_many_groups(self) -> None:
        groups = tuple(DependencyGroup(items=(ITEM,)) for _ in range(MAX_GROUPS + 1))
        (v,) = violations(DependentSpec(groups=groups))
        assert v.field == "workflow.tasks[0].dependent.groups"

    @pytest.mark.parametrize(
        ("options", "field"),
        [
            ({"check_interval": timedelta(0)}, "check_interval"),
            ({"check_interval": timedelta(hours=2)}, "check_interval"),
            ({"failure_wait": timedelta(seconds=-1)}, "failure_wait"),
            ({"failure_wait": timedelta(days=8)}, "failure_wait"),
        ],
    )
    def test_durations_out_of_range(self, options: dict[str, timedelta], field: str) -> None:
        (v,) = violations(one(ITEM, **options))
        assert v.field == f"workflow.tasks[0].dependent.{field}"

    def test_bad_names_are_reported_per_item(self) -> None:
        bad = DependencyItem(
            project="", workflow="a/b", task="x\ny", cycle=Cycle.DAY, date_value="today"
        )
        fields = sorted(v.field for v in violations(one(bad)))
        prefix = "workflow.tasks[0].dependent.groups[0].items[0]"
        assert fields == [f"{prefix}.project", f"{prefix}.task", f"{prefix}.workflow"]


KIND = DependentSpec(
    groups=(
        DependencyGroup(items=(ITEM,)),
        DependencyGroup(
            items=(
                DependencyItem(
                    project="p", workflow="x", task="t", cycle=Cycle.HOUR, date_value="last3Hours"
                ),
            ),
            relation=Relation.OR,
        ),
    ),
    relation=Relation.OR,
    on_failure=DependencyFailure.WAIT,
    failure_wait=timedelta(minutes=5),
    check_interval=timedelta(seconds=3),
)


def test_the_wire_round_trips() -> None:
    task = TaskSpec(name="wait", kind=KIND)
    out: list[FieldViolation] = []
    assert task_spec_from_proto(task_spec_to_proto(task), "t", out) == task
    assert out == []


def test_unset_enums_and_durations_take_their_defaults_but_a_cycle_is_required() -> None:
    msg = task_spec_to_proto(TaskSpec(name="wait", kind=one(ITEM)))
    msg.dependent.ClearField("check_interval")
    msg.dependent.relation = dependent_pb2.DEPENDENCY_RELATION_UNSPECIFIED
    msg.dependent.groups[0].items[0].cycle = dependent_pb2.DEPENDENCY_CYCLE_UNSPECIFIED
    out: list[FieldViolation] = []
    decoded = task_spec_from_proto(msg, "t", out)
    assert isinstance(decoded.kind, DependentSpec)
    assert decoded.kind.check_interval == timedelta(seconds=10)
    assert decoded.kind.relation is Relation.AND
    assert [v.field for v in out] == ["t.dependent.groups[0].items[0].cycle"]


def test_an_unknown_enum_number_is_a_violation() -> None:
    msg = task_spec_to_proto(TaskSpec(name="wait", kind=one(ITEM)))
    msg.dependent.on_failure = 99  # type: ignore[assignment]  # a number from a newer client
    out: list[FieldViolation] = []
    task_spec_from_proto(msg, "t", out)
    assert [v.field for v in out] == ["t.dependent.on_failure"]


def test_the_store_json_round_trips() -> None:
    task = TaskSpec(name="wait", kind=KIND)
    assert task_type(task) == "DEPENDENT"
    assert task_from_json("wait", "DEPENDENT", task_to_json(task), ()) == task


@pytest.mark.parametrize("seed", range(50))
def test_the_counted_size_bounds_protobuf_s(seed: int) -> None:
    rng = random.Random(seed)
    groups = tuple(
        DependencyGroup(
            items=tuple(
                DependencyItem(
                    project="p" * rng.randrange(1, 60),
                    workflow="w" * rng.randrange(1, 60),
                    task="t" * rng.randrange(0, 60),
                    cycle=rng.choice(list(Cycle)),
                    date_value=rng.choice(["today", "last7Days", "lastMonthEnd"]),
                )
                for _ in range(rng.randrange(1, 20))
            ),
            relation=rng.choice(list(Relation)),
        )
        for _ in range(rng.randrange(1, 16))
    )
    spec = spec_with(DependentSpec(groups=groups, relation=rng.choice(list(Relation))))
    exact = workflow_spec_to_proto(spec).ByteSize()
    counted = encoded_size(spec)
    # slack: a task's scalars (74), the DEPENDENT's (42: two enums, two durations), each group's
    # relation (2) when left unset
    assert exact <= counted <= exact + 74 + 42 + 2 * len(groups)
