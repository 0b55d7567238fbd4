"""Repository of projects and versioned workflow definitions."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from sqlalchemy import Row, RowMapping, bindparam, delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from dsched.errors import (
    Aborted,
    AlreadyExists,
    FailedPrecondition,
    NotFound,
    version_mismatch,
)
from dsched.options import ReleaseState
from dsched.spec import WorkflowSpec
from dsched.states import WorkflowState
from dsched_server.core.records import ProjectRecord, WorkflowRecord, WorkflowVersionRecord
from dsched_server.core.transitions import OWNED_STATES
from dsched_server.store.codec import task_from_json, task_to_json, task_type
from dsched_server.store.database import Conn
from dsched_server.store.memo import Version, VersionKey
from dsched_server.store.models import (
    Project,
    TaskDefinition,
    TaskEdge,
    Workflow,
    WorkflowInstance,
    WorkflowVersion,
    table,
)

P = table(Project)
W = table(Workflow)
V = table(WorkflowVersion)
TD = table(TaskDefinition)
E = table(TaskEdge)
WI = table(WorkflowInstance)

# Built once (see instances._GET): every start and every claim reads a head.
_HEAD = select(W, P.c.name.label("project_name")).join(P, P.c.id == W.c.project_id)
_HEAD_BY_CODE = _HEAD.where(W.c.id == bindparam("_code"))
_HEAD_BY_NAME = _HEAD.where(P.c.name == bindparam("_project"), W.c.name == bindparam("_name"))

_UNFINISHED = [s.value for s in (*OWNED_STATES, WorkflowState.SUBMITTED, WorkflowState.FAILOVER)]


def _project(row: Row[tuple[object, ...]]) -> ProjectRecord:
    m = row._mapping
    return ProjectRecord(
        id=m["id"],
        name=m["name"],
        description=m["description"],
        create_time=m["create_time"],
        update_time=m["update_time"],
    )


async def create_project(conn: Conn, name: str, description: str, now: datetime) -> ProjectRecord:
    exists = await conn.scalar(select(P.c.id).where(P.c.name == name))
    if exists is not None:
        raise AlreadyExists(f"project {name!r} already exists", metadata={"project": name})
    try:
        await conn.execute(
            insert(P).values(name=name, description=description, create_time=now, update_time=now)
        )
    except IntegrityError as exc:  # lost a race with a concurrent create
        raise AlreadyExists(f"project {name!r} already exists", metadata={"project": name}) from exc
    return await get_project(conn, name)


async def get_project(conn: Conn, name: str) -> ProjectRecord:
    row = (await conn.execute(select(P).where(P.c.name == name))).first()
    if row is None:
        raise NotFound(f"project {name!r} not found", metadata={"project": name})
    return _project(row)


async def list_projects(conn: Conn, after: str | None, limit: int) -> list[ProjectRecord]:
    """Up to ``limit`` projects by name, after the name ``after``."""
    query = select(P).order_by(P.c.name).limit(limit)
    if after is not None:
        query = query.where(P.c.name > after)
    return [_project(r) for r in await conn.execute(query)]


async def delete_project(conn: Conn, name: str) -> None:
    project = await get_project(conn, name)
    count = await conn.scalar(select(func.count()).where(W.c.project_id == project.id))
    if count:
        raise FailedPrecondition(
            f"project {name!r} still has {count} workflow(s)",
            reason="PROJECT_NOT_EMPTY",
            metadata={"project": name},
        )
    await conn.execute(delete(P).where(P.c.id == project.id))


async def _head(conn: Conn, project: str, name: str) -> Row[tuple[object, ...]]:
    row = (await conn.execute(_HEAD_BY_NAME, {"_project": project, "_name": name})).first()
    if row is None:
        raise NotFound(
            f"workflow {project}/{name} not found",
            metadata={"project": project, "workflow": name},
        )
    return row


async def _write_version(
    conn: Conn, code: int, version: int, spec: WorkflowSpec, now: datetime
) -> None:
    await conn.execute(
        insert(V).values(
            workflow_id=code,
            version=version,
            description=spec.description,
            params=dict(spec.params),
            create_time=now,
        )
    )
    await conn.execute(
        insert(TD),
        [
            {
                "workflow_id": code,
                "version": version,
                "position": i,
                "name": t.name,
                "task_type": task_type(t),
                "spec": task_to_json(t),
            }
            for i, t in enumerate(spec.tasks)
        ],
    )
    edges = [
        {"workflow_id": code, "version": version, "upstream": up, "downstream": t.name}
        for t in spec.tasks
        for up in t.upstream
    ]
    if edges:
        await conn.execute(insert(E), edges)


async def create_workflow(conn: Conn, spec: WorkflowSpec, now: datetime) -> WorkflowRecord:
    """Stores version 1 (OFFLINE). The spec must already be validated."""
    project = await get_project(conn, spec.project)
    taken = await conn.scalar(
        select(W.c.id).where(W.c.project_id == project.id, W.c.name == spec.name)
    )
    if taken is not None:
        raise AlreadyExists(
            f"workflow {spec.project}/{spec.name} already exists",
            metadata={"project": spec.project, "workflow": spec.name},
        )
    try:
        result = await conn.execute(
            insert(W).values(
                project_id=project.id,
                name=spec.name,
                current_version=1,
                release_state=ReleaseState.OFFLINE.value,
                create_time=now,
                update_time=now,
            )
        )
    except IntegrityError as exc:
        raise AlreadyExists(f"workflow {spec.project}/{spec.name} already exists") from exc
    code = int(result.inserted_primary_key[0])  # type: ignore[index]
    await _write_version(conn, code, 1, spec, now)
    return await get_workflow_by_code(conn, code)


async def update_workflow(
    conn: Conn, spec: WorkflowSpec, now: datetime, expected_version: int | None = None
) -> WorkflowRecord:
    """Stores a new version of an OFFLINE workflow and makes it current.

    With ``expected_version``, a workflow whose current version is another one is ABORTED
    (VERSION_MISMATCH) and nothing is written; the check is the condition of the same UPDATE that
    moves the current version, so a concurrent update cannot slip between them.
    """
    head = (await _head(conn, spec.project, spec.name))._mapping
    if head["release_state"] != ReleaseState.OFFLINE.value:
        raise FailedPrecondition(
            f"workflow {spec.project}/{spec.name} is ONLINE; take it offline before editing",
            reason="WORKFLOW_ONLINE",
            metadata={"project": spec.project, "workflow": spec.name},
        )
    based_on = head["current_version"] if expected_version is None else expected_version
    # Conditional on the version the edit is based on: a concurrent update makes this change 0 rows.
    result = await conn.execute(
        update(W)
        .where(W.c.id == head["id"], W.c.current_version == based_on)
        .values(current_version=based_on + 1, update_time=now)
    )
    if result.rowcount != 1:
        if expected_version is not None:
            current = await conn.scalar(select(W.c.current_version).where(W.c.id == head["id"]))
            raise version_mismatch(spec.project, spec.name, current, expected_version)
        raise Aborted(
            f"workflow {spec.project}/{spec.name} was updated concurrently; retry",
            reason="CONCURRENT_UPDATE",
            metadata={"project": spec.project, "workflow": spec.name},
        )
    await _write_version(conn, head["id"], based_on + 1, spec, now)
    return await get_workflow_by_code(conn, head["id"])


async def get_workflow(conn: Conn, project: str, name: str, version: int = 0) -> WorkflowRecord:
    return await _load(conn, (await _head(conn, project, name))._mapping, version)


async def get_workflow_by_code(conn: Conn, code: int, version: int = 0) -> WorkflowRecord:
    """Loads one version (0 = current) of a workflow with its tasks and edges."""
    head_row = (await conn.execute(_HEAD_BY_CODE, {"_code": code})).first()
    if head_row is None:
        raise NotFound(f"workflow {code} not found", metadata={"workflow_code": str(code)})
    return await _load(conn, head_row._mapping, version)


async def _load(conn: Conn, head: RowMapping, version: int) -> WorkflowRecord:
    """One version (0 = current) of the workflow whose head row is ``head``: the head says what
    may change (name, release state, current version), the version is read once per master
    (:mod:`dsched_server.store.memo`)."""
    code = int(head["id"])
    wanted = version or head["current_version"]
    key = VersionKey(code, head["create_time"], wanted)
    stored = conn.versions.get(key) or await _read_version(conn, head, wanted)
    conn.versions.put(key, stored)
    spec = WorkflowSpec(
        project=head["project_name"],
        name=head["name"],
        tasks=stored.tasks,
        description=stored.description,
        params=dict(stored.params),
    )
    return WorkflowRecord(
        id=code,
        project=head["project_name"],
        project_id=head["project_id"],
        spec=spec,
        version=wanted,
        release_state=ReleaseState(head["release_state"]),
        create_time=head["create_time"],
        update_time=stored.create_time,
    )


async def _read_version(conn: Conn, head: RowMapping, wanted: int) -> Version:
    code = int(head["id"])
    vrow = (
        await conn.execute(select(V).where(V.c.workflow_id == code, V.c.version == wanted))
    ).first()
    if vrow is None:
        raise NotFound(
            f"workflow {head['project_name']}/{head['name']} has no version {wanted}",
            reason="VERSION_NOT_FOUND",
            metadata={"workflow": head["name"], "version": str(wanted)},
        )
    ups: dict[str, list[str]] = defaultdict(list)
    for e in await conn.execute(
        select(E.c.upstream, E.c.downstream)
        .where(E.c.workflow_id == code, E.c.version == wanted)
        .order_by(E.c.id)
    ):
        ups[e.downstream].append(e.upstream)
    tasks = tuple(
        task_from_json(r.name, r.task_type, r.spec, tuple(ups.get(r.name, ())))
        for r in await conn.execute(
            select(TD.c.name, TD.c.task_type, TD.c.spec)
            .where(TD.c.workflow_id == code, TD.c.version == wanted)
            .order_by(TD.c.position)
        )
    )
    v = vrow._mapping
    return Version(
        description=v["description"],
        params=dict(v["params"]),
        create_time=v["create_time"],
        tasks=tasks,
    )


async def workflow_codes(
    conn: Conn, project_id: int, after: str | None, limit: int
) -> list[tuple[int, str]]:
    """(code, name) of up to ``limit`` workflows of a project by name, after the name ``after``
    (the caller loads each definition while its page has room)."""
    query = select(W.c.id, W.c.name).where(W.c.project_id == project_id).order_by(W.c.name)
    if after is not None:
        query = query.where(W.c.name > after)
    return [(int(r.id), str(r.name)) for r in await conn.execute(query.limit(limit))]


async def workflow_code(conn: Conn, project: str, name: str) -> int:
    """The code of a workflow; NotFound if there is none."""
    return int((await _head(conn, project, name))._mapping["id"])


async def list_versions(
    conn: Conn, code: int, after: int | None, limit: int
) -> list[WorkflowVersionRecord]:
    """Up to ``limit`` versions of a workflow, newest first, older than ``after``.

    A page walks (workflow_id, version) backwards and counts each version's tasks on
    (workflow_id, version, name): counting every version's tasks first, then joining, read all of
    the workflow's task definitions for every page.
    """
    tasks = (
        select(func.count())
        .where(TD.c.workflow_id == V.c.workflow_id, TD.c.version == V.c.version)
        .scalar_subquery()
    )
    query = (
        select(V.c.version, V.c.description, V.c.create_time, tasks.label("n"))
        .where(V.c.workflow_id == code)
        .order_by(V.c.version.desc())
        .limit(limit)
    )
    if after is not None:
        query = query.where(V.c.version < after)
    return [
        WorkflowVersionRecord(
            version=r.version, description=r.description, task_count=r.n, create_time=r.create_time
        )
        for r in await conn.execute(query)
    ]


async def delete_workflow(conn: Conn, project: str, name: str) -> None:
    head = (await _head(conn, project, name))._mapping
    if head["release_state"] != ReleaseState.OFFLINE.value:
        raise FailedPrecondition(
            f"workflow {project}/{name} is ONLINE; take it offline before deleting it",
            reason="WORKFLOW_ONLINE",
            metadata={"project": project, "workflow": name},
        )
    running = await conn.scalar(
        select(func.count()).where(WI.c.workflow_id == head["id"], WI.c.state.in_(_UNFINISHED))
    )
    if running:
        raise FailedPrecondition(
            f"workflow {project}/{name} has {running} unfinished instance(s)",
            reason="WORKFLOW_HAS_RUNNING_INSTANCES",
            metadata={"project": project, "workflow": name},
        )
    await conn.execute(delete(WI).where(WI.c.workflow_id == head["id"]))
    await conn.execute(delete(W).where(W.c.id == head["id"]))


async def set_release_state(
    conn: Conn, project: str, name: str, state: ReleaseState, now: datetime
) -> WorkflowRecord:
    head = (await _head(conn, project, name))._mapping
    if head["release_state"] != state.value:
        await conn.execute(
            update(W).where(W.c.id == head["id"]).values(release_state=state.value, update_time=now)
        )
    return await get_workflow_by_code(conn, head["id"])
