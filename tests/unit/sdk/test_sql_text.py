"""dsched.sql_text: statements cut where a database would cut them, and every ${name} bound as a
value (never part of the text), whatever the value holds."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsched.sql_text import Bound, SqlTextError, split


def one(sql: str, dialect: str = "standard") -> tuple[str, list[str]]:
    (statement,) = split(sql, dialect)  # type: ignore[arg-type]
    return statement.render("format", {"a": "A", "b": "B'; DROP TABLE t; --"})


def test_a_reference_becomes_a_placeholder() -> None:
    assert one("SELECT * FROM t WHERE x = ${a} AND y = ${b}") == (
        "SELECT * FROM t WHERE x = %s AND y = %s",
        ["A", "B'; DROP TABLE t; --"],
    )


def test_qmark_style_and_percent_escaping() -> None:
    (statement,) = split("SELECT '100%', x % 2 FROM t WHERE x = ${a}")
    assert statement.render("format", {"a": "1"}) == (
        "SELECT '100%%', x %% 2 FROM t WHERE x = %s",
        ["1"],
    )
    assert statement.render("qmark", {"a": "1"}) == (
        "SELECT '100%', x % 2 FROM t WHERE x = ?",
        ["1"],
    )


def test_a_literal_holding_references_is_one_bound_value() -> None:
    assert one("SELECT 1 WHERE n LIKE '%${a}%' OR m = '${b}'") == (
        "SELECT 1 WHERE n LIKE %s OR m = %s",
        ["%A%", "B'; DROP TABLE t; --"],
    )
    assert one("SELECT 'it''s ${a}'") == ("SELECT %s", ["it's A"])


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 1; SELECT 2",
        "SELECT ';'; SELECT 2",
        "INSERT INTO t VALUES (1);\nDELETE FROM t",
    ],
)
def test_statements_are_counted(sql: str) -> None:
    assert len(split(sql)) == 2


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT ';' -- ; not a statement",
        "SELECT 1 /* ; */",
        'SELECT ";" AS "a;b"',
        "SELECT $$;$$",
        "SELECT $tag$ ; $tag$",
        "SELECT E'\\'; '",
        "SELECT 1;",
        "SELECT 1; -- trailing comment",
        "  ;  ; SELECT 1 ; ",
    ],
)
def test_one_statement(sql: str) -> None:
    assert len(split(sql)) == 1


def test_mysql_rules() -> None:
    assert len(split("SELECT 'a\\';'; # ; comment", "mysql")) == 1
    assert len(split("SELECT `a;b` FROM t", "mysql")) == 1
    assert one("SELECT 'it''s ${a}'", "mysql") == ("SELECT %s", ["it's A"])


@pytest.mark.parametrize(
    ("sql", "problem"),
    [
        ('SELECT "${a}"', "quoted name"),
        ("SELECT $$ ${a} $$", r"\$-quoted"),
        ("SELECT E'\\n${a}'", "backslash"),
        ("SELECT ${system.biz.date}", "not a parameter reference"),
        ("SELECT '${a}", "never closes"),
        ("SELECT /* ", "never closes"),
        ("SELECT ${a", "never closes"),
    ],
)
def test_refused(sql: str, problem: str) -> None:
    with pytest.raises(SqlTextError, match=problem):
        split(sql)


def test_comments_keep_references() -> None:
    (statement,) = split("SELECT 1 -- ${a}\n")
    assert not any(isinstance(p, Bound) for p in statement.pieces)


def test_an_unset_parameter_is_an_error() -> None:
    (statement,) = split("SELECT ${missing}")
    with pytest.raises(SqlTextError, match="'missing' is not set"):
        statement.render("format", {})


@given(st.text())
def test_no_value_ever_reaches_the_text(value: str) -> None:
    (statement,) = split("SELECT * FROM t WHERE a = ${v} AND b LIKE '%${v}%'")
    text, values = statement.render("format", {"v": value})
    assert text == "SELECT * FROM t WHERE a = %s AND b LIKE %s"
    assert values == [value, f"%{value}%"]
