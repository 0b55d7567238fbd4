"""Page tokens: every token this server issues decodes to its key for the same listing and query;
anything else is INVALID_ARGUMENT (INVALID_PAGE_TOKEN, field ``page_token``), never another
exception. Fuzzed with hypothesis."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsched.errors import InvalidArgument
from dsched_server.store import paging
from dsched_server.store.paging import ID_KEY, NAME_KEY, VERSION_KEY, Cursor

QUERY = {"project": "p", "states": ["RUNNING"]}


AnyKey = Any  # KeyType[int] | KeyType[str]: cursor() is generic in the key type


def cursor(key_type: AnyKey, token: str = "", listing: str = "instances") -> Cursor[Any]:
    return paging.cursor(listing, QUERY, key_type, 0, token)


def assert_invalid(
    token: str, key_type: AnyKey = ID_KEY, query: Mapping[str, object] = QUERY
) -> InvalidArgument:
    with pytest.raises(InvalidArgument) as caught:
        paging.cursor("instances", query, key_type, 0, token)
    err = caught.value
    assert (err.reason, err.field) == ("INVALID_PAGE_TOKEN", "page_token")
    return err


def raw(doc: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")


def valid_doc(key: object, listing: str = "instances") -> dict[str, object]:
    """A token document as the server writes it for ``listing`` and QUERY."""
    issued = cursor(ID_KEY, listing=listing).token(1)
    doc = json.loads(base64.urlsafe_b64decode(issued + "=" * (-len(issued) % 4)))
    return {**doc, "k": key}


@settings(deadline=None)  # no timing in unit tests: a loaded machine must not fail them
@given(st.integers(min_value=1, max_value=2**63 - 1))
def test_an_issued_id_token_round_trips(key: int) -> None:
    token = cursor(ID_KEY).token(key)
    assert len(token) <= paging.MAX_TOKEN_CHARS
    assert cursor(ID_KEY, token).after == key


@settings(deadline=None)
@given(st.text(min_size=1, max_size=64))
def test_an_issued_name_token_round_trips(key: str) -> None:
    token = cursor(NAME_KEY).token(key)
    assert len(token) <= paging.MAX_TOKEN_CHARS
    assert cursor(NAME_KEY, token).after == key


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=700))
def test_any_text_is_a_token_or_invalid_argument(token: str) -> None:
    for key_type in (ID_KEY, VERSION_KEY, NAME_KEY):
        try:
            got = cursor(key_type, token)
        except InvalidArgument as err:
            assert (err.reason, err.field) == ("INVALID_PAGE_TOKEN", "page_token")
        else:
            assert got.after is None if not token else key_type.valid(got.after)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(JSON)
def test_any_json_document_is_a_token_or_invalid_argument(doc: object) -> None:
    try:
        cursor(ID_KEY, raw(doc))
    except InvalidArgument as err:
        assert (err.reason, err.field) == ("INVALID_PAGE_TOKEN", "page_token")


@settings(max_examples=150, deadline=None)
@given(JSON)
def test_any_key_in_a_well_formed_token_is_checked(key: object) -> None:
    for key_type in (ID_KEY, VERSION_KEY, NAME_KEY):
        token = raw(valid_doc(key))
        try:
            got = cursor(key_type, token)
        except InvalidArgument as err:
            assert (err.reason, err.field) == ("INVALID_PAGE_TOKEN", "page_token")
        else:
            assert key_type.valid(got.after)


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=400))
def test_any_bytes_are_a_token_or_invalid_argument(data: bytes) -> None:
    token = base64.urlsafe_b64encode(data).decode().rstrip("=")
    try:
        cursor(ID_KEY, token)
    except InvalidArgument as err:
        assert (err.reason, err.field) == ("INVALID_PAGE_TOKEN", "page_token")


@pytest.mark.parametrize(
    "key",
    [10**400, 2**63, 0, -1, True, 1.0, 1e400, "7", None, [1], {"a": 1}],
    ids=[
        "huge",
        "int64+1",
        "zero",
        "negative",
        "bool",
        "float",
        "inf",
        "str",
        "null",
        "list",
        "object",
    ],
)
def test_an_id_key_out_of_type_or_range_is_invalid(key: object) -> None:
    doc = valid_doc(0)
    text = json.dumps(doc).replace(
        '"k": 0', f'"k": {json.dumps(key)}' if key != 10**400 else '"k": ' + "9" * 400
    )
    token = base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")
    assert_invalid(token)


def test_a_version_key_beyond_int32_is_invalid() -> None:
    assert_invalid(raw(valid_doc(2**31)), VERSION_KEY)
    assert cursor(VERSION_KEY, raw(valid_doc(2**31 - 1))).after == 2**31 - 1


@pytest.mark.parametrize(
    "token",
    [
        "[" * 300,
        raw(json.loads("[" * 30 + "]" * 30)),
        base64.urlsafe_b64encode(b"[" * 380).decode(),
        base64.urlsafe_b64encode(b'{"v":1,"l":"instances","q":"' + b"[" * 350).decode(),
        "A" * (paging.MAX_TOKEN_CHARS + 1),
        raw(valid_doc(5))[:-3],  # truncated
        raw(valid_doc(5)) + "==",  # padding is not issued
        raw(valid_doc(5)) + "!",
        "é✓",
        raw({**valid_doc(5), "extra": 1}),
        raw({**valid_doc(5), "v": 2}),
        raw({**valid_doc(5), "v": True}),
        raw({**valid_doc(5), "v": 1.0}),
        raw({"k": 5}),  # the encoding before tokens described themselves
        base64.urlsafe_b64encode(b'{"v":NaN,"l":"instances","q":"x","k":5}').decode(),
        base64.urlsafe_b64encode(b"\xff\xfe{}").decode(),
    ],
    ids=[
        "brackets",
        "nested",
        "nested in base64",
        "nested in a field",
        "too long",
        "truncated",
        "padded",
        "trailing garbage",
        "not base64url",
        "extra field",
        "other version",
        "version true",
        "version float",
        "old format",
        "NaN",
        "not utf-8",
    ],
)
def test_malformed_tokens_are_invalid(token: str) -> None:
    assert_invalid(token)


def test_a_token_of_another_listing_is_invalid() -> None:
    token = cursor(ID_KEY, listing="task_instances").token(5)
    err = assert_invalid(token)
    assert "another listing" in err.violations[0].description


def test_a_token_for_other_filters_is_invalid() -> None:
    token = cursor(ID_KEY).token(5)
    assert_invalid(token, query={"project": "other", "states": ["RUNNING"]})
    assert paging.cursor("instances", dict(QUERY), ID_KEY, 10, token).after == 5
