"""A task's environment: the worker's allow-listed variables, parameters, dsched's identities."""

from __future__ import annotations

from dsched_worker.tasks.environment import (
    DEFAULT_ALLOW,
    allowed,
    attempt_environment,
    identities,
    inherited,
    size,
    task_environment,
)

WORKER_ENV = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/var/lib/dsched",
    "USER": "dsched",
    "LANG": "C.UTF-8",
    "LC_TIME": "en_GB.UTF-8",
    "TZ": "UTC",
    "TMPDIR": "/var/tmp",
    "https_proxy": "http://proxy:3128",
    "SPARK_HOME": "/opt/spark",
    "SITE": "eu-1",
    # Never inherited unless allow-listed: whatever the worker itself was started with.
    "LD_PRELOAD": "/tmp/evil.so",
    "BASH_ENV": "/tmp/evil.sh",
    "PYTHONPATH": "/tmp/evil",
    "SSH_AUTH_SOCK": "/run/agent",
    # The worker's own settings (a database password) and a spoofed identity.
    "DSCHED_DB_URL": "postgresql://dsched:secret@db/dsched",
    "DSCHED_TASK_NAME": "spoofed",
    "dsched_registry_auth": "u:p",
}
DEFAULTS = {"PATH", "HOME", "USER", "LANG", "LC_TIME", "TZ", "TMPDIR", "https_proxy"}


def test_only_the_default_allow_list_is_inherited() -> None:
    assert set(inherited(WORKER_ENV, DEFAULT_ALLOW)) == DEFAULTS


def test_extra_entries_and_prefixes_are_inherited_but_never_dsched_settings() -> None:
    allow = (*DEFAULT_ALLOW, "SITE", "SPARK_*", "DSCHED_*", "dsched_registry_auth")
    assert set(inherited(WORKER_ENV, allow)) == DEFAULTS | {"SITE", "SPARK_HOME"}


def test_the_allow_list_is_case_sensitive_as_the_programs_reading_it_are() -> None:
    assert allowed("PATH", DEFAULT_ALLOW)
    assert not allowed("Path", DEFAULT_ALLOW)
    assert allowed("LC_ALL", DEFAULT_ALLOW)
    assert not allowed("LC", DEFAULT_ALLOW)


def test_parameters_come_after_the_worker_and_identities_last(make_execution) -> None:
    execution = make_execution(
        params={"day": "2024-02-29", "LANG": "de_DE.UTF-8", "TZ": "Asia/Shanghai"}
    )
    env, notes = task_environment(WORKER_ENV, execution)
    assert notes == []
    assert env["day"] == "2024-02-29"
    assert (env["LANG"], env["TZ"]) == ("de_DE.UTF-8", "Asia/Shanghai")  # not reserved
    assert env["PATH"] == "/usr/bin:/bin"
    assert {k: env[k] for k in identities(execution)} == identities(execution)
    assert env["DSCHED_TASK_NAME"] == "load" and "DSCHED_DB_URL" not in env
    assert set(env) == DEFAULTS | {"day"} | set(identities(execution))


def test_refused_parameters_are_left_out_with_a_note(make_execution) -> None:
    # Only a definition stored before a name became reserved, or a forged dispatch, gets here.
    params = {
        "BASH_ENV": "$(touch /tmp/pwned)",
        "PATH": "/tmp/evil",
        "ld_preload": "/tmp/evil.so",
        "DSCHED_ATTEMPT": "99",
        "ok": "1",
    }
    env, notes = task_environment(WORKER_ENV, make_execution(params=params))
    assert env["ok"] == "1"
    assert "BASH_ENV" not in env and "ld_preload" not in env
    assert env["PATH"] == "/usr/bin:/bin"
    assert env["DSCHED_ATTEMPT"] == "2"
    assert len(notes) == 4
    assert notes[0] == (
        "parameter not set: parameter name 'BASH_ENV' is reserved: bash or sh reads it at "
        "start-up or it changes how they run (names are compared without regard to case)"
    )
    assert all(n.startswith("parameter not set: parameter name ") for n in notes)


def test_identities(make_execution) -> None:
    execution = make_execution(worker_address="10.0.0.5:1234", worker_epoch=17)
    assert identities(execution) == {
        "DSCHED_IDEMPOTENCY_KEY": "5-load-2",
        "DSCHED_TASK_INSTANCE_ID": "11",
        "DSCHED_WORKFLOW_INSTANCE_ID": "5",
        "DSCHED_TASK_NAME": "load",
        "DSCHED_ATTEMPT": "2",
        "DSCHED_WORKER_ADDRESS": "10.0.0.5:1234",
        "DSCHED_WORKER_EPOCH": "17",
        "DSCHED_FENCING_TOKEN": "17:2",
    }


def test_size_counts_bytes_as_execve_does() -> None:
    assert size({}) == 0
    assert size({"A": "1", "表": "é"}) == len(b"A=1\0") + len("表=é\0".encode())


def test_attempt_environment_from_the_filtered_variables_is_task_environment(
    make_execution,
) -> None:
    # The spawner filters the worker's variables once and reuses them for every attempt.
    filtered = inherited(WORKER_ENV, DEFAULT_ALLOW)
    kept = dict(filtered)
    execution = make_execution(params={"day": "2024-02-29", "PATH": "/tmp/evil"})
    assert attempt_environment(filtered, execution) == task_environment(WORKER_ENV, execution)
    assert filtered == kept  # not changed: the next attempt gets none of this one's variables
