"""``?``: every key of what is on screen, on one sheet that fits the terminal (80×24 too).

Textual's own key panel lists the focused widget's navigation first, one key per row with
its description wrapped over several: at 120×35 sleuth's own keys fell below its fold. This
sheet groups the keys by where they act (this screen or dialog, the focused pane, the whole
app), one short line each, in as many columns as the width holds; ``?`` or ``esc`` closes it.
"""

from __future__ import annotations

from typing import Any

from rich.columns import Columns
from rich.console import Group
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

__all__ = ["KeysSheet", "keys_of"]

_SKIP = {"keys"}  # ? itself: the sheet's title says how to close it
# moving focus and copying: one line at the end instead of three entries
_FOCUS = {"app.focus_next", "app.focus_previous", "focus_next", "focus_previous", "screen.copy_text",
          "app.copy_text", "copy_text"}
_CELL = 34  # one "key  what it does" entry: two columns at 80, three at 120


def _where(node: Any, screen: Screen) -> str:
    if node is screen:
        return "this dialog" if isinstance(screen, ModalScreen) else "this screen"
    if isinstance(node, App):
        return "everywhere"
    name = node.id or type(node).__name__.lower()
    return f"in the {name.replace('-', ' ')}"


def keys_of(screen: Screen) -> list[tuple[str, list[tuple[str, str]]]]:
    """(where, [(key, what)]) for every active binding of *screen*: the screen's own first,
    then the focused pane's, then the app's. Each action is listed once, under the first key."""
    app = screen.app
    groups: dict[str, list[tuple[str, str]]] = {}
    seen: set[tuple[str, str]] = set()
    order = {"this screen": 0, "this dialog": 0, "everywhere": 2}
    for key, active in screen.active_bindings.items():
        binding: Binding = active.binding
        what = binding.description or ""
        if not what or what in _SKIP or binding.action in _FOCUS or not active.enabled:
            continue
        where = _where(active.node, screen)
        if (where, binding.action) in seen:
            continue
        seen.add((where, binding.action))
        shown = binding.key_display or app.get_key_display(binding) or key
        groups.setdefault(where, []).append((shown, what))
    return sorted(groups.items(), key=lambda g: order.get(g[0], 1))


class KeysSheet(ModalScreen[None]):
    """The keys, grouped, in columns; ``?`` / ``esc`` / ``q`` close it."""

    BINDINGS = [
        Binding("escape", "close", "close"),
        Binding("question_mark", "close", "close", show=False),
        Binding("q", "close", "close", show=False),
    ]

    def __init__(self, sections: list[tuple[str, list[tuple[str, str]]]]) -> None:
        super().__init__(classes="dialog")
        self.sections = sections

    def compose(self) -> ComposeResult:
        parts: list[Any] = []
        for where, keys in self.sections:
            parts.append(Text(where, style="bold"))
            cells = [Text.assemble((f"{k:>7} ", "bold cyan"), (w[: _CELL - 9], "")) for k, w in keys]
            parts.append(Columns(cells, width=_CELL, padding=(0, 1), column_first=True))
        parts.append(Text("tab / shift+tab: the next / previous pane", style="dim"))
        self.content = Group(*parts)  # what the sheet shows (the tests read it as text)
        with Vertical(id="dialog", classes="-keys") as box:
            box.border_title = "Keys  (? or esc: close)"
            yield Static(self.content, id="keys-sheet")

    def action_close(self) -> None:
        self.dismiss(None)


def show_keys(screen: Screen) -> None:
    """Open the sheet for *screen* (a screen or a dialog)."""
    screen.app.push_screen(KeysSheet(keys_of(screen)))
