"""api.convert.timestamp gives what protobuf's Timestamp.FromDatetime gives, for every time a
store or a clock can hold: aware in any zone, naive (UTC), before the epoch, at both ends of
the years a datetime has."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from google.protobuf import timestamp_pb2
from hypothesis import given
from hypothesis import strategies as st

from dsched_server.api.convert import timestamp


def _reference(value: datetime) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(value)
    return stamp


@pytest.mark.parametrize(
    "value",
    [
        datetime(2026, 11, 29, 12, 0, 0, 123456, tzinfo=UTC),
        datetime(2026, 3, 29, 2, 30, 0, 999999, tzinfo=ZoneInfo("Europe/Berlin")),
        datetime(2026, 11, 29, 9, 30, tzinfo=timezone(timedelta(hours=5, minutes=30))),
        datetime(1969, 12, 31, 23, 59, 59, 1, tzinfo=UTC),
        datetime(1, 1, 1, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(2026, 11, 29, 12, 0, 0, 5),  # naive: UTC
    ],
)
def test_timestamp_is_from_datetimes(value: datetime) -> None:
    assert timestamp(value) == _reference(value)


@given(st.datetimes(timezones=st.just(UTC) | st.none()))
def test_timestamp_is_from_datetimes_for_any_time(value: datetime) -> None:
    assert timestamp(value) == _reference(value)


def test_no_time_is_no_timestamp() -> None:
    assert timestamp(None) is None
