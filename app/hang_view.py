"""A stacks run's ranks in a table (the run's detail, the live screen's pinned reading): each
rank's main thread, the collective under it, its state, the native wait and the Flight
Recorder, read through hypotheses/results.py's typed readers. Rich text only."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from rich.text import Text

from ..hypotheses.hang import state_word
from ..hypotheses.results import HangReading, RankRecorder, RankRow

__all__ = ["ranks_table"]


def _recorded(fr: RankRecorder | None) -> str:
    """A rank's Flight Recorder in a cell: the collective it waits in, or none, or why unread."""
    if fr is None:
        return "—"
    if fr.error:
        return "unread"
    if not fr.waits_in:
        return "in no collective"
    return "in " + re.sub(r"^\w+:| \(.*\)$", "", str(fr.waits_in[-1]))  # "in all_reduce #4 on group 0"


def ranks_table(result: Mapping[str, Any], most: int = 64) -> Text:
    """A stacks run's ranks × where their threads are: one row per rank (its main thread's place,
    the collective under it, stuck or moving, how many samples), the odd ranks marked ◆ and
    their reading said first."""
    reading = HangReading.from_dict(result)
    text = Text()
    for said in reading.sentences or []:
        text.append(f"{said}\n", style="bold yellow" if reading.verdict != "healthy" else "bold green")
    odd = reading.odd_kinds
    rows = reading.rows()
    if not rows:
        return text
    recorded = any(row.flight_recorder for row in rows)
    native = any(row.native_read for row in rows)
    text.append(f"\n{'':2}{'rank':<10} {'main thread':<44} {'collective':<12} {'state':<12} samples  "
                + (f"{'native wait':<34} " if native else "")
                + (f"{'flight recorder':<28} " if recorded else "") + "other threads\n", style="bold dim")
    for row in rows[:most]:
        mark = "◆ " if row.label in odd else "  "
        text.append(_rank_line(row, mark, native, recorded), style="bold red" if mark.strip() else "")
    if len(rows) > most:
        text.append(f"  … and {len(rows) - most} more (sleuth probe run stacks --json has them all)\n", style="dim")
    return text


def _rank_line(row: RankRow, mark: str, native: bool, recorded: bool) -> str:
    """One rank's row: where its main thread is, or why no stack was read."""
    label = row.label if row.has("label") else "?"
    if row.error:
        return f"{mark}{label:<10} no stacks: {str(row.error)[:100]}\n"
    place = row.place
    where = f"{place.function} {place.file_name}:{place.line}" if place else "—"
    collective = (place.collective if place else None) or "—"
    wait = row.wait
    waits = str(wait.frame) if wait else "none seen" if row.native_read else "not read"
    others = ", ".join(f"{name}: {at.function}" for name, at in row.other_threads.items())
    return (f"{mark}{label:<10} {where[:44]:<44} {str(collective):<12} "
            f"{state_word(row.to_dict())[:12]:<12} {'/'.join(map(str, row.main_samples or [])):<8} "
            + (f"{waits[:34]:<34} " if native else "")
            + (f"{_recorded(row.recorder)[:28]:<28} " if recorded else "") + f"{others[:60]}\n")
