"""dsched's PySpark driver: the primary resource of PYSPARK programs given inline and of SQL
programs. ``spark-submit`` runs this file with the worker's Python; the worker never imports it.

It first makes every SparkContext created in the driver print one line naming its application id
(``dsched: spark application id <id>``): Spark itself names the id of a local-mode application
nowhere in its output, and the worker records the id from that line while the job runs.

- ``spark_driver.py pyspark PROGRAM [ARG...]`` runs the program file as ``__main__`` with
  ``sys.argv = [PROGRAM, ARG...]``.
- ``spark_driver.py sql FILE`` runs the statements of FILE (JSON: ``statements``, ``params``) one
  after the other. A parameter reaches a statement only as a bound ``:name`` marker (Spark's
  parameterised SQL): its value is a literal, never SQL text. The last statement's rows (at most
  :data:`SHOW_ROWS`) are printed; when it returns exactly one row, each column also becomes an
  OUT parameter (``${setValue(column=value)}``).
"""

from __future__ import annotations

import json
import re
import runpy
import sys
from typing import Any

SHOW_ROWS = 20
MARKER = "dsched: spark application id "
_PARAM = re.compile(r":([A-Za-z_][A-Za-z0-9_]*)")


def split_statements(text: str) -> list[str]:
    """Splits on ``;`` outside quotes (``'``, ``"``, backticks) and comments; drops empty ones."""
    out: list[str] = []
    current: list[str] = []
    i, quote = 0, ""
    while i < len(text):
        ch = text[i]
        if quote:
            current.append(ch)
            if ch == "\\" and quote != "`" and i + 1 < len(text):
                current.append(text[i + 1])
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"`":
            quote = ch
            current.append(ch)
        elif text.startswith("--", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = len(text) if end < 0 else end + 2
            current.append(" ")
            continue
        elif ch == ";":
            out.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    out.append("".join(current))
    return [s.strip() for s in out if s.strip()]


def bound(statement: str, params: dict[str, str]) -> dict[str, Any]:
    """The parameters ``statement`` refers to as ``:name`` markers."""
    return {name: params[name] for name in _PARAM.findall(statement) if name in params}


def _announce_application_ids() -> None:
    from pyspark import SparkContext

    original = SparkContext.__init__

    def init(self: SparkContext, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        print(MARKER + str(self.applicationId), flush=True)

    SparkContext.__init__ = init  # type: ignore[method-assign]


def _run_sql(path: str) -> None:
    from pyspark.sql import SparkSession

    with open(path, encoding="utf-8") as source:
        doc = json.load(source)
    statements = split_statements(doc["statements"])
    params = {str(k): str(v) for k, v in doc.get("params", {}).items()}
    spark = SparkSession.builder.getOrCreate()
    try:
        frame = None
        for number, statement in enumerate(statements, 1):
            print(f"dsched: statement {number} of {len(statements)}", flush=True)
            args = bound(statement, params)
            frame = spark.sql(statement, args=args) if args else spark.sql(statement)
        if frame is not None:
            rows = frame.limit(SHOW_ROWS + 1).collect()
            frame.show(SHOW_ROWS, truncate=False)
            if len(rows) == 1:
                for column, value in rows[0].asDict().items():
                    print(f"${{setValue({column}={'' if value is None else value})}}")
    finally:
        spark.stop()


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[0] not in ("pyspark", "sql"):
        raise SystemExit("usage: spark_driver.py pyspark PROGRAM [ARG...] | sql FILE")
    _announce_application_ids()
    if argv[0] == "sql":
        _run_sql(argv[1])
        return
    sys.argv = argv[1:]
    runpy.run_path(argv[1], run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
