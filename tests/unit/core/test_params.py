"""Parameter precedence (global < var pool < local < startup) and the idempotency key."""

from __future__ import annotations

import itertools
from types import MappingProxyType

import pytest

from dsched.names import name_problem
from dsched_server.core.params import idempotency_key, resolve_params

LEVELS = ("global_params", "var_pool", "local_params", "startup_params")  # lowest first


def resolve(**levels: dict[str, str]) -> dict[str, str]:
    args = {name: levels.get(name, {}) for name in LEVELS}
    return resolve_params(**args)


@pytest.mark.parametrize(
    "present",
    [c for n in range(1, 5) for c in itertools.combinations(LEVELS, n)],
    ids=lambda c: "+".join(x.split("_")[0] for x in c),
)
def test_the_highest_level_that_sets_a_name_wins(present: tuple[str, ...]) -> None:
    got = resolve(**{level: {"X": level} for level in present})
    assert got == {"X": present[-1]}  # combinations keep LEVELS order: the last is the highest


def test_names_from_every_level_are_merged() -> None:
    got = resolve(
        global_params={"G": "g", "SHARED": "global"},
        var_pool={"OUT": "o", "SHARED": "pool"},
        local_params={"L": "l"},
        startup_params={"S": "s"},
    )
    assert got == {"G": "g", "OUT": "o", "L": "l", "S": "s", "SHARED": "pool"}


def test_startup_parameters_override_an_upstream_out_parameter() -> None:
    got = resolve(var_pool={"DATE": "from-upstream"}, startup_params={"DATE": "20240101"})
    assert got["DATE"] == "20240101"


def test_an_upstream_out_parameter_overrides_a_global_one() -> None:
    got = resolve(global_params={"DATE": "default"}, var_pool={"DATE": "from-upstream"})
    assert got["DATE"] == "from-upstream"


def test_local_parameters_override_the_var_pool() -> None:
    got = resolve(var_pool={"N": "1"}, local_params={"N": "2"})
    assert got["N"] == "2"


def test_no_parameters_resolve_to_an_empty_dict() -> None:
    assert resolve() == {}


def test_values_are_passed_verbatim_without_templating() -> None:
    # Parameters reach the task as environment variables, never spliced into script text; the
    # templates of the levels that have them are expanded before (core/param_values.py).
    tricky = {"A": "${B}", "B": "$(rm -rf /)", "C": "`id`; echo $[yyyyMMdd]", "D": ""}
    assert resolve(global_params=tricky) == tricky


def test_the_result_is_a_fresh_dict_and_the_inputs_are_untouched() -> None:
    global_params = {"A": "1"}
    startup = MappingProxyType({"A": "2"})
    got = resolve_params(
        global_params=global_params, var_pool={}, local_params={}, startup_params=startup
    )
    assert type(got) is dict
    got["A"] = "changed"
    got["NEW"] = "x"
    assert global_params == {"A": "1"}
    assert dict(startup) == {"A": "2"}


def test_levels_must_be_named() -> None:
    with pytest.raises(TypeError):
        resolve_params({}, {}, {}, {})  # type: ignore[call-arg]


# ------------------------------------------------------------------------------- idempotency key


def test_the_idempotency_key_names_instance_task_and_attempt() -> None:
    assert idempotency_key(42, "load", 3) == "42-load-3"


def test_the_idempotency_key_is_stable() -> None:
    assert idempotency_key(7, "t", 1) == idempotency_key(7, "t", 1)


def test_idempotency_keys_are_distinct_even_with_dashes_and_digits_in_names() -> None:
    instances = [1, 12, 123]
    names = ["a", "a-1", "1-a", "a.b", "x-1-2", "2", "12-3"]
    attempts = [1, 2, 12, 23]
    keys = [idempotency_key(i, n, a) for i in instances for n in names for a in attempts]
    assert len(set(keys)) == len(keys)


@pytest.mark.parametrize("name", ["Load.daily-sales_v2", "每日报表", "daily report (v2)"])
def test_the_idempotency_key_is_safe_in_a_file_name_or_an_environment_variable(name: str) -> None:
    assert name_problem(name) is None
    key = idempotency_key(10**12, name, 101)
    # One path component (no separator, not "." or ".."), printable, no NUL.
    assert key.isprintable() and "/" not in key and "\\" not in key and key not in (".", "..")
    assert key.encode("utf-8")
