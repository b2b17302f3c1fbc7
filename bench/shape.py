"""The code's shape in figures (issue 43): the largest modules, the longest functions, the
`.get(` calls of package code, modules over 400 lines, and `sleuth --version` against a bare
python start (a ratio, measured in the same run).

    python bench/shape.py            # the package as it is in this checkout
    python bench/shape.py --no-start # without the start-up timing

Package code is every .py file under app/, hypotheses/, ipc/, probes/, sessions/ and the root's own
modules; tests/, bench/, examples/ and build/ are not package code."""

from __future__ import annotations

import argparse
import ast
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("app", "hypotheses", "ipc", "probes", "sessions")


def package_files() -> list[Path]:
    files = [p for p in ROOT.glob("*.py")]
    for folder in FOLDERS:
        files += [p for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts]
    return sorted(files)


def functions(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            out.append((length, f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"))
    return out


def start_ratio(rounds: int = 9) -> tuple[float, float, float]:
    sleuth = Path(sys.executable).with_name("sleuth")

    def once(cmd: list[str]) -> float:
        t = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        return time.perf_counter() - t

    bare = statistics.median(once([sys.executable, "-c", "pass"]) for _ in range(rounds))
    cli = statistics.median(once([str(sleuth), "--version"]) for _ in range(rounds))
    return bare, cli, cli / bare


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-start", action="store_true", help="skip the start-up timing")
    ap.add_argument("--top", type=int, default=5)
    args = ap.parse_args()
    files = package_files()
    sizes = sorted(((len(p.read_text(encoding="utf-8").splitlines()), str(p.relative_to(ROOT))) for p in files),
                   reverse=True)
    total = sum(n for n, _ in sizes)
    gets = sum(p.read_text(encoding="utf-8").count(".get(") for p in files)
    funcs = sorted((f for p in files for f in functions(p)), reverse=True)
    print(f"package code: {len(files)} modules, {total:,} lines")
    print(f"modules over 400 lines: {sum(1 for n, _ in sizes if n > 400)}")
    print("largest modules:")
    for n, name in sizes[: args.top]:
        print(f"  {n:5,}  {name}")
    print("longest functions:")
    for n, name in funcs[: args.top]:
        print(f"  {n:5,}  {name}")
    print(f".get( calls: {gets:,}")
    if not args.no_start:
        bare, cli, ratio = start_ratio()
        print(f"start: sleuth --version {cli * 1000:.0f} ms, bare python {bare * 1000:.0f} ms ({ratio:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
