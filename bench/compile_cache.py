"""Benchmark: what `sleuth probe run compile-cache` costs on a warm cache, beside the plain
compile it measures, in the same run (issue 34).

  * baseline: a fresh `python -c` that imports torch and compiles the probe's built-in function
    against the same warm inductor cache (what the probe's child does, without sleuth);
  * the probe: `sleuth probe run compile-cache --force` in a project whose target points at that
    cache, through the CLI as a user runs it (the agent broker warm after the first command).

Each is timed --repeat times after one warm-up; the figure is the median and the ratio of the
probe to the baseline. No goal is asserted: the ratio is reported (README, the issue's note).

    python bench/compile_cache.py [--repeat 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PLAIN = ("import torch\n"
         "def builtin(x):\n    return torch.sin(x) * 2 + x.cos()\n"
         "torch.compile(builtin)(torch.randn(8))\n")


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    sleuth = shutil.which("sleuth") or str(Path(sys.executable).with_name("sleuth"))
    root = Path(tempfile.mkdtemp(prefix="sleuth-bench-cc-"))
    try:
        cache = root / "inductor"
        proj = root / "proj"
        proj.mkdir()
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache)}
        subprocess.run([sleuth, "init"], cwd=proj, env=env, check=True, capture_output=True)
        (proj / "sleuth.toml").write_text(f'[targets.local]\npython = "{sys.executable}"\n'
                                          f'env = {{ TORCHINDUCTOR_CACHE_DIR = "{cache}" }}\n')
        plain = [sys.executable, "-c", PLAIN]
        probe = [sleuth, "probe", "run", "compile-cache", "--force", "--json"]
        timed(plain, proj, env)  # the cache written (cold), the broker started
        timed(probe, proj, env)
        base, measured = [], []
        for _ in range(args.repeat):  # interleaved, so a slow moment of the machine hits both
            base.append(timed(plain, proj, env))
            measured.append(timed(probe, proj, env))
        last = json.loads(subprocess.run(probe, cwd=proj, env=env, check=True, capture_output=True, text=True).stdout)
        rec = next(r for r in last["records"] if r["kind"] == "result")
        out = {"repeat": args.repeat, "plain_compile_s": round(statistics.median(base), 3),
               "probe_s": round(statistics.median(measured), 3),
               "ratio": round(statistics.median(measured) / statistics.median(base), 2),
               "last_probe": {"hits": rec["hits"], "misses": rec["misses"]}, "python": sys.version.split()[0],
               "cores": os.cpu_count()}
        subprocess.run([sleuth, "agent", "stop"], cwd=proj, env=env, capture_output=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"warm cache, median of {out['repeat']}: plain compile in a fresh python {out['plain_compile_s']} s; "
              f"sleuth probe run compile-cache {out['probe_s']} s (×{out['ratio']}); last probe: "
              f"{out['last_probe']['hits']} hit(s), {out['last_probe']['misses']} miss(es)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
