"""``dsched datasources`` (list) and ``dsched datasource create|test|delete NAME``.

A password is read from a prompt (no echo) or, with ``--password-stdin``, from the first line of
standard input; never from a flag, whose value every user of the host can read in ``ps`` and
``/proc``, and which shells keep in their history.
"""

from __future__ import annotations

import argparse
import getpass
import sys

from dsched.cli import format as fmt
from dsched.client import Client
from dsched.datasources import Datasource, DatasourceType
from dsched.errors import FieldViolation, InvalidArgument


def add_parsers(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: list[argparse.ArgumentParser]
) -> None:
    p = sub.add_parser("datasources", parents=common, help="list datasources")
    p.set_defaults(handler=datasources)

    p = sub.add_parser("datasource", parents=common, help="create, test or delete a datasource")
    p.add_argument("action", choices=("create", "test", "delete"))
    p.add_argument("name", metavar="NAME")
    p.add_argument("--type", choices=[t.value.lower() for t in DatasourceType], default="")
    p.add_argument("--host", default="")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--database", default="", help="database name (SQLite: the file's path)")
    p.add_argument("--user", default="")
    p.add_argument("--url", default="", help="generic: a SQLAlchemy URL (no password in it)")
    p.add_argument("--description", default="")
    p.add_argument(
        "--option", action="append", default=[], metavar="KEY=VALUE", help="connection option"
    )
    how = p.add_mutually_exclusive_group()
    how.add_argument("--password", action="store_true", help="prompt for a password (no echo)")
    how.add_argument(
        "--password-stdin", action="store_true", help="read the password from standard input"
    )
    p.set_defaults(handler=datasource)


def datasources(args: argparse.Namespace, client: Client) -> int:
    rows = [
        (
            d.name,
            d.type.value,
            d.url or _where(d),
            "yes" if d.password_set else "no",
            ",".join(f"{k}={v}" for k, v in sorted(d.options.items())),
        )
        for d in client.list_datasources()
    ]
    _print(fmt.table(("name", "type", "where", "password", "options"), rows))
    return 0


def _where(d: Datasource) -> str:
    if d.type is DatasourceType.SQLITE:
        return d.database
    port = f":{d.port}" if d.port else ""
    user = f"{d.user}@" if d.user else ""
    return f"{user}{d.host}{port}/{d.database}"


def datasource(args: argparse.Namespace, client: Client) -> int:
    if args.action == "test":
        result = client.test_datasource(args.name)
        _print(("ok: " if result.ok else "failed: ") + result.message)
        return 0 if result.ok else 1
    if args.action == "delete":
        client.delete_datasource(args.name)
        _print(f"datasource {args.name} deleted")
        return 0
    if not args.type:
        raise InvalidArgument(
            "--type is required", violations=[FieldViolation("--type", "required")]
        )
    options: dict[str, str] = {}
    for item in args.option:
        key, sep, value = item.partition("=")
        if not sep:
            raise InvalidArgument(
                "bad --option", violations=[FieldViolation("--option", f"{item!r}: not KEY=VALUE")]
            )
        options[key] = value
    password = ""
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    elif args.password:
        password = getpass.getpass(f"password of datasource {args.name}: ")
    made = client.create_datasource(
        Datasource(
            name=args.name,
            type=DatasourceType(args.type.upper()),
            description=args.description,
            host=args.host,
            port=args.port,
            database=args.database,
            user=args.user,
            options=options,
            url=args.url,
        ),
        password=password,
    )
    state = "with a password" if made.password_set else "without a password"
    _print(f"datasource {made.name} ({made.type.value}) created, {state}")
    return 0


def _print(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
