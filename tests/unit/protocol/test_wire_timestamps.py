"""Times on the wire: to_timestamp is Timestamp.FromDatetime's exact value, from any zone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from google.protobuf import timestamp_pb2
from hypothesis import given
from hypothesis import strategies as st

from dsched_server.protocol.wire.checks import timestamp, to_timestamp

ZONES = st.builds(
    timezone, st.timedeltas(min_value=timedelta(hours=-23), max_value=timedelta(hours=23))
)
# Aware times whose UTC value stays within the years 1..9999 (a Timestamp's range).
TIMES = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=ZONES)


@given(TIMES)
def test_to_timestamp_is_from_datetime(value: datetime) -> None:
    expected = timestamp_pb2.Timestamp()
    expected.FromDatetime(value.astimezone(UTC))
    assert to_timestamp(value) == expected
    assert timestamp("t", to_timestamp(value), []) == value  # and back, the same instant


def test_to_timestamp_before_the_epoch_keeps_nanos_positive() -> None:
    ts = to_timestamp(datetime(1969, 12, 31, 23, 59, 59, 500000, tzinfo=UTC))
    assert (ts.seconds, ts.nanos) == (-1, 500_000_000)
