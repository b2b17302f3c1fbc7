"""The replay screen: the investigation as it stood at event k, read-only, with a scrubber;
its clock stands at event k too."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding

from ....hypotheses import Event, EventKind, InvestigationState
from ..widgets import Scrubber
from .browse import BrowseScreen

__all__ = ["ReplayScreen"]


class ReplayScreen(BrowseScreen):
    """The investigation as it stood at event k; ←/→ step, [ / ] jump between flags."""

    MODE = "REPLAY (read-only)"
    EMPTY_RUN = "no run yet at this event"
    BINDINGS = [
        Binding("left", "step(-1)", "◀ event", id="replay.back", tooltip="One event back", priority=True),
        Binding("right", "step(1)", "event ▶", id="replay.forward", tooltip="One event on", priority=True),
        Binding("left_square_bracket", "flag(-1)", "⚑ prev", id="replay.flag_back", key_display="[", tooltip="The previous flagged event"),
        Binding("right_square_bracket", "flag(1)", "⚑ next", id="replay.flag_forward", key_display="]", tooltip="The next flagged event"),
        Binding("home", "jump(0)", "first", id="replay.first", show=False, priority=True),
        Binding("end", "jump(-1)", "last", id="replay.last", show=False, priority=True),
        Binding("slash", "search", "search", id="search", key_display="/"),
        Binding("e", "export", "export", id="export", show=False),
        Binding("o", "focus_output", "output", id="focus_output", show=False),
        Binding("q", "app.quit", "quit", id="quit"),
        Binding("tab", "app.focus_next", "next pane", show=False),
        Binding("shift+tab", "app.focus_previous", "previous pane", show=False),
        *BrowseScreen.COMMON_BINDINGS,
    ]

    def __init__(self, events: list[Event], at: int | None = None, hint: str | None = None) -> None:
        super().__init__(hint)
        self.events = events
        self.at = len(events) if at is None else at
        self._state = InvestigationState.fold(events[: self.at])

    @property
    def state(self) -> InvestigationState:
        return self._state

    def now(self) -> float:
        """The time of event k: the clock stands where the scrubber is."""
        if self.at and self.events:
            return self.events[self.at - 1].ts
        return self._state.created_ts or (self.events[0].ts if self.events else self.app.clock())

    def compose_extra(self) -> ComposeResult:
        yield Scrubber(id="scrubber")

    def refresh_all(self) -> None:
        super().refresh_all()
        self.query_one(Scrubber).show(self.events, self.at, self._state)

    def _go(self, k: int) -> None:
        k = max(0, min(len(self.events), k))
        if k == self.at:
            return
        if k > self.at:
            for e in self.events[self.at : k]:
                self._state.apply(e)
        else:
            self._state = InvestigationState.fold(self.events[:k])
        self.at = k
        self.refresh_all()
        # the output follows the scrubber: the run event k is about (or the earlier run a flag
        # names, when its own has not begun), else the newest run at k
        runs = self._state.runs
        data = self.events[k - 1].data if k else {}
        about = [r for r in (data.get("run"), data.get("earlier")) if isinstance(r, int) and r in runs]
        run = about[0] if about else max(runs, default=None)
        if run != self.shown_run:
            self.show_output(run)
        else:
            self.update_run_header()

    def action_step(self, delta: int) -> None:
        self._go(self.at + delta)

    def action_jump(self, k: int) -> None:
        self._go(len(self.events) if k < 0 else k)

    def action_flag(self, direction: int) -> None:
        flagged = [i + 1 for i, e in enumerate(self.events) if e.kind == EventKind.FLAG_RAISED]
        if direction > 0:
            after = [k for k in flagged if k > self.at]
            if after:
                self._go(after[0])
        else:
            before = [k for k in flagged if k < self.at]
            if before:
                self._go(before[-1])
