"""The var pool takes a task's OUT parameters only within the size limits."""

from __future__ import annotations

from dsched.spec import MAX_PARAMS, MAX_PARAMS_BYTES, MAX_VAR_POOL_PARAMS
from dsched_server.core.var_pool import merge_violation

KIB = 1024


def test_parameters_that_fit_merge() -> None:
    assert merge_violation({"a": "1"}, {"b": "2", "a": "3"}) is None


def test_replacing_a_value_counts_the_new_size_only() -> None:
    pool = {"a": "x" * (200 * KIB)}
    assert merge_violation(pool, {"a": "y" * (200 * KIB)}) is None


def test_a_pool_over_the_byte_limit_is_refused() -> None:
    pool = {f"p{i}": "x" * (60 * KIB) for i in range(4)}
    why = merge_violation(pool, {"more": "x" * (20 * KIB)})
    assert why is not None and "var pool" in why and str(MAX_PARAMS_BYTES) in why


def test_a_pool_over_the_count_limit_is_refused() -> None:
    pool = {f"p{i}": "" for i in range(MAX_VAR_POOL_PARAMS)}
    assert merge_violation(pool, {"p0": "again"}) is None
    assert merge_violation(pool, {"new": ""}) is not None


def test_out_parameters_over_a_task_s_limits_are_refused_alone() -> None:
    assert merge_violation({}, {f"p{i}": "" for i in range(MAX_PARAMS + 1)}) is not None
    assert merge_violation({}, {"big": "x" * (MAX_PARAMS_BYTES + 1)}) is not None
