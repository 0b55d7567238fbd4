"""The DAG of a workflow version: topological order, neighbours, and the scope of a run."""

from __future__ import annotations

import random

import pytest

from dsched.options import TaskDependType
from dsched_server.core.dag import Dag

from .specs import chain, task, workflow

ONLY, PRE, POST = TaskDependType.TASK_ONLY, TaskDependType.TASK_PRE, TaskDependType.TASK_POST


def diamond() -> Dag:
    #    a
    #   / \
    #  b   c
    #   \ /
    #    d -> e
    return Dag(
        workflow(task("a"), task("b", "a"), task("c", "a"), task("d", "b", "c"), task("e", "d"))
    )


def assert_topological(dag: Dag) -> None:
    assert sorted(dag.order) == sorted(dag.tasks)
    for name in dag.order:
        for up in dag.upstream[name]:
            assert dag.position(up) < dag.position(name), (up, name)


# ------------------------------------------------------------------------------- structure


def test_neighbours_mirror_each_other() -> None:
    dag = diamond()
    assert dag.upstream == {"a": (), "b": ("a",), "c": ("a",), "d": ("b", "c"), "e": ("d",)}
    assert dag.downstream == {"a": ("b", "c"), "b": ("d",), "c": ("d",), "d": ("e",), "e": ()}


def test_downstream_lists_follow_definition_order() -> None:
    dag = Dag(workflow(task("root"), task("z", "root"), task("y", "root"), task("x", "root")))
    assert dag.downstream["root"] == ("z", "y", "x")


# ------------------------------------------------------------------------------- order


def test_order_is_topological_for_a_diamond() -> None:
    dag = diamond()
    assert dag.order == ("a", "b", "c", "d", "e")
    assert [dag.position(n) for n in dag.order] == [0, 1, 2, 3, 4]


def test_independent_tasks_keep_definition_order() -> None:
    dag = Dag(workflow(task("c"), task("a"), task("b")))
    assert dag.order == ("c", "a", "b")


def test_order_does_not_depend_on_the_order_of_upstream_lists() -> None:
    one = Dag(workflow(task("a"), task("b"), task("c"), task("d", "a", "b", "c")))
    two = Dag(workflow(task("a"), task("b"), task("c"), task("d", "c", "b", "a")))
    assert one.order == two.order == ("a", "b", "c", "d")


def test_tasks_defined_before_their_upstream_are_still_ordered_after_it() -> None:
    dag = Dag(workflow(task("late", "mid"), task("mid", "early"), task("early")))
    assert dag.order == ("early", "mid", "late")


def test_order_is_deterministic_and_valid_for_random_dags() -> None:
    rng = random.Random(1234)
    for _ in range(50):
        n = rng.randint(1, 40)
        names = [f"n{i}" for i in range(n)]
        specs = [
            task(names[i], *rng.sample(names[:i], rng.randint(0, min(i, 4)))) for i in range(n)
        ]
        rng.shuffle(specs)  # definition order need not be topological
        first, second = Dag(workflow(*specs)), Dag(workflow(*specs))
        assert first.order == second.order
        assert_topological(first)


def test_a_cyclic_spec_is_refused() -> None:
    spec = workflow(task("a", "b"), task("b", "a"), validate=False)
    with pytest.raises(ValueError, match="cycle"):
        Dag(spec)


def test_a_deep_chain_needs_no_recursion() -> None:
    n = 5000
    dag = Dag(workflow(*chain(n), validate=False))  # above MAX_TASKS: the Dag itself has no limit
    assert dag.order == tuple(f"t{i}" for i in range(n))
    assert dag.ancestors(["t4999"]) == {f"t{i}" for i in range(n - 1)}
    assert dag.descendants(["t0"]) == {f"t{i}" for i in range(1, n)}
    assert dag.scope(["t2500"], PRE) == frozenset(f"t{i}" for i in range(2501))
    assert dag.scope(["t2500"], POST) == frozenset(f"t{i}" for i in range(2500, n))


def test_a_deep_chain_defined_backwards_is_ordered() -> None:
    n = 5000
    dag = Dag(workflow(*reversed(chain(n)), validate=False))
    assert dag.order == tuple(f"t{i}" for i in range(n))


# ------------------------------------------------------------------------------- walks


def test_ancestors_and_descendants_exclude_the_start() -> None:
    dag = diamond()
    assert dag.ancestors(["d"]) == {"a", "b", "c"}
    assert dag.ancestors(["a"]) == set()
    assert dag.descendants(["b"]) == {"d", "e"}
    assert dag.descendants(["e"]) == set()


def test_walks_from_several_tasks_take_the_union() -> None:
    dag = diamond()
    assert dag.ancestors(["b", "c"]) == {"a"}
    assert dag.descendants(["b", "c"]) == {"d", "e"}
    assert dag.descendants([]) == set()


def test_a_start_task_reachable_from_another_is_included_in_the_walk() -> None:
    dag = diamond()
    assert dag.descendants(["a", "d"]) == {"b", "c", "d", "e"}
    assert dag.ancestors(["e", "b"]) == {"a", "b", "c", "d"}


# ------------------------------------------------------------------------------- scope


@pytest.mark.parametrize("depend", list(TaskDependType))
def test_empty_start_covers_every_task(depend: TaskDependType) -> None:
    assert diamond().scope([], depend) == frozenset("abcde")


def test_task_only_covers_just_the_start_tasks() -> None:
    assert diamond().scope(["b", "d"], ONLY) == frozenset({"b", "d"})


def test_task_pre_adds_ancestors() -> None:
    assert diamond().scope(["d"], PRE) == frozenset({"a", "b", "c", "d"})
    assert diamond().scope(["b"], PRE) == frozenset({"a", "b"})


def test_task_post_adds_descendants() -> None:
    assert diamond().scope(["b"], POST) == frozenset({"b", "d", "e"})
    assert diamond().scope(["b", "c"], POST) == frozenset({"b", "c", "d", "e"})


def test_scope_accepts_any_iterable_once() -> None:
    assert diamond().scope(iter(["c"]), POST) == frozenset({"c", "d", "e"})


@pytest.mark.parametrize("depend", list(TaskDependType))
def test_scope_rejects_unknown_start_tasks_for_every_depend_type(depend: TaskDependType) -> None:
    # A scope naming a task the DAG does not have would reach Execution and fail there much later.
    with pytest.raises(ValueError, match="ghost"):
        diamond().scope(["a", "ghost"], depend)


def test_wide_fan_out_and_fan_in() -> None:
    n = 5000
    leaves = [task(f"l{i}", "src") for i in range(n)]
    dag = Dag(
        workflow(task("src"), *leaves, task("sink", *(t.name for t in leaves)), validate=False)
    )
    assert dag.order[0] == "src"
    assert dag.order[-1] == "sink"
    assert len(dag.downstream["src"]) == n
    assert dag.ancestors(["sink"]) == {"src"} | {t.name for t in leaves}
    assert_topological(dag)
