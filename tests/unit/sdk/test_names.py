"""The parameter name grammar, the reserved set and its documentation (dsched.names)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dsched.errors import FieldViolation
from dsched.names import (
    INVALID_PARAMETER_NAME,
    MAX_NAME_LENGTH,
    MAX_PARAM_NAME_LENGTH,
    RESERVED_NAMES,
    RESERVED_PARAMETER_NAME,
    RESERVED_PREFIXES,
    _character_problem,
    name_problem,
    param_name_problem,
    param_name_violation,
    reason_for,
    reserved_because,
    worker_group_violation,
)
from tests.reserved import KNOWN_DANGEROUS

README = Path(__file__).resolve().parents[3] / "README.md"


def spellings(name: str) -> list[str]:
    """The name as written, in lower case and in a mixed case."""
    mixed = "".join(c.lower() if i % 2 else c.upper() for i, c in enumerate(name))
    return sorted({name, name.lower(), mixed})


EVERY_RESERVED_NAME = [s for name in RESERVED_NAMES for s in spellings(name)]
PREFIX_MEMBERS = [s for prefix in RESERVED_PREFIXES for s in spellings(prefix + "X_1")]


@pytest.mark.parametrize("name", EVERY_RESERVED_NAME)
def test_every_reserved_name_is_refused_in_any_case(name: str) -> None:
    problem = param_name_problem(name)
    assert problem is not None
    reason, description = problem
    assert reason == RESERVED_PARAMETER_NAME
    assert description.startswith(f"parameter name {name!r} is reserved: ")
    assert RESERVED_NAMES[name.upper()] in description


@pytest.mark.parametrize("name", PREFIX_MEMBERS)
def test_every_member_of_a_reserved_family_is_refused_in_any_case(name: str) -> None:
    problem = param_name_problem(name)
    assert problem is not None and problem[0] == RESERVED_PARAMETER_NAME


@pytest.mark.parametrize("name", KNOWN_DANGEROUS)
def test_the_known_dangerous_members_of_the_families_are_covered(name: str) -> None:
    assert reserved_because(name) is not None


@pytest.mark.parametrize(
    "name",
    [
        "day",
        "rows",
        "MY_PATH",  # contains a reserved name, is not one
        "PATHS",
        "XPYTHON",
        "LDAP_URL",  # LD_ is the prefix, not LD
        "NODE_ENV",  # only NODE_OPTIONS and NODE_PATH are reserved
        "JAVA_OPTS",  # read by launch scripts, not by the JVM
        "LC_ALL",
        "LANG",
        "TZ",
        "USER",
        "user",
        "DSCHEDX",
        "_",
        "a" * MAX_PARAM_NAME_LENGTH,
    ],
)
def test_ordinary_names_pass(name: str) -> None:
    assert param_name_problem(name) is None
    assert reserved_because(name) is None


@pytest.mark.parametrize(
    "name",
    [
        "",
        "1a",
        "a-b",
        "a b",
        "a.b",
        "a=b",
        "a\n",  # `$` would match before a final newline; the grammar ends at \Z
        "\nPATH",
        "é",
        # Non-ASCII letters whose upper case is ASCII: refused by the grammar before any folding.
        "\u0131fs",  # dotless i: upper() is "IFS"
        "\u017fhell",  # long s: upper() is "SHELL"
        "\uff30\uff21\uff34\uff28",  # fullwidth PATH
        "a" * (MAX_PARAM_NAME_LENGTH + 1),
        "BASH_FUNC_ls%%",
    ],
)
def test_names_outside_the_grammar_are_invalid_not_reserved(name: str) -> None:
    problem = param_name_problem(name)
    assert problem is not None and problem[0] == INVALID_PARAMETER_NAME
    assert "is not an identifier" in problem[1]


def test_a_violation_carries_its_reason_and_the_exact_field_path() -> None:
    assert param_name_violation("params", "IFS") == FieldViolation(
        "params['IFS']",
        "parameter name 'IFS' is reserved: bash or sh reads it at start-up or it changes how "
        "they run (names are compared without regard to case)",
        RESERVED_PARAMETER_NAME,
    )
    bad = param_name_violation("workflow.tasks[3].params", "a-b")
    assert bad is not None
    assert (bad.field, bad.reason) == ("workflow.tasks[3].params['a-b']", INVALID_PARAMETER_NAME)
    assert param_name_violation("params", "ok") is None


def test_the_reason_of_a_refusal_names_the_most_specific_problem() -> None:
    plain = FieldViolation("x", "bad")
    invalid = FieldViolation("p['1']", "bad", INVALID_PARAMETER_NAME)
    reserved = FieldViolation("p['PATH']", "bad", RESERVED_PARAMETER_NAME)
    assert reason_for([plain], "INVALID_WORKFLOW") == "INVALID_WORKFLOW"
    assert reason_for([plain, invalid], "INVALID_WORKFLOW") == INVALID_PARAMETER_NAME
    assert reason_for([invalid, reserved, plain], "X") == RESERVED_PARAMETER_NAME
    assert reason_for([], "X") == "X"


@pytest.mark.parametrize("group", ["default", "etl-1", "a.b_c", "g" * 64])
def test_worker_groups_are_ascii_names(group: str) -> None:
    assert worker_group_violation("worker_group", group) is None


@pytest.mark.parametrize("group", ["", "每日", "a b", "-a", "a/b", "g" * 65])
def test_other_worker_groups_are_refused(group: str) -> None:
    found = worker_group_violation("worker_group", group)
    assert found is not None and found.field == "worker_group"


def test_the_readme_lists_the_reserved_set_exactly() -> None:
    """Users read the set in the README; it must be the one the code enforces."""
    text = README.read_text()
    section = text[text.index("**Reserved parameter names**") :]
    section = section[: section.index("\n\n")]
    listed = set(re.findall(r"`([A-Z0-9_]+)(\*?)`", section))
    assert {n for n, star in listed if not star} == set(RESERVED_NAMES)
    assert {n for n, star in listed if star} == set(RESERVED_PREFIXES)


def test_the_ascii_fast_path_of_name_problem_agrees_with_the_character_checks() -> None:
    # name_problem passes common ASCII names without looking each character up; every ASCII
    # character at the start, in the middle and at the end must be judged as the full checks do.
    ascii_chars = [chr(c) for c in range(128)]
    names = [c for c in ascii_chars]
    names += [f"{c}ab" for c in ascii_chars] + [f"a{c}b" for c in ascii_chars]
    names += [f"ab{c}" for c in ascii_chars] + ["load 2", "a-b_c.d", "9x", "x" * MAX_NAME_LENGTH]
    for name in names:
        assert name_problem(name) == _character_problem(name), repr(name)
    assert name_problem("load_2") is None and name_problem("a/b") is not None
