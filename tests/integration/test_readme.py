"""The README as a newcomer reads it (issue 46): its first screen says what sleuth is, the two
commands and where to go next; its links lead somewhere; its set-up line, word for word, works
in a fresh venv in a copy of this tree; and the command the demo prints at the end opens the
demo's hunt in the UI from where the newcomer stands."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
FIRST_SCREEN = README.split("## On your own code")[0]
SH_BLOCKS = re.findall(r"^```sh\n(.*?)^```", FIRST_SCREEN, re.M | re.S)
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def setup_line() -> str:
    return SH_BLOCKS[0].strip()


def test_the_first_screen_says_what_sleuth_is_the_two_commands_and_where_next():
    assert FIRST_SCREEN.startswith("# sleuth\n\n**sleuth** is a terminal debugging assistant"), FIRST_SCREEN[:200]
    assert len(SH_BLOCKS) == 2, SH_BLOCKS
    line = setup_line()
    assert "\n" not in line  # one command to paste
    # a CPU torch on a machine without a GPU, from PyTorch's own index; then sleuth; then the demo
    assert re.search(rf"pip install torch==[0-9.]+ --index-url {re.escape(CPU_INDEX)} && pip install -e '\.\[torch,dev\]' "
                     r"&& sleuth demo --auto$", line), line
    assert "leave out `--index-url …` to get the CUDA build" in FIRST_SCREEN
    assert SH_BLOCKS[1].strip() == "python -m pytest"
    assert "## Where next" in FIRST_SCREEN
    # the command the demo ends with, as the README says it
    assert "`cd sleuth-demo && sleuth`" in FIRST_SCREEN


def test_ci_runs_the_readmes_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^# The README's test command.*\n" + re.escape(SH_BLOCKS[1].strip()) + "$", ci, re.M), ci


def test_every_link_of_the_readme_and_its_pages_leads_somewhere():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue  # a web address
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            assert file.exists(), f"{page.relative_to(ROOT)} links to {target}: no such file"
            if anchor and file.suffix == ".md":
                heads = {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
                         for h in re.findall(r"^#+ (.*)$", file.read_text(encoding="utf-8"), re.M)}
                assert anchor in heads, f"{page.relative_to(ROOT)} links to {target}: no such heading"
    for name in ("ui", "commands", "hangs", "fleets", "mcp", "install", "development"):
        assert f"(docs/{name}.md)" in FIRST_SCREEN, name


def test_no_figure_in_the_readme_that_no_test_or_bench_makes():
    """A figure of time or size in the README names the benchmark that measures it, in its sentence."""
    for sentence in re.split(r"(?<=[.:])\s+(?=[A-Z`])", README.replace("\n", " ")):
        if re.search(r"\b\d+(\.\d+)?\s?(s|ms|seconds?|minutes?|KB|MB|GB|%)\b|\b\d+ of (the )?\d+ tests\b", sentence):
            assert re.search(r"bench/\w+\.py|tests/(\w+/)?test_\w+\.py", sentence), sentence


def _copy_of_this_tree(into: Path) -> Path:
    """What a clone holds: the tracked files and the new ones git would take (not .venv, caches)."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        src = ROOT / rel
        if src.is_file():
            (into / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, into / rel)
    return into


def _newcomers_shell() -> dict[str, str]:
    """A shell as a newcomer's: no venv active (the tests' own is taken off PATH)."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "COLUMNS", "LINES")}
    venv = os.environ.get("VIRTUAL_ENV")
    if venv:
        env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(venv))
    # This machine may reach no index but PyPI: pip then takes the same CPU wheel from the
    # wheels it is configured with (find-links), after one try at PyTorch's index, not five.
    env["PIP_RETRIES"] = "0"
    return env


@pytest.mark.slow
@pytest.mark.tui
@pytest.mark.torch
def test_a_newcomer_follows_the_readme_and_opens_the_demos_hunt(tmp_path: Path):
    from support.tmux import Tmux

    clone = _copy_of_this_tree(tmp_path / "sleuth")
    env = _newcomers_shell()
    proc = subprocess.run(["bash", "-c", setup_line()], cwd=clone, env=env, capture_output=True, text=True, timeout=1500)
    out = proc.stdout
    if proc.returncode and CPU_INDEX.split("/")[2] in proc.stderr and "No matching distribution found for torch" in proc.stderr:
        pytest.skip("PyTorch's CPU index cannot be reached from here, and pip has no wheel of that torch configured")
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    torch = subprocess.run([clone / ".venv" / "bin" / "python", "-c", "import torch; print(torch.__version__)"],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert torch.startswith("2.13.0") and "cu" not in torch, torch  # the CPU build
    # the demo's hunt held: its cache look was its own and cold
    assert re.search(r"run #\d+ compile-cache: completed in [0-9.]+ s — inconclusive cache-invalidation", out), out
    assert (clone / "sleuth-demo" / ".sleuth" / "caches" / "inductor").is_dir()
    # its last line is the command that opens the hunt, from where the newcomer stands
    last = out.strip().splitlines()[-1]
    assert last == "Open the hunt in the UI:  cd sleuth-demo && sleuth", out[-2000:]
    command = last.split(":  ", 1)[1]
    term = Tmux(clone)
    try:  # the newcomer's shell still has the venv the set-up line activated
        term.start(f". .venv/bin/activate && {command}", size=(80, 24))
        screen = term.wait_for("drafter race demo", "compile race", "?inconclusive", timeout=120)
        assert "no investigation" not in screen
        term.keys("q")
        term.wait_for("SLEUTH-EXIT=0", timeout=30)
    finally:
        term.kill()
