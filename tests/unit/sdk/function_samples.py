"""Functions for tests/unit/sdk/test_function_source.py: their source must live in a file, at
module level, as a user's would."""

from __future__ import annotations

import functools
import os
from typing import Any


def noop(fn: Any) -> Any:
    return fn


@noop
@functools.lru_cache  # a decorator that is not stripped would wrap the shipped function again
def total(a: str, b: str = "2", *, scale: int = 1) -> dict[str, Any]:
    """Adds two numbers given as text."""
    import json  # imports inside the function travel with it

    # a comment stays
    return {"sum": str((int(a) + int(b)) * scale), "json": json.dumps([a, b])}


def uses_a_global() -> str:
    return os.getcwd()


def default_from_a_global(a: str = os.sep) -> str:
    return a


def with_varargs(*args: str) -> None:
    return None


def with_kwargs(**kwargs: str) -> None:
    return None


def recursive(n: int) -> int:
    return 1 if n <= 1 else n * recursive(n - 1)


async def coroutine() -> None:
    return None


class Holder:
    def method(self) -> None:
        return None


def make_nested() -> Any:
    def nested() -> int:
        return 1

    return nested


def make_closure() -> Any:
    secret = 3

    def closure() -> int:
        return secret

    return closure


def reserved_parameter(PATH: str) -> None:
    return None
