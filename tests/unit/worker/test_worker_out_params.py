"""OUT parameter parsing from task output arriving in arbitrary chunks."""

from __future__ import annotations

import pytest

from dsched.worker.tasks.out_params import MAX_LINE_BYTES, OutParamParser

OUTPUT = (
    b"starting\n"
    b"${setValue(rows=42)}\n"
    b"noise #{setValue(table=db.t)} more noise ${setValue(empty=)}\n"
    b"\xff\xfe not utf-8 ${setValue(bytes=ok)}\r\n"
    b"${setValue(rows=43)}\n"
    b"#{setValue(last=no newline)}"
)
EXPECTED = {"rows": "43", "table": "db.t", "empty": "", "bytes": "ok", "last": "no newline"}


def parse(*chunks: bytes) -> dict[str, str]:
    parser = OutParamParser()
    for chunk in chunks:
        parser.feed(chunk)
    return parser.close()


def test_whole_output_at_once() -> None:
    assert parse(OUTPUT) == EXPECTED


def test_every_split_point_gives_the_same_result() -> None:
    for cut in range(len(OUTPUT) + 1):
        assert parse(OUTPUT[:cut], OUTPUT[cut:]) == EXPECTED, cut


def test_byte_by_byte() -> None:
    assert parse(*(OUTPUT[i : i + 1] for i in range(len(OUTPUT)))) == EXPECTED


def test_params_of_complete_lines_are_visible_before_close() -> None:
    parser = OutParamParser()
    parser.feed(b"${setValue(a=1)}\n${setValue(b=2")
    assert parser.params == {"a": "1"}
    parser.feed(b")}\n")
    assert parser.params == {"a": "1", "b": "2"}


@pytest.mark.parametrize(
    "line",
    [
        b"${setValue(1abc=x)}",  # not an identifier
        b"${setValue(a-b=x)}",
        b"${setValue(=x)}",
        b"${setValue(a=x)",  # not closed
        b"$setValue(a=x)}",
        b"{setValue(a=x)}",
        b"${setvalue(a=x)}",  # case matters
        b"${setValue(DSCHED_ATTEMPT=9)}",  # reserved prefix
        b"${setValue(a x=1)}",
    ],
)
def test_junk_is_ignored(line: bytes) -> None:
    assert parse(line + b"\n") == {}


def test_value_may_contain_equals_and_parentheses() -> None:
    assert parse(b"${setValue(expr=a=(b))}\n") == {"expr": "a=(b)"}


def test_over_long_lines_are_skipped_without_buffering_them() -> None:
    parser = OutParamParser()
    parser.feed(b"x" * (MAX_LINE_BYTES + 10))
    parser.feed(b"${setValue(hidden=1)}" + b"y" * 10)
    parser.feed(b"\n${setValue(after=2)}\n")
    assert parser.close() == {"after": "2"}
    assert len(parser._tail) == 0


def test_oversized_values_are_ignored() -> None:
    big = b"v" * (64 * 1024 + 1)
    assert parse(b"${setValue(big=" + big + b")}\n${setValue(small=1)}\n") == {"small": "1"}
