"""`sleuth mcp` driven by the MCP SDK's own client, as a coding agent drives it: in memory
(the server object in this process) and over stdio (`sleuth mcp` as a subprocess, how agent
clients start it), against the local target and the real sshd's jump → host → pct chain.

The seed's two losses are replayed: a diagnostic printed after a 7,000-line config dump
must come back in the bounded answer (and the whole dump through run_output), and a
`python -c` with nested quotes must arrive byte for byte through ssh → jump → pct."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.types import Implementation
from sleuth import __version__
from sleuth.app.mcp_server import build_server
from sleuth.sessions import Investigation, Workspace
from support.cli import SLEUTH, sleuth
from support.mcp import AGENT, answer, error_of
from support.pilot import record_notifications
from support.ui_sessions import make_workspace

# The seed's first failure, as a script: HuggingFace-style config dump (7,000 lines), the
# diagnostic the agent wanted, a second dump, then the crash on stderr.
DUMP_SCRIPT = r'''
import json, sys
print("loading /dev/shm/Qwen3.6-27B")
cfg = {f"layer_{i}": {"hidden_size": 5120, "intermediate_size": 25600, "rope_theta": 1e6, "name": f"blk{i}"}
       for i in range(1166)}
print("Qwen3Config " + json.dumps(cfg, indent=2))
print("In flex_attention_forward - is_fx_tracing: True (thread drafter-2)")
print("Qwen3VisionConfig " + json.dumps({f"v{i}": i for i in range(300)}, indent=2))
sys.stdout.flush()
print("Traceback (most recent call last):", file=sys.stderr)
print('  File "/root/debug_fx.py", line 88, in <module>', file=sys.stderr)
print("RuntimeError: Detected that you are using FX to symbolically trace a dynamo-optimized function",
      file=sys.stderr)
sys.exit(1)
'''


@pytest.fixture
def project(make_project) -> Path:
    root = make_project(workspace=True, session="mcp hunt")
    (root / "debug_fx.py").write_text(DUMP_SCRIPT)
    return root


def current(project: Path) -> Investigation:
    return Investigation.replay(Workspace(project).resolve(None))


async def test_the_seed_diagnostic_after_a_7000_line_dump_is_in_the_bounded_answer_and_the_whole_dump_in_run_output(project):
    server = build_server(Workspace(project), no_agent=True)
    async with Client(server, client_info=AGENT) as client:
        cmd = f"cd {project} && {sys.executable} debug_fx.py"
        data = answer(await client.call_tool("probe_run", {"shell": cmd, "budget": 6000}))
        assert data["classification"] == "failed" and data["command"] == cmd
        out = data["output"]
        assert out["lines_total"] == 7305 and out["bytes"] <= out["budget_bytes"] == 6000
        shown = {item["n"]: item["text"] for item in out["lines"] if "n" in item}
        # the diagnostic between the two dumps, and the crash, each with its line number
        assert shown[7000] == "In flex_attention_forward - is_fx_tracing: True (thread drafter-2)"
        assert shown[7305].startswith("RuntimeError: Detected that you are using FX")
        assert shown[7303] == "Traceback (most recent call last):"
        # what was left out is said: how many lines, which dump, how to read it
        assert out["left_out"] == 7305 - len(shown) and out["left_out"] > 7000
        gaps = [item for item in out["lines"] if "omitted" in item]
        assert sum(g["count"] for g in gaps) == out["left_out"]
        assert any("6,998 lines of JSON/config: Qwen3Config {" in f for g in gaps for f in g.get("folds", [])), gaps
        assert "run_output" in out["read_more"]
        run = data["run_id"]

        # the whole output, page by page, is every byte the script wrote
        pages, start = [], 1
        while start is not None:
            page = answer(await client.call_tool("run_output", {"run": run, "start": start, "count": 3000}))
            assert page["lines_total"] == 7305
            pages += page["lines"]
            start = page["next_start"]
        assert [p["n"] for p in pages] == list(range(1, 7306))
        stdout = "\n".join(p["text"] for p in pages if p["stream"] == "stdout") + "\n"
        with current(project) as inv:
            assert stdout.encode() == inv.store.output_bytes(run, "stdout")
        assert sum(1 for p in pages if p["text"].startswith('  "layer_')) == 1166

        # grep finds it, counted; one stream alone
        found = answer(await client.call_tool("run_output", {"run": run, "grep": r"is_fx_tracing: (True|False)"}))
        assert found["matched"] == 1 and found["lines"] == [
            {"n": 7000, "stream": "stdout", "text": "In flex_attention_forward - is_fx_tracing: True (thread drafter-2)"}]
        err = answer(await client.call_tool("run_output", {"run": run, "stream": "stderr"}))
        assert [ln["n"] for ln in err["lines"]] == [1, 2, 3] and err["lines_total"] == 3
        bad = error_of(await client.call_tool("run_output", {"run": run, "grep": "(unclosed"}))
        assert "not a regular expression" in bad


SECRET = "hf_" + "Zq7" * 10
MODERN = "2026-07-28"  # the protocol revision without the initialize handshake


def test_the_2026_07_28_revision_on_the_wire_needs_no_handshake(project):
    """Issue 44: a client of the newest revision speaks first with `server/discover` and then
    calls tools, each request carrying its own envelope (version, client, capabilities): no
    `initialize`. Driven here as raw JSON-RPC lines on the real `sleuth mcp` subprocess, so
    nothing of the SDK's client stands between the test and the wire."""
    import subprocess

    proc = subprocess.Popen([SLEUTH, "mcp", "--no-agent"], cwd=project, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "wire-agent", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": {}}
    asked = 0

    def ask(method: str, **params: Any) -> dict[str, Any]:
        nonlocal asked
        asked += 1
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": asked, "method": method,
                                     "params": {**params, "_meta": meta}}) + "\n")
        proc.stdin.flush()
        reply = json.loads(proc.stdout.readline())
        assert reply["id"] == asked, reply
        return reply

    try:
        found = ask("server/discover")["result"]
        assert MODERN in found["supportedVersions"], found
        assert found["_meta"]["io.modelcontextprotocol/serverInfo"] == {"name": "sleuth", "version": __version__}
        assert "tools" in found["capabilities"] and "probe_run" in found["instructions"]
        tools = {t["name"]: t for t in ask("tools/list")["result"]["tools"]}
        assert tools["probe_run"]["inputSchema"]["properties"]["shell"]["description"]
        first = ask("tools/call", name="probe_run", arguments={"shell": "echo wire"})["result"]
        assert not first.get("isError") and first["structuredContent"]["classification"] == "completed", first
        assert "stdout had 1 line," in first["structuredContent"]["reason"]
        again = ask("tools/call", name="probe_run", arguments={"shell": "echo wire"})["result"]["structuredContent"]
        assert again["refused"] == "circular-retest" and again["earlier_run"] == first["structuredContent"]["run_id"]
        typo = ask("tools/call", name="probe_run", arguments={"shell": "echo typo", "forse": True})["result"]
        assert typo["isError"] and "did you mean 'force'?" in typo["content"][0]["text"]
        # the era is the client's first request's: a handshake after it is refused, not mixed in
        late = ask("initialize", protocolVersion="2025-11-25", capabilities={},
                   clientInfo={"name": "late", "version": "0"})
        assert late["error"]["code"] == -32022 and MODERN in late["error"]["data"]["supported"], late
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=20)
    with current(project) as inv:
        ran = [r for r in inv.state.runs.values() if r.params.get("cmd") == "echo wire"]
        assert len(ran) == 1, [(r.id, r.params) for r in inv.state.runs.values()]  # the repeat was refused, not run
        assert inv.state.author(ran[0].started_seq) == "mcp:wire-agent"  # named from its envelope, not a handshake


