"""Constants with one home: registry paths, default ports and intervals."""

from __future__ import annotations

# Registry layout (relative to the registry's namespace / ZooKeeper chroot).
MASTERS_PATH = "/nodes/masters"  # ephemeral children "<host:port>", data = Heartbeat proto bytes
WORKERS_PATH = (
    "/nodes/workers"  # ephemeral children "<group>/<host:port>" flattened as "<group>@<host:port>"
)
LOCKS_PATH = "/locks"  # lock nodes "/locks/<name>"
EPOCHS_PATH = "/epochs"  # sequential nodes that hand out worker epochs
ELECTIONS_PATH = "/elections"  # leader elections "/elections/<name>", queued like locks

DEFAULT_MASTER_PORT = 5678  # the client listener: MasterService, the LogService proxy
# The cluster listener: TaskEventService, which only workers may call (ARCHITECTURE.md §1).
DEFAULT_CLUSTER_PORT = 5679
DEFAULT_WORKER_PORT = 1234
DEFAULT_WORKER_GROUP = "default"
# Workflow instances a master drives at once before it reports BUSY and stops claiming.
DEFAULT_MASTER_CAPACITY = 10_000

HEARTBEAT_INTERVAL_S = 5.0
# Liveness defaults (ARCHITECTURE.md §4). A member killed outright is taken over about one session
# timeout after its death (plus up to one ZooKeeper tick): a master's instances at once (the epoch
# fence makes that safe), a worker's tasks as soon as its death is confirmed (nothing listens at its
# address, or a new incarnation registered there). A worker that is only missing (host down or cut
# off) gets the failover delay more, time enough to fence itself first. 4 s sessions survive a
# network stall of about 2 s; workers ride out a ZooKeeper restart of about 3 s.
REGISTRY_SESSION_TIMEOUT_S = 4.0
FAILOVER_DELAY_S = 4.0
# A log follow or watch stream with nothing to say sends an empty frame this often, so clients can
# tell a quiet stream from a dead one.
PROGRESS_FRAME_INTERVAL_S = 5.0
# Grace between SIGTERM and SIGKILL when a task's process group is killed.
KILL_GRACE_S = 5.0
# Retention on workers (README "Retention"): an unsuccessful attempt's working directory is kept a
# day to look at what it left (a successful one's goes at once); a task log a month after its
# last write. Either grows without bound otherwise; 0 days keeps logs for ever.
WORKDIR_KEEP_FAILED_S = 86400.0
LOG_RETENTION_DAYS = 30.0
# Retention on masters: request ids are idempotency keys (a client retries within minutes), so a
# week is ample; events (the watch history) of instances finished a month ago go; finished
# instances themselves are users' history and stay unless an operator sets an age.
REQUEST_ID_RETENTION_DAYS = 7.0
EVENT_RETENTION_DAYS = 30.0
INSTANCE_RETENTION_DAYS = 0.0
RETENTION_INTERVAL_S = 3600.0
