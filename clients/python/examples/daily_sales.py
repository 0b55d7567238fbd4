"""A daily data pipeline on Spark: sample orders in, a Parquet mart and a summary table out.

    generate ── transform (PySpark) ── load (SQL) ── check (SQL) ── passed

Each run handles one business date, ``dt``: the day before its schedule time
(``$[yyyyMMdd-1]``, which is ``${system.biz.date}``), so the 02:00 run of 2 November handles
1 November, and a backfill over a range runs one date after another.

- ``generate`` (PYTHON, from the function below) writes the day's sample orders as CSV under
  ``${warehouse}/raw/orders/dt=<dt>/`` (seeded by the date: no download, same data every time);
- ``transform`` (SPARK, ``local[*]``) aggregates revenue and orders per store and product and writes
  them as Parquet partitioned by ``dt`` under ``${warehouse}/marts/daily_sales/``, overwriting only
  that date's partition (re-running a day replaces its data); it prints the day's totals as OUT
  parameters;
- ``load`` (SQL on the datasource ``warehouse``) replaces the day's row in ``daily_summary``;
- ``check`` (SQL) computes a verdict: exactly one summary row for the day, with the orders the
  transform counted and a positive revenue; ``passed`` fails the run unless it says ``pass``.

``make run`` creates the datasource (SQLite in the demo's data directory), submits this file and
runs it; ``dsched backfill daily_sales --project examples --start ... --end ...`` fills a week.
"""

from __future__ import annotations

from typing import Any

from dsched import Schedule, Spark, Sql, Workflow, task

# Spark settings for a small local job: 200 shuffle partitions (the default) for 25 rows of output
# would cost more than the job; no web UI to start; warnings only in the log (Spark's INFO lines,
# some 400 a run, would bury the job's own output: the day's top rows and its totals).
SPARK_CONF = {
    "spark.sql.shuffle.partitions": "4",
    "spark.ui.enabled": "false",
    "spark.log.level": "WARN",
    "spark.sql.sources.partitionOverwriteMode": "dynamic",
}


@task(retries=1)
def generate(warehouse: str, dt: str, orders: str = "5000") -> dict[str, object]:
    """Writes one day of sample orders as CSV (seeded by the date: a re-run writes the same)."""
    import csv
    import os
    import random

    rng = random.Random(int(dt))
    stores = ["berlin", "hamburg", "munich", "cologne", "leipzig"]
    prices = {"coffee": 4.2, "tea": 3.1, "cake": 5.5, "sandwich": 6.9, "juice": 3.8}
    day = os.path.join(warehouse, "raw", "orders", f"dt={dt}")
    os.makedirs(day, exist_ok=True)
    tmp = os.path.join(day, ".orders.csv.tmp")
    with open(tmp, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["order_id", "store", "product", "quantity", "unit_price"])
        for i in range(int(orders)):
            product = rng.choice(sorted(prices))
            price = round(prices[product] * rng.uniform(0.9, 1.1), 2)
            out.writerow([f"{dt}-{i:06d}", rng.choice(stores), product, rng.randint(1, 4), price])
    os.replace(tmp, os.path.join(day, "orders.csv"))  # a reader never sees half a file
    print(f"wrote {orders} orders for {dt} to {day}")
    return {"raw_orders": int(orders)}


def transform(spark: Any, warehouse: str, dt: str) -> dict[str, object]:
    """Aggregates the day's orders per store and product into the Parquet mart, replacing the
    day's partition; returns the day's totals."""
    from pyspark.sql import functions as F

    orders = spark.read.csv(
        f"{warehouse}/raw/orders/dt={dt}",
        header=True,
        schema="order_id STRING, store STRING, product STRING, quantity INT, unit_price DOUBLE",
    )
    daily = (
        orders.withColumn("revenue", F.col("quantity") * F.col("unit_price"))
        .groupBy("store", "product")
        .agg(F.count("*").alias("orders"), F.round(F.sum("revenue"), 2).alias("revenue"))
        .withColumn("dt", F.lit(dt))
    )
    # partitionOverwriteMode=dynamic (SPARK_CONF): only this day's partition is replaced
    daily.write.mode("overwrite").partitionBy("dt").parquet(f"{warehouse}/marts/daily_sales")
    mart = spark.read.parquet(f"{warehouse}/marts/daily_sales").where(F.col("dt") == dt)
    mart.orderBy(F.desc("revenue")).show(5)
    totals = mart.agg(F.sum("orders").alias("orders"), F.sum("revenue").alias("revenue")).first()
    top = mart.groupBy("store").agg(F.sum("revenue").alias("r")).orderBy(F.desc("r")).first()
    return {
        "orders": int(totals["orders"]),
        "revenue": f"{totals['revenue']:.2f}",
        "top_store": top["store"],
    }


SUMMARY_TABLE = """
CREATE TABLE IF NOT EXISTS daily_summary (
    dt        VARCHAR(8) PRIMARY KEY,
    orders    INTEGER NOT NULL,
    revenue   REAL NOT NULL,
    top_store VARCHAR(32) NOT NULL
)
"""


@task
def passed(dt: str, verdict: str, summary_rows: str) -> None:
    """Fails the run unless the check query's verdict is 'pass'."""
    import sys

    if verdict != "pass":
        sys.exit(f"check failed for {dt}: verdict {verdict}, {summary_rows} summary row(s)")
    print(f"check passed for {dt}: one summary row, revenue and orders as computed")


with Workflow(
    "daily_sales",
    project="examples",
    description="sample orders -> Spark aggregation (Parquet by dt) -> summary table -> check",
    params={"dt": "$[yyyyMMdd-1]", "warehouse": "/tmp/dsched-warehouse"},
    schedule=Schedule("0 2 * * *", tz="UTC"),
) as wf:
    aggregate = Spark.from_function(
        transform, master="local[2]", conf=SPARK_CONF, app_name="daily_sales_${dt}", retries=1
    )
    load = Sql(
        "load",
        "warehouse",
        """
        INSERT INTO daily_summary (dt, orders, revenue, top_store)
        VALUES (${dt}, CAST(${orders} AS INTEGER), CAST(${revenue} AS REAL), ${top_store})
        """,
        type="NON_QUERY",
        # One transaction: the day's old row goes and the new one comes, or neither.
        pre_statements=[SUMMARY_TABLE, "DELETE FROM daily_summary WHERE dt = ${dt}"],
    )
    check = Sql(
        "check",
        "warehouse",
        """
        SELECT COUNT(*) AS summary_rows,
               CASE WHEN COUNT(*) = 1 AND MIN(revenue) > 0
                         AND MIN(orders) = CAST(${orders} AS INTEGER)
                    THEN 'pass' ELSE 'fail' END AS verdict
        FROM daily_summary WHERE dt = ${dt}
        """,
        out_params={"summary_rows": "", "verdict": ""},
    )
    generate() >> aggregate >> load >> check >> passed()

if __name__ == "__main__":
    wf.submit()
    print(f"submitted {wf.project}/{wf.name}")
