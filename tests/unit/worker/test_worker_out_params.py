"""OUT parameter parsing from task output arriving in arbitrary chunks."""

from __future__ import annotations

import pytest

from dsched.spec import MAX_PARAMS_BYTES, params_bytes
from dsched_worker.tasks.out_params import MAX_LINE_BYTES, MAX_NOTES, OutParamParser

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


def parse_with_notes(*chunks: bytes) -> tuple[dict[str, str], list[str]]:
    notes: list[str] = []
    parser = OutParamParser(note=notes.append)
    for chunk in chunks:
        parser.feed(chunk)
    return parser.close(), notes


@pytest.mark.parametrize(
    "key",
    ["BASH_ENV", "bash_env", "PATH", "LD_PRELOAD", "Ld_Audit", "PYTHONPATH", "DSCHED_ATTEMPT"],
)
def test_a_reserved_key_is_dropped_with_a_note(key: str) -> None:
    line = "${setValue(" + key + "=$(touch /tmp/marker))}\n${setValue(ok=1)}\n"
    params, notes = parse_with_notes(line.encode())
    assert params == {"ok": "1"}
    assert len(notes) == 1
    assert notes[0].startswith(f"OUT parameter dropped: parameter name {key!r} is reserved: ")


@pytest.mark.parametrize("key", ["1abc", "a-b", "a x", "", "é", "p" * 129])
def test_a_key_outside_the_grammar_is_dropped_with_a_note(key: str) -> None:
    params, notes = parse_with_notes(("${setValue(" + key + "=v)}\n").encode())
    assert params == {}
    assert len(notes) == 1 and "is not an identifier" in notes[0]


def test_values_no_task_could_receive_are_dropped_with_a_note() -> None:
    big = b"v" * (64 * 1024 + 1)
    params, notes = parse_with_notes(b"${setValue(big=" + big + b")}\n${setValue(nul=a\0b)}\n")
    assert params == {}
    assert notes == [
        "OUT parameter 'big' dropped: its value is larger than 64 KiB",
        "OUT parameter 'nul' dropped: its value contains a NUL character",
    ]


def test_notes_about_dropped_keys_are_bounded() -> None:
    params, notes = parse_with_notes(b"${setValue(PATH=x)}\n" * (MAX_NOTES + 50))
    assert params == {}
    assert len(notes) == MAX_NOTES + 1
    assert notes[-1] == "more OUT parameters dropped; not reported one by one"


def test_out_params_stop_at_the_total_size_limit() -> None:
    value = "v" * (60 * 1024)  # five of these are over MAX_PARAMS_BYTES (256 KiB)
    lines = b"".join(f"${{setValue(p{i}={value})}}\n".encode() for i in range(6))
    got = parse(lines + b"${setValue(p0=short)}\n${setValue(tiny=1)}\n")
    assert set(got) == {"p0", "p1", "p2", "p3", "tiny"}
    assert got["p0"] == "short"  # replacing a value counts its new size, not both
    assert params_bytes(got) <= MAX_PARAMS_BYTES
