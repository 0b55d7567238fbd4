"""SQL text as dsched reads it: statements, and the ``${name}`` references that become bound
parameters (README "SQL tasks").

Pure and shared: the SDK and the master check a definition with it, and the worker's SQL program
turns each statement into the driver's text and parameter list with it, so a statement is cut and
bound the same way everywhere.

The scanner knows the lexical parts where a ``;`` or a ``${`` is not what it seems: quoted
literals (``'...'`` with ``''``, and backslash escapes in ``E'...'`` and on MySQL), quoted
identifiers (``"..."``, MySQL's ``\\`...\\```), PostgreSQL's dollar quoting (``$tag$...$tag$``) and
comments (``--``, ``/* */``, MySQL's ``#``). A reference

- in the text is replaced by a placeholder bound to the parameter's value;
- inside a ``'...'`` literal (without backslash escapes) makes the whole literal one
  placeholder, bound to the literal's content with each reference replaced by its value
  (``LIKE '%${name}%'`` binds ``%<value>%``);
- in a comment is left alone; anywhere else (an identifier, a dollar-quoted body, an escaped
  literal) is refused: there is no safe way to bind it there.

A value is never part of the SQL text the database parses, so ``x'; DROP TABLE t; --`` stays a
string.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

Dialect = Literal["standard", "mysql"]
Style = Literal["format", "qmark"]  # %s (psycopg, PyMySQL) or ? (sqlite3)

_REF = re.compile(r"\$\{([^}]*)\}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_DOLLAR_TAG = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")


class SqlTextError(ValueError):
    """The text cannot be cut or bound safely (the message says where)."""


@dataclass(frozen=True, slots=True)
class Bound:
    """A placeholder: the template of its value (text and ``${name}`` references)."""

    template: str


Piece = str | Bound


@dataclass(frozen=True, slots=True)
class Statement:
    """One statement: SQL text and placeholders, in order."""

    pieces: tuple[Piece, ...]

    @property
    def names(self) -> tuple[str, ...]:
        """The parameters it references, in order of first use."""
        seen: dict[str, None] = {}
        for piece in self.pieces:
            if isinstance(piece, Bound):
                seen.update(dict.fromkeys(m.group(1) for m in _REF.finditer(piece.template)))
        return tuple(seen)

    def render(self, style: Style, params: Mapping[str, str]) -> tuple[str, list[str]]:
        """The driver's text and its parameter values. Raises SqlTextError for a reference to a
        parameter that is not set."""
        text: list[str] = []
        values: list[str] = []
        for piece in self.pieces:
            if isinstance(piece, Bound):
                text.append("%s" if style == "format" else "?")
                values.append(expand(piece.template, params))
            else:
                text.append(piece.replace("%", "%%") if style == "format" else piece)
        return "".join(text), values


def expand(template: str, params: Mapping[str, str]) -> str:
    """``template`` with each ``${name}`` replaced by the parameter's value (a value for a
    placeholder or a procedure's argument, never SQL text)."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in params:
            raise SqlTextError(f"parameter {name!r} is not set")
        return params[name]

    return _REF.sub(one, template)


def check_refs(text: str, where: str) -> None:
    """Raises unless every ``${...}`` in ``text`` names a parameter (an identifier)."""
    for match in _REF.finditer(text):
        if not _NAME.match(match.group(1)):
            raise SqlTextError(
                f"{where}: ${{{match.group(1)}}} is not a parameter reference (an identifier; "
                "put other values such as ${system.biz.date} in a parameter)"
            )


def split(sql: str, dialect: Dialect = "standard") -> list[Statement]:
    """The statements of ``sql`` (empty ones dropped). Raises SqlTextError where a reference
    cannot be bound or the text ends inside a literal or a comment."""
    return _Scanner(sql, dialect).run()


