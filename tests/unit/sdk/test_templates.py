"""``$[...]`` and ``${system....}`` templates checked by the SDK before any RPC
(``dsched/templates.py``): a workflow whose global or task parameter value cannot be expanded
fails ``Workflow.validate()`` locally, with the very violations the server's CreateWorkflow
decoding gives for the same definition (one copy of the parser serves both)."""

from __future__ import annotations

import pytest

from dsched import Shell, Workflow
from dsched.convert import workflow_spec_to_proto
from dsched.errors import InvalidWorkflow
from dsched.spec import WorkflowSpec
from dsched.templates import params_errors, parts, template_violations
from dsched_server.api.definitions import _workflow_spec
from tests.integration.api.test_time_params import HOSTILE


def build(global_value: str | None, task_value: str | None) -> Workflow:
    with Workflow(
        "wf", project="p", params={} if global_value is None else {"BAD": global_value}
    ) as wf:
        Shell("t", "true", params={} if task_value is None else {"BAD": task_value})
    return wf


def violations(exc: InvalidWorkflow) -> list[tuple[str, str]]:
    return [(v.field, v.description) for v in exc.violations]


def server_violations(spec: WorkflowSpec) -> list[tuple[str, str]]:
    with pytest.raises(InvalidWorkflow) as server:
        _workflow_spec(workflow_spec_to_proto(spec), "")
    return violations(server.value)


@pytest.mark.parametrize(("value", "fragment"), HOSTILE, ids=[h[1][:30] for h in HOSTILE])
@pytest.mark.parametrize("where", ["global", "task"])
def test_a_bad_template_fails_locally_as_the_server_refuses_it(
    value: str, fragment: str, where: str
) -> None:
    wf = build(value, None) if where == "global" else build(None, value)
    with pytest.raises(InvalidWorkflow) as local:
        wf.validate()
    field = "workflow.params['BAD']" if where == "global" else "workflow.tasks[0].params['BAD']"
    got = violations(local.value)
    assert [f for f, _ in got] == [field]
    assert fragment in got[0][1]
    assert got == server_violations(wf.to_spec())


def test_good_templates_pass_and_are_cut_into_their_parts() -> None:
    wf = build("$[yyyyMMdd-1] ${system.biz.date} $$[literal] ${HOME}", "$[add_months(yyyy-MM,1)]")
    assert wf.validate().params["BAD"].startswith("$[")
    cut = parts("a $[yyyyMMdd] b ${system.datetime}")
    assert cut[0] == "a " and cut[2] == " b "
    assert params_errors({"A": "$[yyyyMMdd]", "B": "no template"}) == {}
    (bad,) = template_violations("params", {"A": "$[yyyy"})
    assert (bad.field, bad.description) == (
        "params['A']",
        "value: '$[' without its ']' (at character 0 of the value)",
    )
