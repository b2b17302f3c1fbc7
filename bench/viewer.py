"""The output viewer on a stored run of N lines (default 10 million): time to the first
screen, to scroll to the end, and to find a string near the end — against `grep -n` over the
same text, measured in the same run. Memory: the viewer's Python allocations (tracemalloc
peak while opening, scrolling and searching) at N/10 and at N lines, which should not grow
with N.

    python bench/viewer.py [--lines 10000000] [--json]

Goals (issue 5): first screen ≤ 0.3 s; search ≥ 0.5× grep's speed (search_vs_grep is grep's
time over sleuth's, so ≥ 0.5 meets it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sleuth.hypotheses import load_catalog  # noqa: E402
from sleuth.sessions import Investigation, Redactor, Workspace  # noqa: E402

NEEDLE = "RuntimeError: Detected that you are using FX"


def line_text(i: int) -> str:
    kind = i % 5
    if kind == 0:
        return f"step {i}: loss {2.5 - (i % 1000) / 1000:.4f} lr 3.0e-4 tokens/s 18234.5 mem 61.2GiB"
    if kind == 1:
        return f"[rank{i % 8}] drafter thread {i % 4} accepted {i % 7} of 8 draft tokens (window 1024)"
    if kind == 2:
        return f'  "layer_{i % 32}.self_attn.q_proj.weight": {{"shape": [4096, 4096], "dtype": "bfloat16"}},'
    if kind == 3:
        return f"/root/venv/lib/python3.11/site-packages/torch/_inductor/utils.py:{i % 2000}: UserWarning: cached"
    return f"DEBUG {i:>10} compile cache lookup key=fx_graph_{i % 977:04d} hit"


def build(root: Path, lines: int, needle_at: int) -> tuple[Path, Path, int]:
    """A session with one run of *lines* lines, and the same text in a plain file."""
    ws = Workspace(root)
    path = ws.new_path("viewer bench")
    inv = Investigation.create(path, "viewer bench", load_catalog(), redactor=Redactor({}))
    start = inv.begin_run("compile-race", {"bench": lines}, "local")
    cap = inv.capture(start.run)
    text_file = root / "run.txt"
    with text_file.open("wb") as fh:
        batch: list[str] = []
        for i in range(lines):
            batch.append(f"{NEEDLE} (line {i})" if i == needle_at else line_text(i))
            if len(batch) == 20_000:
                data = ("\n".join(batch) + "\n").encode()
                cap.write("stdout", data)
                fh.write(data)
                batch = []
        if batch:
            data = ("\n".join(batch) + "\n").encode()
            cap.write("stdout", data)
            fh.write(data)
    counts = cap.close()
    inv.finish_run(start.run, "completed", "bench run", [{"kind": "done"}], None, counts)
    inv.close()
    ws.set_current(path)
    return path, text_file, start.run


def grep_seconds(text_file: Path, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        out = subprocess.run(["grep", "-n", "-F", NEEDLE, str(text_file)], capture_output=True, check=True)
        times.append(time.perf_counter() - t)
        assert out.stdout
    return statistics.median(times)


async def measure_viewer(root: Path, session: Path, run: int, total: int, needle_at: int) -> dict[str, float]:
    from sleuth.app.tui import OutputView, SleuthApp
    from textual.worker import WorkerState

    async def settle(pilot, group: str) -> None:
        while any(w.group == group and w.state in (WorkerState.PENDING, WorkerState.RUNNING) for w in pilot.app.workers):
            await pilot.pause(0.005)

    out: dict[str, float] = {}
    t_app = time.perf_counter()
    app = SleuthApp.live(Workspace(root), session)
    async with app.run_test(size=(140, 45)) as pilot:
        view = app.screen.query_one(OutputView)
        # the screen shows the latest run on mount; time the app's start to its first screen
        while not view.visible_text():
            await pilot.pause(0.005)
        out["app_start_to_first_screen_s"] = time.perf_counter() - t_app
        # selecting the run again: what the viewer itself costs (the fold scan starts over)
        async def painted(since: float) -> float:
            while view.painted_at < since:  # the view's last row on screen has been rendered
                await asyncio.sleep(0.0005)
            return view.painted_at - since

        await pilot.pause(0.5)
        t = time.perf_counter()
        app.screen.show_output(run)
        out["first_screen_s"] = await painted(t)
        first = view.visible_text()
        assert first and first[0].startswith("step 0"), first[:2]
        view.focus()
        await pilot.pause(0.5)
        t = time.perf_counter()
        view.action_cursor_to(-1)  # what the end key does
        out["scroll_to_end_s"] = await painted(t)
        last = view.visible_text()
        assert last and last[-1] == line_text(total - 1), last[-1:]
        await pilot.press("home")
        await pilot.pause()
        times, shown = [], []
        for _ in range(3):
            view.cursor = 0
            view.hit_line = None
            t = time.perf_counter()
            view.search(NEEDLE)
            while view.hit_line is None:  # the hit is known: the view jumps to it now
                await asyncio.sleep(0.0005)
            t_hit = time.perf_counter()
            times.append(t_hit - t)
            assert view.hit_line == needle_at, view.hit_line
            shown.append(await painted(t_hit) + (t_hit - t))
            await settle(pilot, "search")
        out["search_s"] = statistics.median(times)
        out["search_to_screen_s"] = statistics.median(shown)
        assert any(NEEDLE in line for line in view.visible_text())
        out["folds_found_while_measuring"] = len(view.outline.folds)
    return out


def memory_peak(root: Path, session: Path, run: int, total: int, needle_at: int) -> float:
    tracemalloc.start()
    asyncio.run(measure_viewer(root, session, run, total, needle_at))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", type=int, default=10_000_000)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    total = args.lines
    with tempfile.TemporaryDirectory(prefix="sleuth-viewer-") as tmp:
        big, small = Path(tmp) / "big", Path(tmp) / "small"
        big.mkdir()
        small.mkdir()
        t = time.perf_counter()
        session, text_file, run = build(big, total, total - 1000)
        build_s = time.perf_counter() - t
        size = text_file.stat().st_size
        grep_s = grep_seconds(text_file)
        os.chdir(big)
        sleuth = asyncio.run(measure_viewer(big, session, run, total, total - 1000))
        small_session, _, small_run = build(small, total // 10, total // 10 - 1000)
        os.chdir(small)
        mem_small = memory_peak(small, small_session, small_run, total // 10, total // 10 - 1000)
        os.chdir(big)
        mem_big = memory_peak(big, session, run, total, total - 1000)
    result = {
        "lines": total,
        "bytes": size,
        "build_s": round(build_s, 2),
        "grep_s": round(grep_s, 4),
        **{k: round(v, 4) for k, v in sleuth.items()},
        "search_vs_grep": round(grep_s / sleuth["search_s"], 3),
        "first_screen_goal_met": sleuth["first_screen_s"] <= 0.3,
        "tracemalloc_peak_mib": {f"{total // 10}": round(mem_small, 1), f"{total}": round(mem_big, 1)},
        "memory_big_vs_small": round(mem_big / mem_small, 2),
    }
    if args.json:
        print(json.dumps({"first_screen_s": result["first_screen_s"], "search_vs_grep": result["search_vs_grep"], **result}))
        return
    print(f"stored run: {total:,} lines, {size / 1e6:,.0f} MB (built in {build_s:.1f} s)")
    print(f"{'measure':<34}{'sleuth':>12}{'grep -n':>12}{'ratio':>10}")
    print(f"{'app start → first screen (s)':<34}{sleuth['app_start_to_first_screen_s']:>12.3f}")
    print(f"{'select run → first screen (s)':<34}{sleuth['first_screen_s']:>12.3f}{'':>12}{'goal ≤ 0.3':>10}")
    print(f"{'scroll to the end (s)':<34}{sleuth['scroll_to_end_s']:>12.3f}")
    print(f"{'find a string near the end (s)':<34}{sleuth['search_s']:>12.3f}{grep_s:>12.3f}{grep_s / sleuth['search_s']:>9.2f}×")
    print(f"{'  … and the hit on screen (s)':<34}{sleuth['search_to_screen_s']:>12.3f}")
    print(f"{'tracemalloc peak (MiB)':<34}{f'{mem_small:.1f} @{total // 10:,}':>16}  {mem_big:.1f} @{total:,}  ({mem_big / mem_small:.2f}×)")


if __name__ == "__main__":
    main()
