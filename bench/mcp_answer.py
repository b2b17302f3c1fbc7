"""Benchmark: what a coding agent gets back from `sleuth mcp`, and what it costs.

1. **An answer's size for a 10 MB run.** A shell command writes ~10 MB: a training log, a
   HuggingFace-style config dump, repeated warnings, a diagnostic in the middle and a
   traceback at the end. `probe_run` through the MCP SDK's client (in memory) answers with a
   bounded excerpt; measured: the whole answer's JSON bytes against the run's bytes, that
   the diagnostic and the traceback are in it, and the time the excerpt took against the
   time `sleuth output RUN > /dev/null` (every line read once, written nowhere) takes on the
   same run — the excerpt reads each line once too.
2. **probe_run through MCP against the CLI's `probe run`**, the same small shell command,
   in the same run, interleaved: the MCP server over stdio (`sleuth mcp` as a subprocess, how
   agents start it; one process for every call) against `sleuth probe run --shell … --json`
   (a process per command, as an agent's shell tool runs it), both through the broker's
   resident agent. Reported: the median of each and their ratio.

3. **Each answer once (issue 44).** A `run_output` page of ~64 KB of log (one page: the
   page's cap is 64,000 bytes of text) and the 10 MB run's `probe_run` answer: the bytes of
   the text block a model reads against the log bytes the page carries, and the bytes of
   `structuredContent` beside it. Goal: the text block ≤ 1.2× the log it carries (it was a
   second, pretty-printed copy of the JSON: 2.1×).

    python bench/mcp_answer.py [--megabytes 10] [--calls 10] [--json] [--only page]
Goals (issue 36): the answer ≤ 32 KiB whatever the run's size (the default budget is
12,000 bytes of excerpt), the diagnostic and the crash in it; the excerpt ≤ 4× reading
the output once (it also finds dumps, repeats, errors and rare lines in every line);
probe_run through MCP ≤ 1× the CLI's probe run (no slower).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SLEUTH = shutil.which("sleuth") or str(Path(sys.executable).with_name("sleuth"))

WRITER = r'''
import json, sys
out = sys.stdout
target = int(sys.argv[1])
written = 0
step = 0
print("loading /dev/shm/Qwen3.6-27B")
cfg = "Qwen3Config " + json.dumps({f"layer_{i}": {"hidden_size": 5120, "rope_theta": 1e6} for i in range(1500)}, indent=2)
print(cfg)
written += len(cfg)
while written < target // 2:
    line = f"step {step:>7} loss {1.0 / (step + 1):.6f} lr 3.0e-04 tok/s 41233 mem 71.2GiB\n"
    out.write(line)
    written += len(line)
    step += 1
    if step % 500 == 0:
        w = "/venv/lib/python3.11/site-packages/torch/_inductor/utils.py:1250: UserWarning: TF32 is off\n"
        for _ in range(5):
            sys.stderr.write(w)
print("In flex_attention_forward - is_fx_tracing: True (thread drafter-2)")
while written < target:
    line = f"step {step:>7} loss {1.0 / (step + 1):.6f} lr 3.0e-04 tok/s 41233 mem 71.2GiB\n"
    out.write(line)
    written += len(line)
    step += 1
out.flush()
sys.stderr.write("Traceback (most recent call last):\n  File \"train.py\", line 88, in <module>\n")
sys.stderr.write("RuntimeError: Detected that you are using FX to symbolically trace a dynamo-optimized function\n")
sys.exit(1)
'''


def project(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "sleuth.toml").write_text(f'[targets.local]\npython = "{sys.executable}"\n')
    subprocess.run([SLEUTH, "new", "bench"], cwd=root, check=True, capture_output=True)
    (root / "writer.py").write_text(WRITER)
    return root


async def answer_size(root: Path, megabytes: float) -> dict:
    from mcp import Client
    from mcp.types import Implementation
    from sleuth.app.excerpt import excerpt
    from sleuth.app.mcp_server import build_server
    from sleuth.sessions import Investigation, Workspace

    cmd = f"{sys.executable} {root / 'writer.py'} {int(megabytes * 1_000_000)}"
    async with Client(build_server(Workspace(root)), client_info=Implementation(name="bench", version="0")) as c:
        t0 = time.perf_counter()
        result = await c.call_tool("probe_run", {"shell": cmd})
        call_s = time.perf_counter() - t0
    data = result.structured_content
    assert data is not None, result.content
    size = len(json.dumps(data).encode())
    text_size = sum(len(getattr(part, "text", "").encode()) for part in result.content)
    shown = [item["text"] for item in data["output"]["lines"] if "n" in item]
    run = data["run_id"]
    with Investigation.replay(Workspace(root).resolve(None)) as inv:
        t0 = time.perf_counter()
        excerpt(inv.store, run)
        excerpt_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    subprocess.run([SLEUTH, "output", str(run)], cwd=root, check=True, stdout=subprocess.DEVNULL)
    read_s = time.perf_counter() - t0
    return {
        "run_bytes": data["bytes"], "run_lines": data["output"]["lines_total"],
        "answer_json_bytes": size, "answer_text_bytes": text_size, "excerpt_bytes": data["output"]["bytes"],
        "lines_shown": data["output"]["lines_shown"], "left_out": data["output"]["left_out"],
        "diagnostic_in_answer": any("is_fx_tracing: True" in t for t in shown),
        "traceback_in_answer": any(t.startswith("RuntimeError: Detected that you are using FX") for t in shown),
        "probe_run_s": round(call_s, 3), "excerpt_s": round(excerpt_s, 3), "sleuth_output_s": round(read_s, 3),
        "excerpt_vs_output_read": round(excerpt_s / read_s, 2),
    }


PAGE_WRITER = r'''
import sys
for i in range(1, 862):
    print(f"[rank{i % 8}] step {i:>6} loss {1.0 / i:.6f} lr 3.0e-04 grad_norm 0.4132 tok/s 41233")
'''


async def page_size(root: Path) -> dict:
    """A run_output page of ~64 KB of log: the text block's bytes against the log's."""
    from mcp import Client
    from mcp.types import Implementation
    from sleuth.app.mcp_server import build_server
    from sleuth.sessions import Workspace

    (root / "page_writer.py").write_text(PAGE_WRITER)
    async with Client(build_server(Workspace(root)), client_info=Implementation(name="bench", version="0")) as c:
        ran = await c.call_tool("probe_run", {"shell": f"{sys.executable} {root / 'page_writer.py'}", "force": True,
                                              "reason": "bench", "budget": 12_000})
        run = ran.structured_content["run_id"]
        page = await c.call_tool("run_output", {"run": run, "count": 5000})
    data = page.structured_content
    assert data is not None and not page.is_error, page.content
    log = sum(len(item["text"].encode()) + 1 for item in data["lines"])
    text = sum(len(getattr(part, "text", "").encode()) for part in page.content)
    run_text = sum(len(getattr(part, "text", "").encode()) for part in ran.content)
    return {"page_lines": len(data["lines"]), "page_log_bytes": log, "page_text_bytes": text,
            "page_structured_bytes": len(json.dumps(data).encode()), "page_text_vs_log": round(text / log, 2),
            "probe_run_text_bytes": run_text,
            "probe_run_structured_bytes": len(json.dumps(ran.structured_content).encode())}


async def mcp_vs_cli(root: Path, calls: int) -> dict:
    from mcp import Client, StdioServerParameters
    from mcp.types import Implementation

    cmd = "echo from-the-target; uname -r"
    mcp_times, cli_times = [], []
    params = StdioServerParameters(command=SLEUTH, args=["mcp"], cwd=str(root), env=dict(os.environ))
    subprocess.run([SLEUTH, "probe", "run", "--shell", "true", "--quiet"], cwd=root, check=True,
                   capture_output=True)  # the broker and its resident agent up, for both
    async with Client(params, client_info=Implementation(name="bench", version="0")) as c:
        await c.call_tool("status", {})
        for _ in range(calls):
            t0 = time.perf_counter()
            result = await c.call_tool("probe_run", {"shell": cmd})
            mcp_times.append(time.perf_counter() - t0)
            assert not result.is_error and result.structured_content["classification"] == "completed"
            t0 = time.perf_counter()
            proc = subprocess.run([SLEUTH, "probe", "run", "--shell", cmd, "--json"], cwd=root, capture_output=True,
                                  text=True)
            cli_times.append(time.perf_counter() - t0)
            assert proc.returncode == 0 and json.loads(proc.stdout)["classification"] == "completed", proc.stderr
    subprocess.run([SLEUTH, "agent", "stop"], cwd=root, capture_output=True)
    m, c_ = statistics.median(mcp_times), statistics.median(cli_times)
    return {"calls": calls, "mcp_probe_run_median_s": round(m, 3), "cli_probe_run_median_s": round(c_, 3),
            "mcp_vs_cli": round(m / c_, 2)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--megabytes", type=float, default=10)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--only", choices=["page"], help="only the run_output page's bytes (part 3)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="sleuth-bench-mcp-") as tmp:
        root = project(Path(tmp) / "proj")
        page = asyncio.run(page_size(root))
        said = (f"a run_output page of {page['page_log_bytes']:,} bytes of log ({page['page_lines']} lines): text block "
                f"{page['page_text_bytes']:,} B (×{page['page_text_vs_log']} the log), structuredContent "
                f"{page['page_structured_bytes']:,} B; a probe_run answer's text block {page['probe_run_text_bytes']:,} B "
                f"beside {page['probe_run_structured_bytes']:,} B of structuredContent")
        if args.only == "page":
            print(json.dumps(page, indent=2) if args.json else said)
            return 0 if page["page_text_vs_log"] <= 1.2 else 1
        size = asyncio.run(answer_size(root, args.megabytes))
        speed = asyncio.run(mcp_vs_cli(root, args.calls))
    out = {"answer": size, "probe_run": speed, "page": page, "cores": os.cpu_count()}
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"a {size['run_bytes'] / 1e6:.1f} MB run ({size['run_lines']:,} lines): the answer is "
              f"{size['answer_json_bytes']:,} bytes of JSON (excerpt {size['excerpt_bytes']:,} B, "
              f"{size['lines_shown']} lines shown, {size['left_out']:,} left out and said); diagnostic in it: "
              f"{size['diagnostic_in_answer']}, traceback: {size['traceback_in_answer']}")
        print(f"  excerpt {size['excerpt_s']:.2f} s vs sleuth output > /dev/null {size['sleuth_output_s']:.2f} s "
              f"(×{size['excerpt_vs_output_read']})")
        print(f"probe_run via MCP (stdio) median {speed['mcp_probe_run_median_s'] * 1000:.0f} ms vs CLI probe run "
              f"{speed['cli_probe_run_median_s'] * 1000:.0f} ms (×{speed['mcp_vs_cli']}, {speed['calls']} calls each)")
        print(said)
    ok = (size["answer_json_bytes"] <= 32 * 1024 and size["diagnostic_in_answer"] and size["traceback_in_answer"]
          and size["excerpt_vs_output_read"] <= 4 and speed["mcp_vs_cli"] <= 1.0 and page["page_text_vs_log"] <= 1.2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