@pytest.mark.slow
async def test_both_protocol_eras_see_the_same_tools_and_answers(project):
    """The handshake era (2025-11-25, initialize) and the 2026-07-28 revision (server/discover)
    over stdio: the same tools with the same schemas, the same typed answers, the client named."""
    seen = {}
    for mode in ("legacy", MODERN):
        params = StdioServerParameters(command=SLEUTH, args=["mcp", "--no-agent"], cwd=str(project), env=dict(os.environ))
        async with Client(params, mode=mode, client_info=Implementation(name=f"agent-{mode}", version="0")) as client:
            assert client.protocol_version == ("2025-11-25" if mode == "legacy" else MODERN)
            listed = (await client.list_tools()).tools
            status = answer(await client.call_tool("status", {}))
            answer(await client.call_tool("note", {"text": f"from {mode}"}))
            seen[mode] = ({t.name: (t.input_schema, t.output_schema, t.annotations) for t in listed},
                          sorted(status))
    assert seen["legacy"] == seen[MODERN]
    with current(project) as inv:
        authors = {n.text: inv.state.author(n.seq) for n in inv.state.notes}
        assert authors == {"from legacy": "mcp:agent-legacy", f"from {MODERN}": f"mcp:agent-{MODERN}"}


async def test_an_agent_repeating_a_shell_command_in_the_same_state_gets_the_earlier_answer(project):
    """Issue 44: the agent's own loop, through the SDK's client over stdio (`sleuth mcp`, as
    agent clients start it). The same command in the same measured state is refused with the
    earlier run's answer; `force` with a reason runs it; a command declared a poll repeats."""
    server = StdioServerParameters(command=SLEUTH, args=["mcp", "--no-agent"], cwd=str(project), env=dict(os.environ))
    async with Client(server, client_info=AGENT) as client:
        # the SDK client's default: server/discover, no initialize handshake
        assert client.protocol_version == MODERN, client.protocol_version
        cmd = f"cd {project} && {sys.executable} debug_fx.py | tail -20"  # the seed's own habit
        first = answer(await client.call_tool("probe_run", {"shell": cmd}))
        again = answer(await client.call_tool("probe_run", {"shell": cmd}))
        assert again["refused"] == "circular-retest" and again["earlier_run"] == first["run_id"], again
        assert f"this repeats #{first['run_id']} (`{cmd}` on local" in again["message"]
        assert again["earlier"]["run_id"] == first["run_id"] and again["earlier"]["classification"] == first["classification"]
        forced = answer(await client.call_tool("probe_run", {"shell": cmd, "force": True, "reason": "the job was restarted"}))
        assert forced["forced_because"] == "the job was restarted" and forced["run_id"] != first["run_id"]
        polled = [answer(await client.call_tool("probe_run", {"shell": "date +%s%N", "poll": i == 0})) for i in range(3)]
        assert all("run_id" in p and "refused" not in p for p in polled), polled
        assert "poll goes with shell" in error_of(await client.call_tool("probe_run", {"probe": "target-check", "poll": True}))
        # a sample of a flaky failure: never refused, its runs in this state pooled as trials
        flaky = f"cd {project} && n=$(cat flaky.count 2>/dev/null || echo 0); echo $((n+1)) > flaky.count; test $((n % 2)) = 1"
        samples = [answer(await client.call_tool("probe_run", {"shell": flaky, "sample": True}))["samples"] for _ in range(4)]
        assert [(s["runs"], s["failed"]) for s in samples] == [(1, 1), (2, 1), (3, 2), (4, 2)], samples
        assert samples[-1]["said"].startswith("sample 4 of this command in this state: 2 of 4 failed (rate 50%; 95% interval")


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["memory", "stdio"])
async def test_every_tool_through_the_sdk_client(project, transport, monkeypatch):
    """Every tool, through the SDK's client: in this process, and over stdio to `sleuth mcp`."""
    monkeypatch.setenv("HF_TOKEN", SECRET)  # a secret in the server's environment: never in an answer
    if transport == "memory":
        server: Any = build_server(Workspace(project), no_agent=True)
    else:
        server = StdioServerParameters(command=SLEUTH, args=["mcp", "--no-agent"], cwd=str(project),
                                       env=dict(os.environ))
    async with Client(server, client_info=AGENT) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert tools == {"probe_run", "run_output", "stacks", "status", "hypotheses", "events", "note", "symptom_add",
                         "hypothesis_add", "link", "baseline", "known", "remedy_preview", "remedy_apply",
                         "remedy_revert"}

        status = answer(await client.call_tool("status", {}))
        assert status["state"]["known"] is False and "unknown" in status["state"]["said"]
        step = status["next_step"]
        assert step["action"] == "run" and step["probe"] in status["probes"] and step["said"] == f"run {step['probe']}"

        sym = answer(await client.call_tool("symptom_add", {"id": "fx-trace-error"}))
        assert "compile-race" in sym["explained_by"] and "FX" in sym["title"]
        answer(await client.call_tool("hypothesis_add", {"id": "cache-wiped", "title": "the compile cache was wiped",
                                                         "explains": ["fx-trace-error"], "competes": ["compile-race"]}))
        answer(await client.call_tool("link", {"src": "cache-wiped", "kind": "exposes", "dst": "compile-race"}))
        bad_link = error_of(await client.call_tool("link", {"src": "cache-wiped", "kind": "fixes", "dst": "compile-race"}))
        assert "unknown link kind" in bad_link
        hyps = answer(await client.call_tool("hypotheses", {}))
        mine = [h for h in hyps["hypotheses"] if h["id"] == "cache-wiped"][0]
        assert mine["status"] == "open" and {"kind": "competes", "to": "compile-race"} in mine["links"]

        # a probe, then the very same check in the same state: refused, naming the earlier run
        first = answer(await client.call_tool("probe_run", {"probe": "env-fingerprint", "params": {"import_torch": False}}))
        assert first["classification"] == "completed" and first["state"]["known"] is True
        assert first["state"]["versions"]["python"].startswith("3.")
        again = answer(await client.call_tool("probe_run", {"probe": "env-fingerprint", "params": {"import_torch": False}}))
        assert again["refused"] == "circular-retest" and again["earlier_run"] == first["run_id"]
        assert f"this repeats #{first['run_id']}" in again["message"]
        assert again["earlier"]["run_id"] == first["run_id"] and again["earlier"]["classification"] == "completed"
        assert "force=true with a reason" in again["how_to_run_anyway"]
        # force without a reason is refused, and nothing is run
        no_reason = error_of(await client.call_tool("probe_run", {"probe": "env-fingerprint", "force": True,
                                                                  "params": {"import_torch": False}}))
        assert "force needs a reason" in no_reason
        forced = answer(await client.call_tool("probe_run", {"probe": "env-fingerprint", "force": True,
                                                             "reason": "the driver was reloaded by hand",
                                                             "params": {"import_torch": False}}))
        assert forced["forced_because"] == "the driver was reloaded by hand"
        assert any("run anyway: the driver was reloaded by hand" in f["message"] for f in forced["flags"]), forced["flags"]
        with current(project) as inv:
            runs = inv.state.runs
            assert len(runs) == 2  # the refused ones never ran
            assert any(f.kind == "circular-retest" and f.run is None for f in inv.state.flags), inv.state.flags  # the declined one

        answer(await client.call_tool("baseline", {"run": first["run_id"]}))
        noted = answer(await client.call_tool("note", {"text": "fingerprint matches the 2.13 box", "about": "cache-wiped"}))
        assert noted["event"] > 0
        assert "neither" in error_of(await client.call_tool("note", {"text": "x", "about": "nothing-such"}))

        known_all = answer(await client.call_tool("known", {"all": True}))
        assert "pytorch#126024" in {e["id"] for e in known_all["catalog"]}
        known_here = answer(await client.call_tool("known", {}))
        assert known_here["target"] == "local" and known_here["distributions_read"] > 10

        # remedies on the drafter's code: preview, apply, revert to the same bytes
        def tree() -> str:  # the target's code tree (code.local = drafter), every file's bytes
            return hashlib.sha256(b"".join(p.read_bytes() for p in sorted((project / "drafter").rglob("*.py")))).hexdigest()

        before = tree()
        preview = answer(await client.call_tool("remedy_preview", {"remedy": "lock"}))
        assert preview["applicable"] and "+_SLEUTH_LOCK = " in preview["diff"] and "_sleuth_serialized(" in preview["diff"]
        assert tree() == before  # a preview writes nothing
        applied = answer(await client.call_tool("remedy_apply", {"remedy": "lock"}))
        assert applied["applied"] and tree() != before
        reverted = answer(await client.call_tool("remedy_revert", {}))
        assert reverted["reverted"] == applied["application"] and tree() == before
        assert "unknown remedy" in error_of(await client.call_tool("remedy_preview", {"remedy": "reboot"}))

        status = answer(await client.call_tool("status", {}))
        assert status["runs"] == 2 and status["next_step"]["action"] in ("run", "remedy")
        assert status["state"]["known"] is True and status["state"]["key"]

        evs = answer(await client.call_tool("events", {"after": 0, "limit": 1000}))
        mine = [e for e in evs["events"] if e["by"] == "mcp:pytest-agent"]
        kinds = {e["kind"] for e in mine}
        assert {"symptom.added", "note.added", "run.started", "run.finished", "flag.raised", "remedy.applied"} <= kinds
        assert any("the driver was reloaded by hand" in e["said"] for e in mine), mine
        assert "unknown probe" in error_of(await client.call_tool("probe_run", {"probe": "no-such"}))
        assert "exactly one of" in error_of(await client.call_tool("probe_run", {}))
        # the secret the command prints is redacted on its way into the store: no answer has it
        leak = answer(await client.call_tool("probe_run", {"shell": "echo token=$HF_TOKEN"}))
        page = answer(await client.call_tool("run_output", {"run": leak["run_id"]}))
        assert page["lines"][0]["text"] == "token=<redacted:HF_TOKEN>"
        assert SECRET not in json.dumps(leak) + json.dumps(page)
        # the CLI in another terminal, beside the agent: its events say so
        sleuth(project, "note", "by hand in a terminal")
        evs = answer(await client.call_tool("events", {"after": evs["last_event"]}))
        assert [(e["kind"], e["by"]) for e in evs["events"] if e["kind"] == "note.added"] == [("note.added", "cli")]
    # the postmortem says who did what
    md = sleuth(project, "export", "--format", "markdown").stdout
    assert "| mcp:pytest-agent |" in md and "note | mcp:pytest-agent |" not in md
    assert any("fingerprint matches the 2.13 box" in row and "mcp:pytest-agent" in row for row in md.splitlines()), md.splitlines()


