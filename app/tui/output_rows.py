"""How a row of the output view reads, without Textual: a line of the run (styled as an
error, traceback, warning or record, its in-place updates counted, stderr marked, the search
term lit) or a closed fold; and the styles of the rows and the cursor."""

from __future__ import annotations

from collections.abc import Callable

from rich.style import Style
from rich.text import Text

from ...sessions import OutputLine
from ..outline import Outline, display_text, line_style, record_line

__all__ = ["CURSOR_STYLE", "FOLD_STYLE", "HIT_STYLE", "STDERR_MARK", "STYLES", "row_text"]

STYLES = {
    "error": Style(color="red", bold=True),
    "traceback": Style(color="red"),
    "warning": Style(color="yellow"),
    "record": Style(color="green", dim=True),
    "": Style(),
}
FOLD_STYLE = Style(color="cyan", italic=True)
HIT_STYLE = Style(bgcolor="yellow", color="black")
CURSOR_STYLE = Style(bgcolor="grey23")
STDERR_MARK = Style(color="magenta", dim=True)


def row_text(outline: Outline, row: int, line: Callable[[int], OutputLine | None], both_streams: bool,
             term: str) -> tuple[Text, str]:
    """Row *row* of *outline* as shown, and its line's style ("fold" for a closed fold):
    *line* reads a line by number; with *both_streams* a stderr line is marked."""
    number, fold = outline.at_row(row)
    if fold is not None:
        mark = "▸" if fold.kind == "dump" else "⟳"
        return Text(f"{mark} [+] {fold.label}   ⏎ open", style=FOLD_STYLE), "fold"
    ln = line(number)
    if ln is None:
        return Text(""), ""
    shown, updates = display_text(ln.text)
    style = line_style(shown)
    record = record_line(shown) if style == "record" else None
    if record is not None:
        shown = f"⟨record⟩ {record}"
    text = Text(shown, style=STYLES[style])
    if updates:
        text.append(f"   ⟳ {updates} updates", style="dim")
    open_fold = outline.fold_at(number)
    if open_fold is not None and open_fold.start == number and open_fold.start in outline.expanded:
        text = Text("▾ ", style=FOLD_STYLE) + text
    if ln.stream == "stderr" and both_streams:
        text = Text("▌", style=STDERR_MARK) + text
    if term:
        text.highlight_words([term], HIT_STYLE, case_sensitive=not term.islower())
    return text, style
