"""The markdown postmortem of an investigation: pure code over the folded state and store.

GitHub-flavoured markdown: summary (symptom, root cause, fix and the run that verified it,
time to fix), the hypothesis graph as a Mermaid flowchart, the timeline, evidence per
hypothesis, flagged circular retests / oscillations / revisits with the time they cost,
the environment across runs, each remedy as a diff, and links to every run's full output
(written beside the markdown by :func:`write_postmortem`). Each section is its own function
(hunt.py, timeline.py, known.py, readings.py, environment.py; text.py their small helpers);
this module puts them in order and writes the file.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from ...hypotheses import InvestigationState
from .environment import environment_section
from .hunt import evidence_section, flags_section, graph_section, remedies_section, summary_section
from .known import known_section
from .readings import cache_section, fleet_section, hang_section
from .timeline import timeline_section

__all__ = ["postmortem_markdown", "write_postmortem"]


def postmortem_markdown(st: InvestigationState, outputs: dict[int, str] | None = None) -> str:
    """The postmortem; *outputs* maps runs to links to their full output."""
    t0 = st.created_ts or 0.0
    lines = [
        f"# Postmortem: {st.title or 'investigation'}", "",
        *summary_section(st, t0),
        *graph_section(st),
        *timeline_section(st, outputs or {}, t0),
        *evidence_section(st),
        *known_section(st),
        *hang_section(st),
        *flags_section(st),
        *environment_section(st),
        *cache_section(st),
        *fleet_section(st),
        *remedies_section(st),
        f"_Written by sleuth on {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC from {st.last_seq} events._",
    ]
    return "\n".join(lines) + "\n"


def write_postmortem(inv: Any, path: Path | str) -> Path:
    """Write the markdown to *path* and every run's full output beside it."""
    path = Path(path)
    outdir = path.with_name(path.stem + "-output")
    outdir.mkdir(exist_ok=True)  # beside the file, in a folder that exists (no folder the user did not name)
    links: dict[int, str] = {}
    for run in inv.state.runs:
        target = outdir / f"run-{run}.txt"
        with open(target, "wb") as fh:  # chunk by chunk: a run's output may not fit in memory
            for _stream, _ts, data in inv.store.output_chunks(run):
                fh.write(data)
        links[run] = f"{outdir.name}/{target.name}"
    tmp = path.with_name(f".{path.name}.sleuth-tmp")  # whole or not at all
    try:
        tmp.write_text(postmortem_markdown(inv.state, links), encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
