"""`sleuth mcp` driven by a client nobody here wrote: the official MCP Inspector CLI (npm
``@modelcontextprotocol/inspector``, pinned by tests/inspector/package-lock.json), over stdio
as an agent client starts it. What it sees (issue 44): every tool's parameters described and
its answer typed, annotations, an unknown argument refused naming the nearest real one, a bad
argument said in one line, the text block what a model reads (a run_output page's text not a
second JSON copy), bytes that are not UTF-8 said and carried exactly.

Where node or the package is missing the test skips, unless SLEUTH_REQUIRE_INSPECTOR=1 (set
by .ci/run), which makes its absence a failure: (cd tests/inspector && npm ci)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from sleuth import __version__
from support.cli import SLEUTH
from support.mcp import http_server

INSPECTOR = Path(__file__).parents[1] / "inspector" / "node_modules" / ".bin" / "mcp-inspector"


def _inspector() -> Path:
    if INSPECTOR.exists() and shutil.which("node"):
        return INSPECTOR
    if os.environ.get("SLEUTH_REQUIRE_INSPECTOR") == "1":
        pytest.fail("SLEUTH_REQUIRE_INSPECTOR=1 but the MCP Inspector is not installed: (cd tests/inspector && npm ci)")
    pytest.skip("the MCP Inspector CLI is not installed: (cd tests/inspector && npm ci)")


@pytest.fixture
def project(make_project) -> Path:
    return make_project(workspace=True, session="inspector hunt")


def inspect(project: Path, method: str, tool: str | None = None, *, era: str = "legacy",
            server: list[str] | None = None, **args: Any) -> tuple[int, dict[str, Any]]:
    """One Inspector CLI call (it starts `sleuth mcp` over stdio unless *server* names a URL and
    its headers); *era*: the protocol era it negotiates (legacy: initialize; modern: 2026-07-28)."""
    target = server if server is not None else [SLEUTH, "mcp", "--no-agent"]
    cmd = [str(_inspector()), "--cli", "--protocol-era", era, *target, "--method", method]
    if tool is not None:
        cmd += ["--tool-name", tool]
    for key, value in args.items():
        cmd += ["--tool-arg", f"{key}={value if isinstance(value, str) else json.dumps(value)}"]
    proc = subprocess.run(cmd, cwd=project, capture_output=True, text=True, timeout=120, env=dict(os.environ))
    # the answer is the first JSON document on stdout (a refused call adds an error line after it)
    data, _end = json.JSONDecoder().raw_decode(proc.stdout.lstrip())
    return proc.returncode, data


@pytest.mark.slow  # ~40 s: each call starts `sleuth mcp` afresh
def test_the_inspector_cli_sees_described_typed_annotated_tools_and_one_line_refusals(project):
    _rc, listed = inspect(project, "tools/list")
    tools = {t["name"]: t for t in listed["tools"]}
    assert len(tools) == 15
    for name, t in tools.items():
        assert "\n" not in t["description"] and "  " not in t["description"], name
        for param, schema in t["inputSchema"].get("properties", {}).items():
            assert schema.get("description"), f"{name}.{param} has no description"
        out = t["outputSchema"]
        assert out["type"] == "object" and out.get("properties"), f"{name}: a bare outputSchema"
        hints = t["annotations"]
        assert {"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"} <= set(hints), name
    assert tools["remedy_apply"]["annotations"]["destructiveHint"] is True
    assert tools["run_output"]["annotations"]["readOnlyHint"] is True
    assert tools["status"]["annotations"]["readOnlyHint"] is True
    assert "run_id" in tools["run_output"]["inputSchema"]["properties"]

    rc, typo = inspect(project, "tools/call", "probe_run", shell="echo typo", forse="true")
    assert rc != 0 and typo["isError"] is True
    said = typo["content"][0]["text"]
    assert "unknown argument 'forse'; did you mean 'force'?" in said and "\n" not in said
    rc, missing = inspect(project, "tools/call", "note")
    assert missing["isError"] and missing["content"][0]["text"] == "Error executing tool note: missing argument 'text'"
    rc, nosuch = inspect(project, "tools/call", "status", target="nosuch")
    assert nosuch["isError"] and "no target 'nosuch'" in nosuch["content"][0]["text"]

    # bytes that are not UTF-8, and a last line without a newline
    rc, ran = inspect(project, "tools/call", "probe_run", shell="printf 'a\\n\\xff\\xfe\\nlast'")
    assert rc == 0 and not ran.get("isError"), ran
    run = ran["structuredContent"]["run_id"]
    assert "not UTF-8" in ran["content"][0]["text"]
    rc, page = inspect(project, "tools/call", "run_output", run_id=run)
    data = page["structuredContent"]
    assert [(ln["n"], ln.get("utf8", True), ln.get("newline", True)) for ln in data["lines"]] == [
        (1, True, True), (2, False, True), (3, True, False)]
    assert base64.b64decode(data["lines"][1]["base64"]) == b"\xff\xfe" and data["lines_total"] == 3
    text = page["content"][0]["text"]
    assert "2: \ufffd\ufffd  [not UTF-8" in text and "3: last" in text
    assert not text.lstrip().startswith("{")  # what a model reads, not the JSON again


@pytest.mark.slow  # ~30 s: each call starts a client afresh
def test_the_inspector_cli_on_the_2026_07_28_revision_over_stdio_and_http(project):
    """Issue 44: the newest revision (no initialize handshake, `server/discover`) as the
    Inspector's own client speaks it, over stdio and over the token-guarded HTTP server."""
    rc, hello = inspect(project, "initialize", era="modern")
    assert rc == 0 and hello["protocolVersion"] == "2026-07-28", hello
    assert hello["serverInfo"] == {"name": "sleuth", "version": __version__}
    rc, first = inspect(project, "tools/call", "probe_run", era="modern", shell="echo modern")
    assert rc == 0 and first["structuredContent"]["classification"] == "completed", first
    rc, again = inspect(project, "tools/call", "probe_run", era="modern", shell="echo modern")
    data = again["structuredContent"]
    assert data["refused"] == "circular-retest" and data["earlier_run"] == first["structuredContent"]["run_id"]
    assert "the earlier run's answer" in again["content"][0]["text"]

    with http_server(project) as (url, token, stderr):
        authed = [url, "--header", f"Authorization: Bearer {token}"]
        for era, version in (("modern", "2026-07-28"), ("legacy", "2025-11-25")):
            rc, hello = inspect(project, "initialize", era=era, server=authed)
            assert rc == 0 and hello["protocolVersion"] == version, hello
        rc, listed = inspect(project, "tools/list", era="modern", server=authed)
        assert rc == 0 and len(listed["tools"]) == 15
        rc, status = inspect(project, "tools/call", "status", era="modern", server=authed)
        assert rc == 0 and status["structuredContent"]["runs"] == 1, status  # the refused repeat never ran
        bare = subprocess.run([str(_inspector()), "--cli", "--protocol-era", "modern", "--format", "json", url,
                               "--method", "tools/list", "--stored-auth-only"],
                              capture_output=True, text=True, timeout=120)
        assert bare.returncode != 0 and "probe_run" not in bare.stdout, bare.stdout
    assert token not in "".join(stderr)
