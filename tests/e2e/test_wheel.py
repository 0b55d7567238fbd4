"""The built wheel, installed into fresh virtual environments (issue 9, acceptance 5).

- The wheel holds exactly the source tree's three import packages (dsched, dsched_server,
  dsched_worker), and no link of any kind; the source tree holds none either; the checkout's
  editable install loads every module of the wheel from the file the wheel was built from.
- Installed without extras it is a client: none of the server's dependencies arrive, and its SDK
  and CLI submit, run (``--wait``) and read logs against a standalone started from the
  repository's environment; its ``dsched standalone`` says in one line to install the extra.
- Installed with ``[server]`` its own ``dsched standalone`` starts, runs a workflow and stops.

Each environment is made with ``--without-pip`` and filled by this environment's pip
(``pip --python``): quicker than ensurepip, and the same resolver. Packages come from pip's usual
sources (the local cache and find-links first, then the index).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import stat
import subprocess
import sys
import textwrap
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.e2e.conftest import (
    REPO,
    Standalone,
    clean_env,
    instance_id_from_run,
    parse_table,
    start_standalone,
)

# pip resolves and installs packages here: on a loaded CI machine that can take minutes.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

# The server's dependencies (import names) that an SDK-only install must not bring.
SERVER_ONLY = (
    "sqlalchemy",
    "alembic",
    "aiosqlite",
    "asyncpg",
    "aiomysql",
    "kazoo",
    "psutil",
    "croniter",
    "grpc_health",
    "grpc_reflection",
)
PIP_TIMEOUT_S = 300

WORKFLOW = """
from dsched import Shell, Workflow

with Workflow("packaged", project={project!r}) as wf:
    Shell("hello", "echo hello from the wheel") >> Shell("bye", "echo bye from the wheel")
"""


# ------------------------------------------------------------------------------------ the wheel


def _export_tree(dest: Path) -> None:
    """The files git would commit (tracked, and untracked ones not ignored) as they are now.

    The wheel is built from this copy, not in the checkout: setuptools reuses ``build/`` there,
    which would carry modules deleted since into the wheel (and the test leaves the checkout as
    it found it).
    """
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout
    for rel in filter(None, os.fsdecode(listed).split("\0")):
        source = REPO / rel
        if not os.path.lexists(source):
            continue  # deleted in the working tree, not yet in the index
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, target)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    _export_tree(work / "src")
    dist = work / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-q",
            "-w",
            str(dist),
            str(work / "src"),
        ],
        check=True,
        capture_output=True,
        timeout=PIP_TIMEOUT_S,
    )
    (built,) = dist.glob("dsched-*.whl")
    return built


def _source_files() -> set[str]:
    """Every file of the three import packages in the source tree, named as the wheel names them
    (``packages.find`` in pyproject.toml: each ``where`` root holds packages under their own names,
    so the path below a root is the path in the wheel); caches left out."""
    find = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    tops = {pattern for pattern in find["find"]["include"] if "*" not in pattern}
    assert tops == {"dsched", "dsched_server", "dsched_worker"}
    names: set[str] = set()
    for where in find["find"]["where"]:
        root = REPO / where
        for top in sorted(tops):
            for dirpath, dirnames, filenames in os.walk(root / top):
                dirnames[:] = [d for d in dirnames if d != "__pycache__"]
                for filename in filenames:
                    if not filename.endswith(".pyc"):
                        names.add((Path(dirpath) / filename).relative_to(root).as_posix())
    return names


def test_the_source_packages_hold_no_links() -> None:
    """Each import package is a real directory: nothing in them is a symlink, so what a type
    checker reads is what the wheel and the editable install load."""
    find = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    links = [
        str(Path(dirpath, name).relative_to(REPO))
        for where in find["find"]["where"]
        for dirpath, dirnames, filenames in os.walk(REPO / where)
        for name in (*dirnames, *filenames)
        if Path(dirpath, name).is_symlink()
    ]
    assert links == []


def test_the_wheel_holds_the_source_tree_and_no_links(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        infos = archive.infolist()
    package_files = {i.filename for i in infos if not i.filename.startswith("dsched-")}
    assert package_files == _source_files()
    links = [i.filename for i in infos if stat.S_ISLNK(i.external_attr >> 16)]
    assert links == []


def test_the_editable_install_loads_what_the_wheel_holds(wheel: Path) -> None:
    """The checkout's editable install (``make setup``) finds every module the wheel carries at
    the source file the wheel was built from: the two installs are the same code."""
    with zipfile.ZipFile(wheel) as archive:
        modules = sorted(n for n in archive.namelist() if n.endswith(".py"))
    assert len(modules) > 100
    roots = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    wheres = [REPO / where for where in roots["packages"]["find"]["where"]]
    wrong = []
    for name in modules:
        dotted = name.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        spec = importlib.util.find_spec(dotted)
        expected = [root / name for root in wheres if (root / name).is_file()]
        if spec is None or len(expected) != 1 or Path(spec.origin or "") != expected[0]:
            wrong.append((dotted, spec.origin if spec else None, expected))
    assert wrong == []


def _name(requirement: str) -> str:
    """The distribution a Requires-Dist value names (``grpcio<2,>=1.85.1`` -> ``grpcio``)."""
    found = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert found, requirement
    return found[0]


def test_the_wheel_requires_only_the_client_without_extras(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        (metadata_name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = archive.read(metadata_name).decode()
    requires = [
        line.removeprefix("Requires-Dist: ")
        for line in metadata.splitlines()
        if line.startswith("Requires-Dist: ")
    ]
    unconditional = sorted(_name(r) for r in requires if "extra ==" not in r)
    assert unconditional == ["googleapis-common-protos", "grpcio", "grpcio-status", "protobuf"]
    server = {_name(r) for r in requires if 'extra == "server"' in r}
    assert {"sqlalchemy", "alembic", "kazoo", "psutil", "grpcio-reflection"} <= server


# ------------------------------------------------------------------------------ installed wheels


def _venv(path: Path, requirement: str) -> Path:
    """A fresh virtual environment at ``path`` with ``requirement`` installed; returns its bin/."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120
    )
    python = path / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", requirement],
        check=True,
        capture_output=True,
        timeout=PIP_TIMEOUT_S,
    )
    return path / "bin"


