"""Check a Mermaid block with Mermaid's own parser (node + tests/mermaid, installed by .ci/run),
and always with a strict line grammar of what the postmortem writes.

Where node or the npm packages are missing, only the strict check runs, unless
SLEUTH_REQUIRE_MERMAID=1 (set by .ci/run), which makes their absence a failure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).parents[1] / "mermaid"

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


def strict_problems(block: list[str]) -> list[str]:
    """Lines outside the grammar, and edges to nodes that were never defined."""
    bad = [line for line in block[1:] if not MERMAID_LINE.match(line)]
    ids = {m.group(1) for line in block for m in [re.match(r"^\s{4}([A-Za-z_][A-Za-z0-9_]*)[\[\(\{]", line)] if m}
    for line in block:
        edge = re.match(r"^\s{4}(\w+) (?:-->|-\.->)\|[a-z-]+\| (\w+)$", line)
        if edge and not (edge.group(1) in ids and edge.group(2) in ids):
            bad.append(f"edge to an undefined node: {line}")
    return bad


def real_parser_available() -> bool:
    return shutil.which("node") is not None and (HERE / "node_modules" / "mermaid").is_dir()


def parse_with_mermaid(block: list[str]) -> dict:
    """{"ok": True, "type": "flowchart-v2"} or {"ok": False, "error": ...} from mermaid.parse."""
    proc = subprocess.run(
        ["node", str(HERE / "check.mjs")], input="\n".join(block) + "\n", capture_output=True, text=True, timeout=120
    )
    last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    try:
        return json.loads(last)
    except json.JSONDecodeError:
        return {"ok": False, "error": f"node said: {proc.stdout[-500:]} {proc.stderr[-500:]}"}


def assert_valid_flowchart(block: list[str]) -> None:
    assert block and block[0] == "flowchart LR", block[:1]
    assert strict_problems(block) == []
    if real_parser_available():
        result = parse_with_mermaid(block)
        assert result == {"ok": True, "type": "flowchart-v2"}, result
    else:
        assert os.environ.get("SLEUTH_REQUIRE_MERMAID") != "1", (
            "SLEUTH_REQUIRE_MERMAID=1 but Mermaid's parser is not installed: (cd tests/mermaid && npm ci)"
        )
