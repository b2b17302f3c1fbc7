"""Benchmark: how long `sleuth demo --auto` takes, end to end, as a newcomer runs it (issue 46),
against a baseline measured in the same run.

Variants, each a whole demo in a fresh directory, in the order given (rounds interleave them, so
a slow moment of the machine hits each):

  * ``before``: the sleuth of another tree — ``--baseline REV`` (a git revision of this
    repository, unpacked with ``git archive``) or ``--baseline DIR`` (a tree already unpacked);
  * ``after``: this working tree;
  * ``after-one-by-one``: this tree with the race trials run one after another
    (``SLEUTH_RACE_SIDE_BY_SIDE=1``): what running them side by side bought.

Each variant runs ``python -m sleuth demo --auto hunt`` with that tree first on PYTHONPATH. The
figures: the whole demo's seconds, its ratio to the first variant of the same round, the seconds of each step's
run as the demo printed them, and the verification's verdict (its trials and strength), so a
faster demo with a weaker verdict shows. ``--cores N`` pins every process to N cores (the
issue's figure is for 2). Each row says the machine's load average over the five minutes after
it (about 2 is the demo alone on 2 cores; more is other work, which slows one variant and not
another). No goal is asserted: the table is the result.

    python bench/demo_time.py --baseline 2750fd0 [--variants before,after] [--rounds 1] [--cores 2] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
STEP = re.compile(r"^    run #(\d+) ([\w-]+): (\w+) in ([0-9.]+) s(?: — (.*))?$", re.M)
VERIFIED = re.compile(r"verified lock #\d+ for [^:]+: (\w+) \((\d+) of (\d+) trials failed after; (\d+) of (\d+) before;"
                      r".* — (\w+)\)")


def unpack(rev: str, into: Path) -> Path:
    """The tree of *rev* (this repository's), unpacked under *into*/sleuth."""
    tree = into / "sleuth"
    tree.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", "--format=tar", rev], cwd=ROOT, capture_output=True, check=True).stdout
    tar = into / "tree.tar"
    tar.write_bytes(archive)
    with tarfile.open(tar) as t:
        t.extractall(tree, filter="data")
    tar.unlink()
    return tree


def importable(tree: Path, into: Path) -> Path:
    """A folder that holds *tree* as the package ``sleuth`` (a link), for PYTHONPATH."""
    if tree.name == "sleuth" and (tree / "__init__.py").is_file() and tree.parent != ROOT.parent:
        return tree.parent
    holder = into / "path"
    holder.mkdir(parents=True, exist_ok=True)
    (holder / "sleuth").symlink_to(tree, target_is_directory=True)
    return holder


def run_demo(path: Path, extra_env: dict[str, str]) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="sleuth-bench-demo-"))
    env = {**os.environ, **extra_env, "PYTHONPATH": os.pathsep.join([str(path), *filter(None, [os.environ.get("PYTHONPATH")])])}
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "sleuth", "demo", "--auto", "hunt"], cwd=work, env=env,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - start
    # the machine's own load, beside the demo's (other work on it slows every variant alike only if it lasts)
    load = (load_before, os.getloadavg()[1])
    out = proc.stdout
    shutil.rmtree(work, ignore_errors=True)
    steps = [{"run": int(m.group(1)), "probe": m.group(2), "classification": m.group(3), "seconds": float(m.group(4)),
              "verdicts": m.group(5) or ""} for m in STEP.finditer(out)]
    verified = VERIFIED.search(out)
    return {
        "seconds": round(seconds, 1),
        "load": {"1min_before": round(load[0], 2), "5min_after": round(load[1], 2)},
        "exit": proc.returncode,
        "steps": steps,
        "reproduced": "supports compile-race" in out,
        "verdict": None if verified is None else {
            "result": verified.group(1), "failed_after": int(verified.group(2)), "trials_after": int(verified.group(3)),
            "failed_before": int(verified.group(4)), "trials_before": int(verified.group(5)),
            "strength": verified.group(6)},
        "tail": out[-1500:] + proc.stderr[-1500:] if proc.returncode else "",
    }


