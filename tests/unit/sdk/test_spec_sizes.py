"""The size limits of a definition: what counts, and that the counted size bounds protobuf's own."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from dsched.convert import workflow_spec_to_proto
from dsched.errors import InvalidWorkflow
from dsched.options import Priority, TimeoutStrategy
from dsched.spec import (
    MAX_DEFINITION_BYTES,
    MAX_PARAMS_BYTES,
    MAX_SCRIPTS_BYTES,
    ShellSpec,
    TaskSpec,
    WorkflowSpec,
    check_workflow,
    encoded_size,
    params_bytes,
)

KIB = 1024
SLACK_PER_TASK = 74  # the most the counted size may exceed protobuf's for one task's scalars


def text(rng: random.Random, longest: int) -> str:
    alphabet = "ab_9é数🚀\n"
    return "".join(rng.choice(alphabet) for _ in range(rng.randrange(longest + 1)))


def random_spec(rng: random.Random) -> WorkflowSpec:
    tasks = tuple(
        TaskSpec(
            name=text(rng, 70) or "t",
            kind=ShellSpec(script=text(rng, 300)) if rng.random() < 0.9 else None,
            description=text(rng, 50),
            upstream=tuple(text(rng, 10) for _ in range(rng.randrange(4))),
            priority=rng.choice(list(Priority)),
            worker_group=text(rng, 10),
            retries=rng.choice([0, 3, 100, -1, 2**31 - 1]),
            retry_interval=timedelta(
                seconds=rng.choice([0, 1, 86400, 10**9]), microseconds=rng.randrange(10**6)
            ),
            timeout=timedelta(seconds=rng.choice([0, 60])),
            timeout_strategy=rng.choice(list(TimeoutStrategy)),
            delay=timedelta(microseconds=rng.choice([0, 1, 999_999])),
            params={text(rng, 8): text(rng, 200) for _ in range(rng.randrange(5))},
            disabled=rng.random() < 0.5,
        )
        for _ in range(rng.randrange(30))
    )
    return WorkflowSpec(
        project=text(rng, 20),
        name=text(rng, 20),
        tasks=tasks,
        description=text(rng, 100),
        params={text(rng, 8): text(rng, 500) for _ in range(rng.randrange(8))},
    )


@pytest.mark.parametrize("seed", range(200))
def test_the_counted_size_bounds_protobuf_s_closely(seed: int) -> None:
    spec = random_spec(random.Random(seed))
    exact = workflow_spec_to_proto(spec).ByteSize()
    counted = encoded_size(spec)
    assert exact <= counted <= exact + SLACK_PER_TASK * len(spec.tasks)


def test_a_large_script_is_counted_with_its_framing() -> None:
    spec = WorkflowSpec(
        project="p", name="w", tasks=(TaskSpec(name="a", kind=ShellSpec(script="x" * 300 * KIB)),)
    )
    exact = workflow_spec_to_proto(spec).ByteSize()
    assert exact <= encoded_size(spec) <= exact + SLACK_PER_TASK


def spec_of(
    *tasks: TaskSpec, params: dict[str, str] | None = None, description: str = ""
) -> WorkflowSpec:
    return WorkflowSpec(
        project="p", name="w", tasks=tasks, params=params or {}, description=description
    )


def too_large(spec: WorkflowSpec) -> InvalidWorkflow:
    with pytest.raises(InvalidWorkflow) as caught:
        check_workflow(spec)
    assert caught.value.reason == "DEFINITION_TOO_LARGE"
    return caught.value


def shell(name: str, script: str = "true", **kw: object) -> TaskSpec:
    return TaskSpec(name=name, kind=ShellSpec(script=script), **kw)  # type: ignore[arg-type]


def test_parameters_of_the_whole_definition_count_together() -> None:
    half = {f"p{i}": "v" * (60 * KIB) for i in range(2)}
    check_workflow(spec_of(shell("a", params=half), params=half))  # 240 KiB: fits
    err = too_large(spec_of(shell("a", params=half), shell("b", params=half), params=half))
    assert err.field == "workflow.params"
    assert str(MAX_PARAMS_BYTES) in err.violations[0].description


def test_parameter_size_is_names_plus_values_in_utf8() -> None:
    assert params_bytes({"ab": "é", "c": ""}) == 2 + 2 + 1


def test_scripts_count_together() -> None:
    script = "#" + "x" * (250 * KIB)
    check_workflow(spec_of(*(shell(f"t{i}", script) for i in range(4))))
    err = too_large(spec_of(*(shell(f"t{i}", script) for i in range(5))))
    assert err.field == "workflow.tasks"
    assert str(MAX_SCRIPTS_BYTES) in err.violations[0].description


def test_the_whole_encoding_is_limited() -> None:
    wide = "🚀" * 1024  # 4 KiB of description per task
    err = too_large(spec_of(*(shell(f"t{i}", description=wide) for i in range(600))))
    assert err.field == "workflow"
    assert str(MAX_DEFINITION_BYTES) in err.violations[0].description


def test_a_too_large_definition_reports_only_its_size() -> None:
    script = "#" + "x" * (250 * KIB)
    err = too_large(spec_of(*(shell("dup", script) for i in range(5))))  # also duplicate names
    assert [v.field for v in err.violations] == ["workflow.tasks"]
