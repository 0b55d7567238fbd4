"""Reading a child program's result (:func:`dsched_worker.tasks.child.take_result`) and its
request (:func:`dsched_worker.programs.runtime.read_request`): what a broken or hostile file or
input gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsched_worker.programs.runtime import RESULT_FILE, read_request, write_result
from dsched_worker.tasks.child import MAX_RESULT_BYTES, take_result


def test_a_written_result_is_read_once_and_removed(tmp_path: Path) -> None:
    write_result({"a": "1", "b": "x\ny"}, str(tmp_path))
    assert take_result(tmp_path / RESULT_FILE) == ({"a": "1", "b": "x\ny"}, "")
    assert list(tmp_path.iterdir()) == []


def test_no_result_file_means_no_out_params(tmp_path: Path) -> None:
    assert take_result(tmp_path / RESULT_FILE) == ({}, "")


@pytest.mark.parametrize(
    ("content", "note"),
    [
        (b"{not json", "is not JSON"),
        (b'["a"]', "is not a JSON object"),
        (b'{"a": "' + b"x" * MAX_RESULT_BYTES + b'"}', "is over"),
    ],
)
def test_a_broken_result_is_dropped_with_a_note(tmp_path: Path, content: bytes, note: str) -> None:
    (tmp_path / RESULT_FILE).write_bytes(content)
    found, problem = take_result(tmp_path / RESULT_FILE)
    assert found == {}
    assert problem.startswith("OUT parameters dropped: ") and note in problem


def test_non_text_values_become_json(tmp_path: Path) -> None:
    (tmp_path / RESULT_FILE).write_text('{"n": 3, "rows": [[1, "a"]], "none": null}')
    assert take_result(tmp_path / RESULT_FILE)[0] == {
        "n": "3",
        "rows": '[[1, "a"]]',
        "none": "null",
    }


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"[]",
        b'{"params": {}}',
        b'{"spec": [], "params": {}}',
        b'{"spec": {}, "params": {"a": 1}}',
    ],
)
def test_a_request_must_be_a_spec_object_and_text_params(data: bytes) -> None:
    with pytest.raises(ValueError):
        read_request(data)


def test_a_request_without_params_has_none() -> None:
    assert read_request(b'{"spec": {"url": "x"}}') == ({"url": "x"}, {})