def pin(cores: int) -> list[int]:
    allowed = sorted(os.sched_getaffinity(0))
    if cores > len(allowed):
        raise SystemExit(f"--cores {cores}: only {len(allowed)} cores are allowed here")
    chosen = allowed[:cores]
    os.sched_setaffinity(0, chosen)  # every process the demo starts inherits it
    return chosen


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", help="a git revision of this repository, or a directory holding another sleuth tree")
    ap.add_argument("--variants", default=None, help="comma-separated: before, after, after-one-by-one "
                                                     "(default: before,after with --baseline, else after)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--cores", type=int, default=None, help="pin to this many cores (default: all allowed)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    variants = (args.variants or ("before,after" if args.baseline else "after")).split(",")
    if "before" in variants and not args.baseline:
        raise SystemExit("the 'before' variant needs --baseline REV or DIR")
    cores = pin(args.cores) if args.cores else sorted(os.sched_getaffinity(0))
    scratch = Path(tempfile.mkdtemp(prefix="sleuth-bench-trees-"))
    try:
        trees: dict[str, tuple[Path, dict[str, str]]] = {}
        for v in variants:
            if v == "before":
                base = Path(args.baseline)
                tree = base.resolve() if base.is_dir() else unpack(args.baseline, scratch / "before")
                trees[v] = (importable(tree, scratch / "before"), {})
            elif v in ("after", "after-one-by-one"):
                holder = scratch / "after"
                path = holder / "path" if (holder / "path").exists() else importable(ROOT, holder)
                trees[v] = (path, {"SLEUTH_RACE_SIDE_BY_SIDE": "1"} if v == "after-one-by-one" else {})
            else:
                raise SystemExit(f"unknown variant {v!r}")
        results: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
        for r in range(args.rounds):
            for v in variants:
                path, extra = trees[v]
                got = run_demo(path, extra)
                results[v].append(got)
                print(f"round {r + 1} {v}: {got['seconds']:.1f} s (exit {got['exit']}; load average "
                      f"{got['load']['1min_before']:.1f} before, {got['load']['5min_after']:.1f} over the last 5 min after)",
                      file=sys.stderr, flush=True)
                if got["exit"]:
                    print(got["tail"], file=sys.stderr)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    import torch  # only to say which torch the figures are for

    print(f"sleuth demo --auto, end to end · {len(cores)} core(s) {cores} · Python {sys.version.split()[0]} · "
          f"torch {torch.__version__} · baseline: {args.baseline or '-'} · {args.rounds} round(s)")
    print(f"{'variant':<18} {'seconds':>8} {'ratio':>6} {'load':>5}  {'reproduce':>9} {'cache':>6} {'verify':>7}  "
          "the cache's first look · the verification's verdict")
    summary = {}
    for v in variants:
        for r, got in enumerate(results[v]):
            secs = got["seconds"]
            first = results[variants[0]][r]["seconds"]  # the first variant of the same round
            by = {s["probe"]: s["seconds"] for s in got["steps"] if s["probe"] != "env-fingerprint"}
            races = [s["seconds"] for s in got["steps"] if s["probe"] == "compile-race"]
            verdict = got["verdict"]
            said = ("-" if verdict is None else f"{verdict['result']}: {verdict['failed_after']} of {verdict['trials_after']} "
                    f"failed after, {verdict['failed_before']} of {verdict['trials_before']} before — {verdict['strength']}")
            cache = next((s["verdicts"] for s in got["steps"] if s["probe"] == "compile-cache"), "-")
            print(f"{v:<18} {secs:>8.1f} {secs / first:>6.2f} {got['load']['5min_after']:>5.1f}  "
                  f"{races[0] if races else float('nan'):>9.1f} "
                  f"{by.get('compile-cache', float('nan')):>6.1f} {races[-1] if len(races) > 1 else float('nan'):>7.1f}  "
                  f"{cache} · {said}")
        summary[v] = results[v]
    if args.rounds > 1:
        for v in variants:
            median = statistics.median(g["seconds"] for g in results[v])
            base = statistics.median(g["seconds"] for g in results[variants[0]])
            print(f"{v:<18} median {median:.1f} s, {median / base:.2f} of {variants[0]}'s median")
    if args.json:
        args.json.write_text(json.dumps({"cores": cores, "torch": torch.__version__, "python": sys.version.split()[0],
                                         "baseline": args.baseline, "results": summary}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