def _run(
    bin_dir: Path, *args: str, cwd: Path, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(bin_dir / args[0]), *args[1:]],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=clean_env(),  # no PYTHONPATH games: what runs is what the venv has
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )


def _importable(bin_dir: Path, modules: tuple[str, ...], cwd: Path) -> list[str]:
    code = (
        "import importlib.util, sys\n"
        f"print(' '.join(m for m in {modules!r} if importlib.util.find_spec(m)))"
    )
    done = _run(bin_dir, "python", "-c", code, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def _submit_run_and_read_logs(bin_dir: Path, address: str, project: str, work: Path) -> None:
    """The CLI of ``bin_dir``: submit a workflow file, run it with --wait, read a task's log;
    then its SDK reads the same log."""
    flow = work / "flow.py"
    flow.write_text(WORKFLOW.format(project=project))

    def cli(*args: str) -> str:
        done = _run(bin_dir, "dsched", "--server", address, *args, cwd=work)
        assert done.returncode == 0, f"dsched {' '.join(args)}: {done.stdout}{done.stderr}"
        return done.stdout

    cli("submit", str(flow))
    ran = cli("run", "packaged", "--project", project, "--wait", "--timeout", "60")
    instance_id = instance_id_from_run(ran)
    assert ran.splitlines()[-1].startswith(f"instance {instance_id} SUCCEEDED"), ran
    tasks = {row["TASK"]: row for row in parse_table(cli("show", str(instance_id)))}
    assert tasks["bye"]["STATE"] == "SUCCEEDED", tasks
    # The log is the task's output between the worker's own "[dsched] ..." lines.
    assert "\nhello from the wheel\n" in cli("logs", tasks["hello"]["ID"])

    sdk = textwrap.dedent(
        f"""
        from dsched import Client
        with Client.connect({address!r}) as client:
            (bye,) = [t for t in client.iter_task_instances({instance_id}) if t.task_name == "bye"]
            print(client.read_log(bye.id).data.decode())
        """
    )
    done = _run(bin_dir, "python", "-c", sdk, cwd=work)
    assert done.returncode == 0, done.stderr
    assert "\nbye from the wheel\n" in done.stdout


def test_without_extras_a_working_client_and_no_server(
    wheel: Path, server: Standalone, project: str, tmp_path: Path
) -> None:
    bin_dir = _venv(tmp_path / "venv", str(wheel))
    assert _importable(bin_dir, SERVER_ONLY, tmp_path) == []
    assert _importable(bin_dir, ("grpc", "google.protobuf", "dsched_server"), tmp_path) == [
        "grpc",
        "google.protobuf",
        "dsched_server",
    ]

    _submit_run_and_read_logs(bin_dir, server.address, project, tmp_path)

    for command in ("standalone", "master", "worker"):
        done = _run(bin_dir, "dsched", command, cwd=tmp_path)
        assert done.returncode == 1, done
        assert done.stdout == ""
        (line,) = done.stderr.splitlines()
        assert line.startswith(f"error: dsched {command} needs the server"), line
        assert line.endswith("pip install 'dsched[server]'"), line


def test_with_the_server_extra_the_standalone_runs(
    wheel: Path, project: str, tmp_path: Path
) -> None:
    bin_dir = _venv(tmp_path / "venv", f"{wheel}[server]")
    assert _importable(bin_dir, SERVER_ONLY, tmp_path) == list(SERVER_ONLY)

    standalone = start_standalone(tmp_path / "data", dsched=bin_dir / "dsched")
    try:
        _submit_run_and_read_logs(bin_dir, standalone.address, project, tmp_path)
    finally:
        if standalone.proc.poll() is None:
            standalone.assert_clean_stop()
