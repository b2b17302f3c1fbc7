"""The output view of one run: a Line API widget that reads only the lines on screen from the
session store, so a run of ten million lines opens and scrolls at once.

Folds (JSON/config dumps, repeated warnings) come from a thread worker that feeds the run's
lines to :class:`app.outline.FoldDetector` through its own read-only connection, block by
block, also while the run is still being written; the widget only merges what it finds.
Search goes to :meth:`sessions.Store.find` (also in a thread worker, on its own connection).
What a row shows is output_rows.py's; the reads of the store (blocks, scan, search) are
output_reading.py's: neither imports Textual.
"""

from __future__ import annotations

import time
from pathlib import Path

from rich.text import Text
from textual import work
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.worker import get_current_worker

from ...sessions import OutputLine, Store
from ..outline import Fold, Outline
from .output_reading import BLOCK, CACHE_BLOCKS, SCAN_BLOCK, LineBlocks, count_hits, find_hit, lines_in, scan_folds
from .output_rows import CURSOR_STYLE, FOLD_STYLE, HIT_STYLE, STDERR_MARK, STYLES, row_text

# the old names of what output_rows.py and output_reading.py now hold, importable from here as before
__all__ = ["BLOCK", "CACHE_BLOCKS", "CURSOR_STYLE", "FOLD_STYLE", "HIT_STYLE", "OutputView", "QUIET_S", "SCAN_BLOCK",
           "STDERR_MARK", "STYLES"]

QUIET_S = 0.4  # the scan waits this long after the user's last move, search or switch


