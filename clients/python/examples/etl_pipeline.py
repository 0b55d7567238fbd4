"""An example ETL pipeline: one extract fans out to three cleaning tasks, which fan in to a join.

    extract ──┬── clean_orders ────┐
              ├── clean_customers ─┼── join ── report ── publish
              └── clean_products ──┘

Submit it with ``dsched submit clients/python/examples/etl_pipeline.py`` and run it with
``dsched run etl_pipeline --project examples --wait --logs`` (that is what ``make run`` does), or
run this file directly against a server: ``DSCHED_SERVER=127.0.0.1:5678 python etl_pipeline.py``.

Parameters reach scripts as environment variables (``$batch_date``), and a task passes values to
later tasks by printing ``${setValue(name=value)}``.
"""

from __future__ import annotations

from dsched import Shell, Workflow

with Workflow(
    "etl_pipeline",
    project="examples",
    description="extract, clean in parallel, join, report, publish",
    params={"batch_date": "2026-11-21"},
) as wf:
    extract = Shell(
        "extract",
        """
        echo "extracting batch $batch_date (attempt $DSCHED_ATTEMPT, key $DSCHED_IDEMPOTENCY_KEY)"
        for table in orders customers products; do echo "  pulled $table"; sleep 0.2; done
        echo '${setValue(rows=1250)}'
        """,
    )
    cleaners = [
        Shell(
            f"clean_{table}",
            f"""
            echo "cleaning {table}: $rows rows from extract"
            for step in dedupe normalise validate; do echo "  {table}: $step"; sleep 0.3; done
            """,
            retries=1,
            retry_interval=1,
        )
        for table in ("orders", "customers", "products")
    ]
    join = Shell(
        "join",
        """
        echo "joining orders, customers and products"
        sleep 0.3
        echo '${setValue(joined=1180)}'
        """,
    )
    report = Shell("report", 'echo "report for $batch_date: $joined joined rows"; sleep 0.2')
    publish = Shell("publish", 'echo "published report for $batch_date"', timeout=60)

    extract >> cleaners
    cleaners >> join
    join >> report >> publish

if __name__ == "__main__":
    instance = wf.run(wait=True)
    print(f"instance {instance.id}: {instance.state}")