@pytest.mark.slow
async def test_stacks_reads_a_stopped_process_through_mcp(project, tmp_path):
    import signal
    import subprocess

    # a process stopped from outside (SIGSTOP), as a hung rank looks to a reader
    proc = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(0.05)"])
    try:
        time.sleep(0.5)
        os.kill(proc.pid, signal.SIGSTOP)
        server = build_server(Workspace(project), no_agent=True)
        async with Client(server, client_info=AGENT) as client:
            data = answer(await client.call_tool("stacks", {"pid": str(proc.pid), "samples": 2}))
        assert data["classification"] == "completed", data["reason"]
        assert data["reading"]["verdict"] and isinstance(data["reading"]["sentences"], list)
        result = next(r for r in data["records"] if r["kind"] == "result")
        assert result["processes"] >= 1
        assert "stopped" in json.dumps(data["reading"]).lower() or result.get("stopped"), data["reading"]
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.slow
async def test_over_stdio_the_cli_subprocess_serves_and_names_the_client(project):
    # started elsewhere, as a client may start it, the project named (README's .mcp.json)
    params = StdioServerParameters(command=SLEUTH, args=["mcp", "--no-agent", "--project", str(project)],
                                   cwd=str(project.parent), env={**os.environ, "PYTHONUNBUFFERED": "1"})
    async with Client(params, client_info=Implementation(name="stdio-agent", version="0")) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert {"probe_run", "run_output", "status", "note"} <= tools
        answer(await client.call_tool("note", {"text": "over stdio"}))
        cmd = f"cd {project} && {sys.executable} debug_fx.py"
        data = answer(await client.call_tool("probe_run", {"shell": cmd}))
        shown = {item["n"]: item["text"] for item in data["output"]["lines"] if "n" in item}
        assert "is_fx_tracing: True" in shown[7000]
        assert data["output"]["bytes"] <= data["output"]["budget_bytes"]
        page = answer(await client.call_tool("run_output", {"run": data["run_id"], "start": 7000, "count": 1}))
        assert page["lines"][0]["text"].startswith("In flex_attention_forward") and page["next_start"] == 7001
    with current(project) as inv:
        notes = [n for n in inv.state.notes if n.text == "over stdio"]
        assert notes and inv.state.author(notes[0].seq) == "mcp:stdio-agent"


