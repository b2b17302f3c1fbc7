"""What a reader checks in a postmortem, line by line (issue 25, 3): each run once per
hypothesis, in run order; one verdict per run and hypothesis; sections that agree with the
statuses; a verification said once; an environment table with what the runs measured."""

from __future__ import annotations

import re


def section(md: str, title: str) -> str:
    start = md.index(f"## {title}")
    rest = md[start + len(title) + 3:]
    end = rest.find("\n## ")
    return rest if end < 0 else rest[:end]


def check_postmortem(md: str, statuses: dict[str, str], titles: dict[str, str]) -> None:
    summary = section(md, "Summary")
    # sections agree with the statuses
    for h, status in statuses.items():
        if status == "confirmed":
            assert f"**{titles[h]}** — confirmed" in summary or f"in particular: {titles[h]}" in summary or \
                any(f"**{titles[p]}** — confirmed" in summary for p in statuses if statuses[p] == "confirmed"), (h, summary)
    still = re.search(r"^- Still open: (.*)$", summary, re.M)
    if still:
        for h, status in statuses.items():
            if re.search(rf"\b{re.escape(h)}\b", still.group(1)):
                assert status in ("open", "inconclusive"), f"{h} ({status}) listed under Still open: {still.group(0)}"
        assert "(supported)" not in still.group(0) and "(confirmed)" not in still.group(0)
    for h, status in statuses.items():
        assert f"### {titles[h]} — {status}" in md, (h, status)
    # evidence: each run once per hypothesis, in run order, one verdict
    evidence = section(md, "Evidence by hypothesis")
    for block in evidence.split("\n### ")[1:]:
        runs = [int(r) for r in re.findall(r"^\| #(\d+) \|", block, re.M)]
        assert runs == sorted(set(runs)), f"runs repeated or out of order in {block.splitlines()[0]}: {runs}"
    # timeline: one verdict sentence per run and hypothesis; a verification said once
    timeline = section(md, "Timeline")
    rows = [r for r in timeline.splitlines() if re.match(r"^\| [\d:]+ \| run #\d+", r)]
    runs = [int(re.match(r"^\| [\d:]+ \| run #(\d+)", r).group(1)) for r in rows]
    assert runs == sorted(runs), f"timeline runs out of order: {runs}"
    for row in rows:
        outcome = row.rsplit("|", 2)[-2]
        named = re.findall(r"\b(?:supports|refutes|inconclusive) ([\w-]+)", outcome)
        assert len(named) == len(set(named)), f"two verdicts for one hypothesis in one run: {row}"
        verified = re.findall(r"✔ (verified [\w-]+ #\d+)", outcome)
        assert len(verified) == len(set(verified)), f"a verification said twice: {row}"
    # environment: every value names the run that measured it; "—" never for torch or Python
    env = section(md, "Environment across runs")
    table = [r for r in env.splitlines() if r.startswith("| ") and not r.startswith("| target") and "---" not in r]
    assert table, env
    for row in table:
        cells = [c.strip() for c in row.strip("|").split("|")]
        torch, python = cells[2], cells[6]
        assert torch != "—" and python != "—", row
        for cell in cells[2:]:
            assert cell == "—" or re.search(r"\(#\d+\)$", cell), f"a value without the run that measured it: {row}"