class _Scanner:
    def __init__(self, sql: str, dialect: Dialect) -> None:
        self.sql = sql
        self.mysql = dialect == "mysql"
        self.i = 0
        self.statements: list[Statement] = []
        self.pieces: list[Piece] = []
        self.text: list[str] = []

    def run(self) -> list[Statement]:
        sql = self.sql
        while self.i < len(sql):
            c = sql[self.i]
            if c == ";":
                self._end_statement()
                self.i += 1
            elif c == "'":
                escaped = self.mysql or (
                    self.i > 0 and sql[self.i - 1] in "eE" and self._word_start()
                )
                self._literal(escaped)
            elif c == '"' or (c == "`" and self.mysql):
                self._quoted(c)
            elif sql.startswith("--", self.i) or (c == "#" and self.mysql):
                end = sql.find("\n", self.i)
                self._take(len(sql) if end < 0 else end + 1)
            elif sql.startswith("/*", self.i):
                end = sql.find("*/", self.i + 2)
                if end < 0:
                    raise SqlTextError(f"a comment opened at character {self.i + 1} never closes")
                self._take(end + 2)
            elif c == "$" and sql.startswith("${", self.i):
                end = sql.find("}", self.i)
                if end < 0:
                    raise SqlTextError(f"${{ at character {self.i + 1} never closes")
                ref = sql[self.i : end + 1]
                check_refs(ref, f"at character {self.i + 1}")
                self._flush_text()
                self.pieces.append(Bound(ref))
                self.i = end + 1
            elif c == "$" and not self.mysql and self._dollar_quote():
                continue
            else:
                self._take(self.i + 1)
        self._end_statement()
        return self.statements

    def _word_start(self) -> bool:
        # E'...' only when the E is a word of its own (not the end of an identifier like "name").
        j = self.i - 2
        return j < 0 or not (self.sql[j].isalnum() or self.sql[j] in "_$")

    def _take(self, end: int) -> None:
        self.text.append(self.sql[self.i : end])
        self.i = end

    def _flush_text(self) -> None:
        if self.text:
            self.pieces.append("".join(self.text))
            self.text = []

    def _end_statement(self) -> None:
        self._flush_text()
        if any(isinstance(p, Bound) or _has_code(p) for p in self.pieces):
            self.statements.append(Statement(tuple(self.pieces)))
        self.pieces = []

    def _literal(self, escaped: bool) -> None:
        start, sql, j = self.i, self.sql, self.i + 1
        content: list[str] = []
        while True:
            if j >= len(sql):
                raise SqlTextError(f"a string opened at character {start + 1} never closes")
            c = sql[j]
            if escaped and c == "\\":
                content.append(sql[j : j + 2])
                j += 2
            elif c == "'" and sql.startswith("''", j):
                content.append("'")
                j += 2
            elif c == "'":
                break
            else:
                content.append(c)
                j += 1
        body = "".join(content)
        if "${" not in body:
            self._take(j + 1)
            return
        if escaped and "\\" in body:
            raise SqlTextError(
                f"${{...}} inside the string at character {start + 1}: backslash escapes cannot be "
                "bound; write the reference outside it"
            )
        check_refs(body, f"the string at character {start + 1}")
        self._flush_text()
        self.pieces.append(Bound(body))
        self.i = j + 1

    def _quoted(self, quote: str) -> None:
        end = self.sql.find(quote, self.i + 1)
        while end >= 0 and self.sql.startswith(quote * 2, end):
            end = self.sql.find(quote, end + 2)
        if end < 0:
            raise SqlTextError(f"a quoted name opened at character {self.i + 1} never closes")
        if "${" in self.sql[self.i : end]:
            raise SqlTextError(
                f"${{...}} inside the quoted name at character {self.i + 1}: a name cannot be bound"
            )
        self._take(end + 1)

    def _dollar_quote(self) -> bool:
        match = _DOLLAR_TAG.match(self.sql, self.i)
        if match is None or (
            self.i > 0 and (self.sql[self.i - 1].isalnum() or self.sql[self.i - 1] == "_")
        ):
            return False
        tag = match.group(0)
        end = self.sql.find(tag, match.end())
        if end < 0:
            raise SqlTextError(f"a $-quoted string opened at character {self.i + 1} never closes")
        if "${" in self.sql[match.end() : end]:
            raise SqlTextError(
                f"${{...}} inside the $-quoted string at character {self.i + 1} cannot be bound"
            )
        self._take(end + len(tag))
        return True


def _has_code(text: str) -> bool:
    """Whether ``text`` holds more than blanks and comments."""
    stripped = re.sub(r"--[^\n]*|/\*.*?\*/|#[^\n]*", " ", text, flags=re.S)
    return bool(stripped.strip())
