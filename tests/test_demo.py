"""`sleuth demo --auto` as a newcomer runs it: the whole hunt, headless, and its postmortem."""

from __future__ import annotations

import re
from pathlib import Path

from test_cli import sleuth

MERMAID_LINE = re.compile(
    r"""^\s{4}(?:
        [A-Za-z_][A-Za-z0-9_]*\(\["[^"]*"\]\)                        # stadium node
      | [A-Za-z_][A-Za-z0-9_]*\["[^"]*"\](?::::[a-z]+)?              # box node with class
      | [A-Za-z_][A-Za-z0-9_]*\{\{"[^"]*"\}\}                        # hexagon node
      | [A-Za-z_][A-Za-z0-9_]*\s(?:-->|-\.->)\|[a-z-]+\|\s[A-Za-z_][A-Za-z0-9_]*   # labelled edge
      | classDef\s[a-z]+\s[a-z#0-9:,]+                               # class
    )$""",
    re.X,
)


def mermaid_blocks(text: str) -> list[list[str]]:
    return [block.splitlines() for block in re.findall(r"```mermaid\n(.*?)```", text, re.S)]


def test_demo_auto_hunts_the_race_and_writes_the_postmortem(tmp_path: Path):
    proc = sleuth(tmp_path, "demo", "--auto", "hunt")
    out = proc.stdout
    assert "circular retest" in out and "verifies the lock fixed compile-race" in out
    md = (tmp_path / "hunt" / "postmortem.md").read_text()
    summary = md.split("## Hypotheses")[0]
    assert "Root cause: **compile race** — confirmed" in summary
    assert "Fix: the **lock** remedy" in summary
    blocks = mermaid_blocks(md)
    assert len(blocks) == 1 and blocks[0][0] == "flowchart LR"
    bad = [line for line in blocks[0][1:] if not MERMAID_LINE.match(line)]
    assert bad == []
    ids = {m.group(1) for line in blocks[0] for m in [re.match(r"^\s{4}([A-Za-z_][A-Za-z0-9_]*)[\[\(\{]", line)] if m}
    for line in blocks[0]:
        edge = re.match(r"^\s{4}(\w+) (?:-->|-\.->)\|[a-z-]+\| (\w+)$", line)
        if edge:
            assert edge.group(1) in ids and edge.group(2) in ids, line  # no edge to an undefined node
    flags = md.split("## Flags")[1].split("## Environment")[0]
    assert "circular-retest" in flags and "repeats #" in flags
    remedies = md.split("## Remedies")[1]
    assert "```diff" in remedies and "+compiled_flex = _sleuth_serialized(torch.compile(flex_attention, dynamic=False))" in remedies
    assert "-compiled_flex = torch.compile(flex_attention, dynamic=False)" in remedies
    for link in re.findall(r"\(\[output\]\]?\(([^)]+)\)", md) or re.findall(r"\[output\]\(([^)]+)\)", md):
        assert (tmp_path / "hunt" / link).is_file()
