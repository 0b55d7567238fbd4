"""A function as shippable source (:mod:`dsched.function_source`): decorators stripped, what cannot
run from its own text refused with a clear message, and the script calls it with literals."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from dsched.errors import InvalidArgument
from dsched.function_source import function_source
from tests.unit.sdk import function_samples as samples


def _run(script: str) -> str:
    done = subprocess.run(
        [sys.executable, "-I", "-c", script],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return done.stdout


def test_the_def_is_dedented_and_its_decorators_stripped() -> None:
    shipped = function_source(samples.total.__wrapped__)
    assert shipped.name == "total"
    assert shipped.source.startswith('def total(a: str, b: str = "2", *, scale: int = 1)')
    assert "@" not in shipped.source
    assert "# a comment stays" in shipped.source
    assert shipped.parameters == ("a", "b", "scale")
    assert shipped.optional == {"b", "scale"}


def test_the_script_calls_the_function_with_literal_kwargs() -> None:
    shipped = function_source(samples.total.__wrapped__)
    script = shipped.script({"a": "3", "scale": 2}) + "print(total('1'))\n"
    assert script.startswith("from __future__ import annotations\n")
    assert _run(script) == "{'sum': '3', 'json': '[\"1\", \"2\"]'}\n"


def test_a_recursive_function_may_name_itself() -> None:
    assert function_source(samples.recursive).parameters == ("n",)


@pytest.mark.parametrize(
    ("fn", "why"),
    [
        (lambda: 1, "a lambda has no source of its own"),
        (samples.make_nested(), "defined inside another function"),
        (samples.make_closure(), "defined inside another function"),
        (samples.Holder.method, "it is a method"),
        (samples.coroutine, "coroutines and generators"),
        (samples.uses_a_global, "module-level names that do not travel with it: os"),
        (samples.default_from_a_global, "a default is not a literal: os.sep"),
        (samples.with_varargs, "no *args"),
        (samples.with_kwargs, "no *args"),
        (len, "only a plain function"),
        (samples.total, "only a plain function"),  # the lru_cache wrapper, not a def
    ],
)
def test_what_cannot_run_from_its_text_is_refused(fn: Any, why: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        function_source(fn)
    assert caught.value.metadata.get("function")
    assert why in str(caught.value)


def test_a_function_typed_at_the_prompt_is_refused() -> None:
    namespace: dict[str, Any] = {}
    exec("def typed():\n    return 1\n", namespace)
    with pytest.raises(InvalidArgument, match="its source cannot be read"):
        function_source(namespace["typed"])


@pytest.mark.parametrize(
    ("kwargs", "why"),
    [
        ({"a": "1", "c": "2"}, "it takes no parameter c"),
        ({"b": "1"}, "no value given for a"),
        ({"a": object()}, "the value of a is not a literal"),
        ({"a": float("nan")}, "the value of a is not a literal"),
    ],
)
def test_the_call_takes_only_its_parameters_as_literals(kwargs: dict[str, Any], why: str) -> None:
    shipped = function_source(samples.total.__wrapped__)
    with pytest.raises(InvalidArgument, match=why):
        shipped.script(kwargs)