def test_sleuth_mcp_with_a_broken_config_says_file_and_line_and_exits_2(project):
    (project / "sleuth.toml").write_text("[targets.local\n")
    proc = sleuth(project, "mcp", check=2)
    assert "sleuth.toml:1" in proc.stderr


NESTED = """import sys; print('torch' + " \\"quoted\\" " + 'it\\'s $HOME `id` ü', sys.argv[1:])"""


async def test_nested_quotes_arrive_byte_for_byte_through_ssh_jump_and_pct(tmp_path, sshd):
    root = tmp_path / "remote"
    make_workspace(root, drafter=False)
    (root / "sleuth.toml").write_text((root / "sleuth.toml").read_text() + "\n" + sshd.toml("ct200"))
    sleuth(root, "new", "remote")
    # the seed's second loss: python -c with quotes inside quotes, through ssh -> jump -> pct exec -> bash -c
    cmd = f"{sshd.python} -c {shlex_quote(NESTED)} 'a b' \"c'd\""
    server = build_server(Workspace(root), no_agent=True)
    async with Client(server, client_info=AGENT) as client:
        data = answer(await client.call_tool("probe_run", {"shell": cmd, "target": "ct200"}))
    assert data["classification"] == "completed", data["reason"]
    assert data["command"] == cmd
    lines = [item["text"] for item in data["output"]["lines"] if "n" in item]
    assert lines == ["torch \"quoted\" it's $HOME `id` ü ['a b', \"c'd\"]"]