class OutputView(ScrollView, can_focus=True):
    """The selected run's lines, folded and searchable."""

    BINDINGS = [
        Binding("up", "cursor(-1)", "up", show=False),
        Binding("down", "cursor(1)", "down", show=False),
        Binding("pageup", "cursor(-20)", "page up", show=False),
        Binding("pagedown", "cursor(20)", "page down", show=False),
        Binding("home", "cursor_to(0)", "top (and left)", show=False),
        Binding("end", "cursor_to(-1)", "end", show=False),
        Binding("enter", "toggle_fold", "open/close fold", id="output.toggle_fold", tooltip="Open or close the folded lines under the cursor"),
        Binding("s", "cycle_stream", "stream", id="output.stream", tooltip="Show both streams, stdout only, or stderr only"),
        Binding("w", "toggle_wrap", "wrap", id="output.wrap", tooltip="Wrap long lines (or scroll them sideways)"),
        Binding("left", "scroll_sideways(-8)", "scroll left", show=False),
        Binding("right", "scroll_sideways(8)", "scroll right", show=False),
        Binding("n", "find_next", "next hit", id="output.next", show=False),
        Binding("N", "find_previous", "previous hit", id="output.previous", show=False),
    ]

    cursor = reactive(0)  # row

    class Changed(Message):
        """Lines or folds changed (the header shows counts); replaced by the next one."""

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, OutputView.Changed)

    class SearchResult(Message):
        def __init__(self, term: str, line: int | None, wrapped: bool) -> None:
            super().__init__()
            self.term, self.line, self.wrapped = term, line, wrapped

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.store: Store | None = None
        self.run: int | None = None
        self.stream: str | None = None
        self.total = 0
        self.complete = True
        self.outline = Outline()
        self.term = ""
        self.hit_line: int | None = None
        self.hits: tuple[int, int, bool] | None = None  # (this hit's ordinal, hits, more than counted)
        self.wrap = False
        self._wrapped: tuple[tuple, list[tuple[int, Strip]]] | None = None
        self.follow = True
        self.new_since_scroll = 0
        self._blocks = LineBlocks()
        self._width = 0
        self._session: Path | None = None
        self._quiet_until = 0.0
        self._searching = False
        self.painted_at = 0.0  # perf_counter() when the last row on screen was last rendered (bench/viewer.py)

    def _touch(self) -> None:
        """The user did something: the fold scan yields the interpreter for a moment, so the
        screen answers at once (scan and UI share one GIL)."""
        self._quiet_until = time.monotonic() + QUIET_S

    # ---------------------------------------------------------------- what is shown

    def show_run(self, store: Store | None, run: int | None, stream: str | None = None) -> None:
        """Show *run* from *store* (None: nothing). Starts the fold scan for it."""
        self.workers.cancel_group(self, "outline")
        self._touch()
        self.store, self.run, self.stream = store, run, stream
        self._session = store.path if store is not None else None
        self._blocks.clear()
        self.outline = Outline()
        self.cursor = 0
        self.hit_line = None
        self.hits = None
        self.follow = True
        self.new_since_scroll = 0
        self._width = 0
        self.total, self.complete = self._count()
        self._resize()
        self.scroll_to(x=0, y=0, animate=False)  # another run starts at its top-left
        if run is not None and store is not None:
            self._scan(self._session, run, stream)
        self.refresh()
        self.post_message(self.Changed())

    def _count(self) -> tuple[int, bool]:
        if self.store is None or self.run is None:
            return 0, True
        summary = self.store.output_summary(self.run)
        return lines_in(summary, self.stream), summary["complete"]

    def poll(self) -> None:
        """A live run: pick up new lines (called on a timer by the screen)."""
        if self.store is None or self.run is None:
            return
        total, complete = self._count()
        if total == self.total and complete == self.complete:
            return
        grew = total - self.total
        # the last line of a live run may still grow: drop its cached block
        self._blocks.drop_last(self.total)
        self.total, self.complete = total, complete
        at_end = self.follow
        self._resize()
        if at_end:
            self.scroll_end(animate=False)
            self.cursor = max(self.rows - 1, 0)
        else:
            self.new_since_scroll += grew
        self.refresh()
        self.post_message(self.Changed())

    @property
    def rows(self) -> int:
        return self.outline.rows(self.total)

    def _resize(self) -> None:
        width = self.size.width if self.wrap else max(self._width, self.size.width)
        self.virtual_size = Size(width, self.rows)

    def _read(self, start: int, count: int) -> list[OutputLine]:
        assert self.store is not None and self.run is not None
        return self.store.lines(self.run, start, count, stream=self.stream)

    def line(self, number: int) -> OutputLine | None:
        return self._blocks.line(number, self._read)

    def visible_text(self) -> list[str]:
        """The text of the rows on screen, as shown (for tests and the tmux check)."""
        top = int(self.scroll_offset.y)
        return [self._row_text(r)[0].plain for r in range(top, min(top + self.size.height, self.rows))]

    def _row_text(self, row: int) -> tuple[Text, str]:
        return row_text(self.outline, row, self.line, self.stream is None, self.term)

    def render_line(self, y: int) -> Strip:
        if self.wrap:
            return self._render_wrapped(y)
        row = int(self.scroll_offset.y) + y
        width = self.size.width
        if row >= self.rows or self.store is None:
            return Strip.blank(width, self.rich_style)
        text, _ = self._row_text(row)
        segments = list(text.render(self.app.console))
        strip = Strip(segments)
        if strip.cell_length > self._width:
            self._width = strip.cell_length
            self.virtual_size = Size(self._width, self.rows)
        strip = strip.crop(int(self.scroll_offset.x), int(self.scroll_offset.x) + width)
        strip = strip.extend_cell_length(width)
        if row == self.cursor and self.has_focus:
            strip = strip.apply_style(CURSOR_STYLE)
        if y == self.size.height - 1 or row == self.rows - 1:
            self.painted_at = time.perf_counter()
        return strip.apply_style(self.rich_style)

    def _wrapped_screen(self) -> list[tuple[int, Strip]]:
        """With wrap on: the screen's lines, each (row, piece), from the top row down; rows
        scroll one logical line at a time (as ``less``), long lines take several screen lines."""
        width, height, top = self.size.width, self.size.height, int(self.scroll_offset.y)
        key = (top, width, height, self.rows, self.cursor, self.term, self.has_focus, len(self.outline.expanded),
               self.run, self.stream)
        if self._wrapped is not None and self._wrapped[0] == key:
            return self._wrapped[1]
        screen: list[tuple[int, Strip]] = []
        row = top
        while len(screen) < height and row < self.rows and self.store is not None:
            text, _ = self._row_text(row)
            for line in text.wrap(self.app.console, max(width, 1)) or [Text("")]:
                strip = Strip(list(line.render(self.app.console))).extend_cell_length(width)
                if row == self.cursor and self.has_focus:
                    strip = strip.apply_style(CURSOR_STYLE)
                screen.append((row, strip.apply_style(self.rich_style)))
            row += 1
        self._wrapped = (key, screen[:height])
        return self._wrapped[1]

    def _render_wrapped(self, y: int) -> Strip:
        screen = self._wrapped_screen()
        if y < len(screen):
            if y == len(screen) - 1:
                self.painted_at = time.perf_counter()
            return screen[y][1]
        return Strip.blank(self.size.width, self.rich_style)

    def action_toggle_wrap(self) -> None:
        self.wrap = not self.wrap
        self._wrapped = None
        self.scroll_to(x=0, animate=False)
        self._resize()
        self.refresh()
        self.post_message(self.Changed())

    def action_scroll_sideways(self, cells: int) -> None:
        if not self.wrap:
            self.scroll_to(x=max(0, self.scroll_offset.x + cells), animate=False)

    # ---------------------------------------------------------------- folds

    @work(thread=True, group="outline", exclusive=True)
    def _scan(self, session: Path | None, run: int, stream: str | None) -> None:
        if session is None:
            return
        worker = get_current_worker()

        def found(folds: list[Fold]) -> None:
            self.app.call_from_thread(self._add_folds, run, folds)

        scan_folds(session, run, stream, cancelled=lambda: worker.is_cancelled, busy=self._busy, found=found)

    def _busy(self) -> bool:
        """The user searches, or did something a moment ago: the fold scan waits."""
        return self._searching or time.monotonic() < self._quiet_until

    def _add_folds(self, run: int, folds: list[Fold]) -> None:
        if run != self.run:
            return
        top_line = self.outline.at_row(int(self.scroll_offset.y))[0]
        cursor_line = self.outline.at_row(self.cursor)[0]
        self.outline.add(folds)
        self._resize()
        # keep the same lines in view while folds arrive
        if self.follow and not self.complete:
            self.scroll_end(animate=False)
        else:
            self.scroll_to(y=self.outline.row_of(top_line), animate=False)
        self.cursor = self.outline.row_of(cursor_line)
        self.refresh()
        self.post_message(self.Changed())

    def action_toggle_fold(self) -> None:
        number, fold = self.outline.at_row(self.cursor)
        fold = fold or self.outline.fold_at(number)
        if fold is None:
            return
        self.outline.toggle(fold)
        self.cursor = self.outline.row_of(fold.start)
        self._resize()
        self.refresh()
        self.post_message(self.Changed())

    # ---------------------------------------------------------------- moving

    def action_cursor(self, delta: int) -> None:
        self._touch()
        self.cursor = max(0, min(self.rows - 1, self.cursor + delta))
        self._reveal()

    def action_cursor_to(self, row: int) -> None:
        self._touch()
        self.cursor = self.rows - 1 if row < 0 else row
        if row == 0:
            self.scroll_to(x=0, animate=False)  # Home: the top-left, as in a pager
        self._reveal()

    def _reveal(self) -> None:
        top = int(self.scroll_offset.y)
        height = max(self.size.height, 1)
        if self.wrap:  # the rows on screen are fewer than its lines when some wrap
            shown = {row for row, _ in self._wrapped_screen()}
            height = max(len(shown) - (1 if shown and self.cursor >= top + len(shown) - 1 else 0), 1)
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False)
        elif self.cursor >= top + height:
            self.scroll_to(y=self.cursor - height + 1, animate=False)
        self.refresh()

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        self._touch()
        super().watch_scroll_y(old_value, new_value)
        self.follow = new_value >= self.max_scroll_y
        if self.follow:
            self.new_since_scroll = 0
            self.post_message(self.Changed())

    def watch_cursor(self) -> None:
        self.refresh()

    def go_to_line(self, number: int) -> None:
        if self.outline.expand_around(number):
            self._resize()
        row = self.outline.row_of(number)
        self.cursor = row
        height = max(self.size.height, 1)
        self.scroll_to(y=max(row - height // 3, 0), animate=False)
        self.refresh()

    # ---------------------------------------------------------------- streams, search

    def action_cycle_stream(self) -> None:
        order = [None, "stdout", "stderr"]
        self.show_run(self.store, self.run, order[(order.index(self.stream) + 1) % 3])

    def search(self, term: str, backwards: bool = False) -> None:
        if term != self.term:
            self.hits = None
        self.term = term
        self.refresh()
        if term and self._session is not None and self.run is not None:
            self._touch()
            self._searching = True
            start = self.outline.at_row(self.cursor)[0]
            self._find(self._session, self.run, self.stream, term, start, backwards)

    def action_find_next(self) -> None:
        self.search(self.term)

    def action_find_previous(self) -> None:
        self.search(self.term, backwards=True)

    @work(thread=True, group="search", exclusive=True)
    def _find(self, session: Path, run: int, stream: str | None, term: str, start: int, backwards: bool) -> None:
        ignore_case = term.islower()
        try:
            line, wrapped = find_hit(session, run, stream, term, start, backwards, ignore_case)
            hits = count_hits(session, run, stream, term, line, ignore_case) if line is not None else None
        finally:
            self._searching = False
        self.app.call_from_thread(self._found, run, term, line, wrapped, hits)

    def _found(self, run: int, term: str, line: int | None, wrapped: bool, hits: tuple[int, int, bool] | None = None) -> None:
        self._searching = False
        self._touch()
        if run != self.run:
            return
        self.hit_line = line
        self.hits = hits
        if line is not None:
            self.go_to_line(line)
        self.post_message(self.SearchResult(term, line, wrapped))
        self.post_message(self.Changed())
