"""HTTP tasks through a real ``dsched standalone`` against a real HTTP server on 127.0.0.1: success
with an OUT parameter for the downstream task, a status or body mismatch fails, a URL or a redirect
outside the worker's allow-list is refused, a slow server times out, parameters are percent-encoded
in the URL, and secrets stay out of the log."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from dsched import Client, Http, Python, Workflow, WorkflowState
from tests.e2e.conftest import Standalone, by_task, clean_env, cli, parse_table, start_standalone

SECRET = "s3cr3t-t0k3n"


class _Site:
    """A local HTTP server recording the requests it answers; ``release`` ends slow answers."""

    def __init__(self) -> None:
        self.requests: list[dict[str, object]] = []
        self.release = threading.Event()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def _answer(
                self, status: int, body: bytes, headers: dict[str, str] | None = None
            ) -> None:
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                self._handle()

            def do_POST(self) -> None:
                self._handle()

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length).decode()
                site.requests.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "headers": dict(self.headers),
                        "body": body,
                    }
                )
                if self.path.startswith("/api/ok"):
                    self._answer(200, b'{"status": "green", "rows": 3}')
                elif self.path.startswith("/api/fail"):
                    self._answer(503, b"maintenance")
                elif self.path.startswith("/api/slow"):
                    site.release.wait(30)
                    self._answer(200, b"late")
                elif self.path.startswith("/api/big"):
                    self._answer(200, b"x" * (2 * 1024 * 1024))
                elif self.path.startswith("/api/away"):
                    self._answer(302, b"", {"Location": f"http://127.0.0.1:{site.port}/admin"})
                else:
                    self._answer(404, b"no such page")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def site() -> Iterator[_Site]:
    s = _Site()
    yield s
    s.close()


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory, site: _Site) -> Iterator[Standalone]:
    env = clean_env(
        DSCHED_LOG_LEVEL="INFO",
        DSCHED_CPU_THRESHOLD="1",
        DSCHED_HTTP_ALLOW=f"http://127.0.0.1:{site.port}/api",
    )
    server = start_standalone(tmp_path_factory.mktemp("http-server"), env=env)
    yield server
    server.assert_clean_stop()


@pytest.fixture
def client(http_server: Standalone) -> Iterator[Client]:
    with Client.connect(http_server.address) as c:
        yield c


def _log(client: Client, task_instance_id: int) -> str:
    return b"".join(c.data for c in client.tail_log(task_instance_id)).decode()


def _run_one(
    client: Client, name: str, **http: object
) -> tuple[WorkflowState, str, dict[str, str]]:
    with Workflow(name, project="http") as wf:
        Http("call", **http)  # type: ignore[arg-type]
    done = wf.run(client=client, timeout=90)
    (attempt,) = by_task(client, done.id)["call"]
    return done.state, _log(client, attempt.id), dict(attempt.out_params)


def test_success_sets_the_response_as_an_out_param_for_downstream(
    client: Client, site: _Site, tmp_path: Path
) -> None:
    seen = tmp_path / "seen"
    with Workflow("fetch", project="http", params={"day": "2024/05 06&x=1"}) as wf:
        fetch = Http(
            "fetch",
            site.url("/api/ok?day=${day}&token=" + SECRET),
            method="POST",
            headers={"Authorization": f"Bearer {SECRET}", "X-Day": "${day}"},
            body='{"day": "${day}"}',
            expected_status=[200, 201],
            body_contains='"green"',
            response_param="answer",
        )
        use = Python(
            "use",
            f"import os, pathlib\npathlib.Path({str(seen)!r}).write_text(os.environ['answer'])\n",
        )
        fetch >> use
    done = wf.run(client=client, timeout=90)

    assert done.state is WorkflowState.SUCCEEDED, done
    assert seen.read_text() == '{"status": "green", "rows": 3}'
    request = site.requests[-1]
    assert request["method"] == "POST"
    assert request["path"] == f"/api/ok?day=2024%2F05%2006%26x%3D1&token={SECRET}"
    assert request["body"] == '{"day": "2024/05 06&x=1"}'
    assert request["headers"]["X-Day"] == "2024/05 06&x=1"  # type: ignore[index]
    attempt = by_task(client, done.id)["fetch"][0]
    log = _log(client, attempt.id)
    assert "> POST http://127.0.0.1:" in log and "< 200 OK" in log
    assert "Authorization: [redacted]" in log and "token=[redacted]" in log
    assert SECRET not in log


def test_an_unexpected_status_fails(client: Client, site: _Site) -> None:
    state, log, out = _run_one(client, "fails", url=site.url("/api/fail"), response_param="x")
    assert state is WorkflowState.FAILED
    assert "< 503 Service Unavailable" in log and "maintenance" in log
    assert "error: status 503 is not an expected one (2xx)" in log
    assert out == {}


def test_a_body_without_the_expected_text_fails(client: Client, site: _Site) -> None:
    state, log, _ = _run_one(client, "nobody", url=site.url("/api/ok"), body_contains="red")
    assert state is WorkflowState.FAILED
    assert "error: the response body does not contain 'red'" in log


def test_a_url_outside_the_allow_list_is_refused_without_a_request(
    client: Client, site: _Site
) -> None:
    before = len(site.requests)
    # (user info such as http://allowed@evil/ is refused by the definition's validation)
    for name, url in (("other", site.url("/admin")), ("dotdot", site.url("/api/../admin"))):
        state, log, _ = _run_one(client, name, url=url)
        assert state is WorkflowState.FAILED
        assert "is not allowed by this worker's http_allow setting" in log
    assert len(site.requests) == before


def test_a_redirect_outside_the_allow_list_is_refused(client: Client, site: _Site) -> None:
    state, log, _ = _run_one(client, "away", url=site.url("/api/away"))
    assert state is WorkflowState.FAILED
    assert "error: redirect (302) to http://127.0.0.1:" in log and "refused" in log
    assert not any(r["path"] == "/admin" for r in site.requests)


def test_an_expected_redirect_is_not_followed(client: Client, site: _Site) -> None:
    state, log, _ = _run_one(client, "stay", url=site.url("/api/away"), expected_status=302)
    assert state is WorkflowState.SUCCEEDED, log


def test_a_slow_server_times_out(client: Client, site: _Site) -> None:
    state, log, _ = _run_one(client, "slow", url=site.url("/api/slow"), request_timeout=1)
    assert state is WorkflowState.FAILED
    assert "error: request failed: " in log and "timed out" in log


def test_a_response_over_the_cap_fails(client: Client, site: _Site) -> None:
    state, log, _ = _run_one(client, "big", url=site.url("/api/big"), max_response_bytes=1000)
    assert state is WorkflowState.FAILED
    assert "error: the response body is larger than 1000 bytes (max_response_bytes)" in log
    state, log, _ = _run_one(client, "bigout", url=site.url("/api/big"), response_param="all")
    assert state is WorkflowState.FAILED  # 2 MiB is over the default cap of 1 MiB
    assert "larger than 1048576 bytes" in log


def test_a_json_response_as_out_param_is_verbatim(client: Client, site: _Site) -> None:
    state, _, out = _run_one(client, "json", url=site.url("/api/ok"), response_param="doc")
    assert state is WorkflowState.SUCCEEDED
    assert json.loads(out["doc"]) == {"status": "green", "rows": 3}


def test_dsched_show_names_the_types_and_the_request(
    client: Client, site: _Site, http_server: Standalone
) -> None:
    with Workflow("shown", project="http") as wf:
        Http(
            "call",
            site.url("/api/ok?token=" + SECRET),
            headers={"Authorization": SECRET},
            response_param="doc",
        ) >> Python("after", "print('done')")
    done = wf.run(client=client, timeout=90)
    assert done.state is WorkflowState.SUCCEEDED

    shown = cli(http_server, "show", str(done.id))
    assert shown.returncode == 0, shown.stderr
    types = {row["TASK"]: row["TYPE"] for row in parse_table(shown.stdout)}
    assert types == {"call": "HTTP", "after": "PYTHON"}
    assert f"call: HTTP GET http://127.0.0.1:{site.port}/api/ok?...  expects 2xx" in shown.stdout
    assert "after: PYTHON worker default python, 1 lines" in shown.stdout
    assert SECRET not in shown.stdout