def shlex_quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


@pytest.mark.slow
async def test_the_ui_follows_a_note_and_a_run_written_through_mcp_by_another_process(project):
    """The UI open on the session; `sleuth mcp` (another process) writes a note, runs a probe
    and a slow command: they appear in the UI's tree and timeline without reopening it, and
    the slow command's output streams while it runs."""
    import asyncio

    from sleuth.app.tui import SleuthApp
    from textual.widgets import OptionList, Tree

    app = SleuthApp.live(Workspace(project))
    params = StdioServerParameters(command=SLEUTH, args=["mcp", "--no-agent"], cwd=str(project), env=dict(os.environ))

    def timeline() -> str:
        ol = app.screen.query_one("#timeline", OptionList)
        return "\n".join(str(ol.get_option_at_index(i).prompt) for i in range(ol.option_count))

    def tree_labels() -> list[str]:
        out, stack = [], list(app.screen.query_one(Tree).root.children)
        while stack:
            node = stack.pop(0)
            out.append(str(node.label))
            stack[:0] = list(node.children)
        return out

    slow = None

    async def until(what, seconds: float = 6.0) -> None:  # within a second here; 6 s on a loaded machine
        for _ in range(int(seconds * 10)):
            if what():
                return
            await pilot.pause(0.1)
        screen = app.screen
        import sqlite3
        fresh = sqlite3.connect(screen.inv.store.path).execute("SELECT max(seq) FROM events").fetchone()[0]
        raise AssertionError(f"the UI did not show it: fresh {fresh} in_txn {screen.inv.store.conn.in_transaction} store at {screen.inv.store.last_seq()}, UI at "
                             f"{screen.state.last_seq}, slow done {slow.result().content[0].text[:300] if slow and slow.done() else None}; shown #{screen.shown_run}, runs "
                             f"{ {r: i.classification for r, i in screen.state.runs.items()} }, output "
                             f"{screen.run_pane.view.visible_text()[:5]}"[:600])

    said = record_notifications(app)
    async with app.run_test(size=(140, 48)) as pilot:
        async with Client(params, client_info=Implementation(name="other-agent", version="0")) as client:
            answer(await client.call_tool("note", {"text": "written by the agent"}))
            await until(lambda: "written by the agent  · by mcp:other-agent" in timeline())
            data = answer(await client.call_tool("probe_run", {"probe": "env-fingerprint",
                                                               "params": {"import_torch": False}}))
            run = data["run_id"]
            await until(lambda: f"#{run} env-fingerprint" in timeline())
            assert f"#{run} env-fingerprint" in timeline() and "by mcp:other-agent" in timeline()
            app.screen.query_one(Tree).root.expand_all()
            await until(lambda: any(f"#{run}" in label for label in tree_labels()))
            # a slow command: its first line shows while it still runs
            progress: list[str] = []

            async def on_progress(_done: float, _total: float | None, message: str | None) -> None:
                progress.append(message or "")

            slow = asyncio.ensure_future(client.call_tool(
                "probe_run", {"shell": "echo first-line-now; sleep 6; echo second-line-later"},
                progress_callback=on_progress))
            # (the server reads the target's state first: a fresh interpreter, slow on a loaded machine)
            await until(lambda: any("first-line-now" in line for line in app.screen.run_pane.view.visible_text()), 20)
            assert not slow.done()
            assert not any("second-line-later" in line for line in app.screen.run_pane.view.visible_text()), app.screen.run_pane.view.visible_text()
            done = answer(await slow)
            # a run another writer finished is said, with who ran it
            await until(lambda: any(f"#{done['run_id']} shell by mcp:other-agent: completed" in m for m in said))
            # the long call said it was alive while it ran, in words
            assert any(f"run #{done['run_id']}: 1 line so far" in m for m in progress), progress
            await until(lambda: any("second-line-later" in line for line in app.screen.run_pane.view.visible_text()))
            assert app.screen.shown_run == done["run_id"]
        app.inv.add_note("typed in the UI")  # what the UI writes says the UI wrote it
    with current(project) as inv:
        by = {n.text: inv.state.author(n.seq) for n in inv.state.notes}
    assert by["typed in the UI"] == "ui" and by["written by the agent"] == "mcp:other-agent"


