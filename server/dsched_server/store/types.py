"""Column types that behave the same on SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import BigInteger, DateTime, Dialect, Integer, func
from sqlalchemy.dialects import mysql
from sqlalchemy.sql.elements import BindParameter, ColumnElement
from sqlalchemy.types import TypeDecorator

# SQLite only auto-increments a column declared exactly INTEGER PRIMARY KEY.
Id = BigInteger().with_variant(Integer(), "sqlite")


class UtcDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC datetime stored as a naive UTC timestamp with microseconds.

    Naive storage is the one representation all three databases share; MariaDB needs DATETIME(6) or
    it drops the fraction of a second (the benchmark's gaps are milliseconds).
    """

    impl = DateTime
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> Any:
        if dialect.name in ("mysql", "mariadb"):
            return dialect.type_descriptor(mysql.DATETIME(fsp=6))
        return dialect.type_descriptor(DateTime(timezone=False))

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC)


class HexLongBlob(mysql.LONGBLOB):
    """MariaDB's LONGBLOB, with values sent as hex text through ``UNHEX()``.

    aiomysql 0.3.2 cannot bind a ``bytes`` parameter with PyMySQL >= 1.2 (it calls a name PyMySQL
    replaced with a string: ``TypeError: 'str' object is not callable``, aio-libs/aiomysql#1080),
    so the value never reaches the driver as bytes. PyMySQL sends bytes as hex anyway, so the
    statement is no larger.
    """

    def bind_processor(self, dialect: Dialect) -> Callable[[Any], Any] | None:
        def process(value: Any) -> Any:
            return None if value is None else bytes(value).hex()

        return process

    def bind_expression(self, bindvalue: BindParameter[Any]) -> ColumnElement[Any]:
        return func.unhex(bindvalue, type_=self)
