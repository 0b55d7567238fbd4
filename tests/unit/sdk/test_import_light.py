"""``import dsched`` stays light: it loads no gRPC, no protobuf and nothing of the server.

Each check runs in a fresh interpreter (this test process has long since imported everything) and
reads its ``sys.modules``: what is imported, not how long it takes.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import dsched

INIT = Path(dsched.__file__)
PYPROJECT = Path(__file__).resolve().parents[3] / "pyproject.toml"
# Never loaded by the SDK, whatever it is asked for: the server's packages and dependencies.
SERVER_ONLY = ("sqlalchemy", "alembic", "kazoo", "psutil", "dsched_server", "dsched_worker")
# Loaded only when something that talks to a server is first used.
HEAVY = ("grpc", "grpc_reflection", "grpc_health", "google.protobuf", "dsched.v1")


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys\nprint('\\n'.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return set(out.split())


def _under(modules: set[str], roots: tuple[str, ...]) -> set[str]:
    return {m for m in modules if any(m == r or m.startswith(f"{r}.") for r in roots)}


def test_import_dsched_loads_only_the_package_itself() -> None:
    modules = _modules_after("import dsched")
    assert _under(modules, SERVER_ONLY + HEAVY) == set()
    assert _under(modules, ("dsched",)) == {"dsched"}


def test_every_export_still_leaves_the_server_alone() -> None:
    # grpc's own __init__ imports grpc_reflection and grpc_health when they are installed (the dev
    # environment has them); an SDK-only install does not (tests/packaging checks that).
    modules = _modules_after(f"from dsched import {', '.join(dsched.__all__)}")
    assert _under(modules, SERVER_ONLY) == set()
    assert "dsched.client" in modules


def test_exports_resolve_and_match_the_type_checking_imports() -> None:
    # What mypy sees (the imports under TYPE_CHECKING), what __getattr__ serves (_EXPORTS) and
    # __all__ must name the same objects.
    tree = ast.parse(INIT.read_text())
    guarded = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name)
        if node.test.id == "TYPE_CHECKING"
    )
    seen: dict[str, str] = {
        alias.name: stmt.module or ""
        for stmt in guarded.body
        if isinstance(stmt, ast.ImportFrom)
        for alias in stmt.names
    }
    served = {name: module for module, names in dsched._EXPORTS.items() for name in names}
    assert seen == served
    assert sorted(dsched.__all__) == sorted(served)
    for name, module in served.items():
        value = getattr(dsched, name)
        assert getattr(value, "__module__", None) == module, name
    assert set(dsched.__all__) <= set(dir(dsched))


def test_unknown_names_are_attribute_errors() -> None:
    with pytest.raises(AttributeError, match="NoSuchThing"):
        _ = dsched.NoSuchThing  # type: ignore[attr-defined]


def test_the_import_contract_covers_every_sdk_module() -> None:
    # import-linter checks only the modules its contract names: a new SDK module must be one.
    contracts = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]
    (sdk,) = [c for c in contracts if c["name"] == "the SDK does not import the servers"]
    package = INIT.parent
    modules = {
        f"dsched.{path.stem if path.is_file() else path.name}"
        for path in package.iterdir()
        if (path.suffix == ".py" and path.name != "__init__.py") or (path / "__init__.py").is_file()
    }
    assert set(sdk["source_modules"]) == modules - {"dsched_server", "dsched_worker", "dsched.v1"}