def test_http_binds_loopback_only(project):
    proc = sleuth(project, "mcp", "--http", "--host", "0.0.0.0", check=2)
    assert "loopback only" in proc.stderr


@pytest.mark.slow
async def test_over_http_a_request_without_the_token_reaches_nothing(project):
    import httpx2
    from mcp.client.streamable_http import streamable_http_client
    from support.mcp import http_server

    with http_server(project) as (url, token, stderr):
        async with httpx2.AsyncClient() as plain:
            for _ in range(100):
                try:
                    refused = await plain.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
                    break
                except httpx2.TransportError:
                    import asyncio

                    await asyncio.sleep(0.1)
            assert refused.status_code == 401
            wrong = await plain.post(url, json={}, headers={"Authorization": "Bearer nope"})
            assert wrong.status_code == 401
            # the 2026-07-28 revision's single-exchange POST is guarded the same way
            discover = {"jsonrpc": "2.0", "id": 2, "method": "server/discover", "params": {"_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}}}
            modern = await plain.post(url, json=discover, headers={"Mcp-Protocol-Version": MODERN,
                                                                   "Mcp-Method": "server/discover"})
            assert modern.status_code == 401
        for mode in ("legacy", MODERN):
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as authed:
                async with Client(streamable_http_client(url, http_client=authed), mode=mode,
                                  client_info=Implementation(name=f"http-{mode}", version="0")) as client:
                    assert client.protocol_version == ("2025-11-25" if mode == "legacy" else MODERN)
                    answer(await client.call_tool("note", {"text": f"over http, {mode}"}))
        with current(project) as inv:
            for mode in ("legacy", MODERN):
                note = [n for n in inv.state.notes if n.text == f"over http, {mode}"][0]
                assert inv.state.author(note.seq) == f"mcp:http-{mode}"
            assert token not in json.dumps([e.to_dict() for e in inv.store.events()])
    assert token not in "".join(stderr)  # the token is never logged


@pytest.mark.slow
async def test_a_fleet_through_mcp_compares_its_members_and_reruns_none_in_the_same_state(tmp_path):
    root = tmp_path / "fleet"
    root.mkdir()
    (root / "sleuth.toml").write_text(
        f'[targets.a]\npython = "{sys.executable}"\n[targets.b]\npython = "{sys.executable}"\n'
        '[targets.nodes]\nmembers = ["a", "b"]\n')
    sleuth(root, "new", "fleet")
    args = {"probe": "env-fingerprint", "target": "nodes", "params": {"import_torch": False}}
    async with Client(build_server(Workspace(root), no_agent=True), client_info=AGENT) as client:
        first = answer(await client.call_tool("probe_run", args))
        assert first["members"] == ["a", "b"] and set(first["runs"]) == {"a", "b"}
        assert "agree" in first["headline"] or "same" in first["headline"], first["headline"]
        assert all(a["classification"] == "completed" for a in first["answers"].values()), first["answers"].values()
        again = answer(await client.call_tool("probe_run", args))
        assert set(again["not_run_again"]) == {"a", "b"} and not again["runs"]
        assert "shell" in error_of(await client.call_tool("probe_run", {"shell": "true", "target": "nodes"}))


def test_records_too_big_for_an_answer_keep_their_small_fields_and_say_what_went():
    from sleuth.app.mcp_server import RECORDS_BUDGET, bounded_records

    small = [{"kind": "result", "verdict": "rank 2 is stuck", "ranks": 64}]
    assert bounded_records(small, 4) == (small, None)
    frames = [{"rank": r, "stack": ["frame"] * 200} for r in range(64)]
    big = [{"kind": "result", "verdict": "rank 2 is stuck", "sentences": ["rank 2 waits in allreduce"],
            "per_rank": frames}, {"kind": "done", "ok": True}]
    kept, said = bounded_records(big, 4)
    assert len(json.dumps(kept)) < RECORDS_BUDGET
    assert kept[0]["verdict"] == "rank 2 is stuck" and kept[0]["sentences"] == ["rank 2 waits in allreduce"]
    assert kept[0]["left_out"] == ["per_rank"] and "per_rank" not in kept[0] and kept[1] == {"kind": "done", "ok": True}
    assert said is not None and "result: per_rank" in said and "run_output(run=4, grep='^@@sleuth:')" in said


@pytest.mark.parametrize("transport", ["memory", "stdio"])
async def test_a_client_finds_every_tool_described_typed_and_annotated_and_bad_calls_said_in_one_line(project, transport):
    """Issue 44, as the SDK's client sees it: every parameter described, every answer typed
    (no bare outputSchema), descriptions without docstring indentation, annotations, the
    server's version (sleuth --version's), an unknown argument refused naming the nearest real
    one, a bad or missing argument in one line, an unknown target refused by every tool."""
    from sleuth import __version__

    if transport == "memory":
        server: Any = build_server(Workspace(project), no_agent=True)
    else:
        server = StdioServerParameters(command=SLEUTH, args=["mcp", "--no-agent"], cwd=str(project), env=dict(os.environ))
    async with Client(server, client_info=AGENT) as client:
        info = client.server_info
        assert info is not None and info.name == "sleuth" and info.version == __version__
        assert f"sleuth {__version__}" in sleuth(project, "--version").stdout
        tools = {t.name: t for t in (await client.list_tools()).tools}
        for name, t in tools.items():
            assert t.description and "\n" not in t.description and "  " not in t.description, name
            params = t.input_schema.get("properties", {})
            assert all(p.get("description") for p in params.values()), name
            assert t.output_schema and t.output_schema.get("properties"), f"{name}: a bare outputSchema"
            assert all(p.get("description") for p in t.output_schema["properties"].values()), name
            assert t.annotations is not None and t.annotations.read_only_hint is not None, name
        assert tools["remedy_apply"].annotations.destructive_hint is True  # type: ignore[union-attr]
        assert tools["remedy_revert"].annotations.destructive_hint is True  # type: ignore[union-attr]
        for reader in ("status", "hypotheses", "events", "run_output", "remedy_preview", "known"):
            assert tools[reader].annotations.read_only_hint is True, reader  # type: ignore[union-attr]
        assert tools["probe_run"].annotations.open_world_hint is True  # type: ignore[union-attr]

        typo = error_of(await client.call_tool("probe_run", {"shell": "echo typo", "forse": True}))
        assert "unknown argument 'forse'; did you mean 'force'?" in typo and "\n" not in typo
        with current(project) as inv:
            assert not inv.state.runs  # refused before anything ran
        assert error_of(await client.call_tool("note", {})) == "Error executing tool note: missing argument 'text'"
        bad = error_of(await client.call_tool("run_output", {"run": "abc"}))
        assert "argument 'run'" in bad and "\n" not in bad and "pydantic" not in bad
        for name, args in [("status", {}), ("known", {"all": True}), ("probe_run", {"shell": "true"}),
                           ("remedy_preview", {"remedy": "lock"}), ("remedy_revert", {}), ("stacks", {"pid": "1"})]:
            said = error_of(await client.call_tool(name, {**args, "target": "nosuch"}))
            assert "'nosuch'" in said and "\n" not in said, (name, said)


async def test_each_answer_once_the_text_block_is_what_a_model_reads(project):
    """A run_output page of ~37 KB of log: its text block is the numbered lines (under 1.2x the
    log bytes it carries), not a second pretty-printed copy of structuredContent; probe_run's
    text says the run and the excerpt's lines, with the gaps said."""
    log = project / "log.py"
    log.write_text("for i in range(1, 800):\n    print(f'[rank{i % 8}] step {i:>6} loss {1.0 / i:.6f} tok/s 41233')\n")
    async with Client(build_server(Workspace(project), no_agent=True), client_info=AGENT) as client:
        cmd = f"cd {project} && {sys.executable} debug_fx.py"
        ran = await client.call_tool("probe_run", {"shell": cmd, "budget": 6000})
        text = ran.content[0].text  # type: ignore[union-attr]
        data = answer(ran)
        assert text.startswith(f"run #{data['run_id']} `{cmd}` on local: failed")
        assert "7000: In flex_attention_forward - is_fx_tracing: True" in text
        assert "7305 stderr: RuntimeError: Detected that you are using FX" in text
        assert "left out" in text and "Qwen3Config {" in text and "run_output(" in text
        assert len(text.encode()) < len(json.dumps(data, indent=2).encode())
        page_run = answer(await client.call_tool("probe_run", {"shell": f"{sys.executable} {log}"}))["run_id"]
        page = await client.call_tool("run_output", {"run_id": page_run, "count": 5000})
        got = answer(page)
        carried = sum(len(ln["text"].encode()) + 1 for ln in got["lines"])
        block = page.content[0].text  # type: ignore[union-attr]
        assert len(got["lines"]) == 799 and carried > 35_000
        assert len(block.encode()) < 1.2 * carried, (len(block.encode()), carried)
        assert "1: [rank1] step      1 loss 1.000000" in block and not block.lstrip().startswith("{")
        # run and run_id name the same run; both given and different is refused
        assert answer(await client.call_tool("run_output", {"run": page_run, "count": 1}))["run_id"] == page_run
        assert "give one of them" in error_of(await client.call_tool("run_output", {"run": 1, "run_id": page_run}))


async def test_bytes_that_are_not_utf8_are_said_and_given_exactly(project):
    """b"\\xff\\xfe" never silently becomes U+FFFD: the answer says the line is not UTF-8 and
    carries its bytes (base64); `sleuth output` adds no newline the command never printed and
    says where a line was not UTF-8; a last line without a newline is counted."""
    import base64

    async with Client(build_server(Workspace(project), no_agent=True), client_info=AGENT) as client:
        ran = answer(await client.call_tool("probe_run", {"shell": "printf 'a\\n\\xff\\xfe\\nlast'"}))
        assert ran["lines"]["stdout"] == 3 and ran["output"]["lines_total"] == 3
        shown = [ln for ln in ran["output"]["lines"] if "n" in ln]
        assert shown[1]["utf8"] is False and "not_utf8" in ran["output"]
        page = answer(await client.call_tool("run_output", {"run_id": ran["run_id"]}))
        assert page["lines_total"] == len(page["lines"]) == 3 and page["not_utf8"] == 1
        assert base64.b64decode(page["lines"][1]["base64"]) == b"\xff\xfe"
        assert page["lines"][2] == {"n": 3, "stream": "stdout", "text": "last", "newline": False}
    import subprocess

    proc = subprocess.run([SLEUTH, "output", str(ran["run_id"])], cwd=project, capture_output=True)
    assert proc.stdout == "a\n\ufffd\ufffd\nlast".encode()  # no newline the command never printed
    assert b"not UTF-8" in proc.stderr and b"--raw" in proc.stderr
    raw = subprocess.run([SLEUTH, "output", str(ran["run_id"]), "--raw"], cwd=project, capture_output=True)
    assert raw.returncode == 0 and raw.stdout == b"a\n\xff\xfe\nlast", raw  # the stored bytes, exactly
