"""Modal dialogs: the circular-retest question, the remedy diff, add-something, pick a target,
and a yes/no question. Each is a ``ModalScreen[T]`` that dismisses with its answer."""

from __future__ import annotations

from typing import Any

from rich.syntax import Syntax
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.markup import escape
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Input, Label, OptionList, Select, Static
from textual.widgets.option_list import Option

__all__ = ["AddDialog", "ConfirmDialog", "FleetMatrix", "RemedyDialog", "RetestDialog", "TargetDialog"]

# ← → move between a dialog's buttons (a text field keeps them for its cursor)
ARROWS = [
    Binding("left", "app.focus_previous", "previous button", show=False),
    Binding("right", "app.focus_next", "next button", show=False),
]


# ? shows every key of the dialog, as it does on the screens (a text field takes it as a character)
KEYS = Binding("question_mark", "toggle_keys", "keys", key_display="?", tooltip="Show or hide every key of this dialog")


class KeysHelp:
    """``?`` in a dialog: the key sheet (app/tui/keys.py), listing the dialog's own keys."""

    def action_toggle_keys(self) -> None:
        from .keys import show_keys

        show_keys(self)  # type: ignore[arg-type]  (mixed into a ModalScreen)


def key_label(text: str) -> str:
    """A button label that shows its key: "Apply [a]" (brackets are markup otherwise)."""
    return escape(text)


class ConfirmDialog(KeysHelp, ModalScreen[bool]):
    """A question with a default answer; y / n / enter / escape."""

    BINDINGS = [
        Binding("y", "answer(True)", "yes", id="confirm.yes"),
        Binding("n", "answer(False)", "no", id="confirm.no"),
        Binding("escape", "answer(False)", "cancel", show=False),
        Binding("enter", "default", "default", show=False),
        KEYS,
        *ARROWS,
    ]

    def __init__(self, title: str, body: Text | str, default: bool = False, yes: str = "Yes", no: str = "No") -> None:
        super().__init__(classes="dialog")
        self.title_text, self.body, self.default = title, body, default
        self.yes, self.no = yes, no

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(self.title_text, id="dialog-title")
            yield Static(self.body, id="dialog-body")
            with Horizontal(id="dialog-buttons"):
                yield Button(key_label(f"{self.yes} [y]"), id="yes", variant="warning" if not self.default else "primary")
                yield Button(key_label(f"{self.no} [n]"), id="no", variant="primary" if not self.default else "default")

    def on_mount(self) -> None:
        self.query_one("#yes" if self.default else "#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)

    def action_default(self) -> None:
        focused = self.focused
        self.dismiss(focused.id == "yes" if isinstance(focused, Button) else self.default)


class RetestDialog(ConfirmDialog):
    """Before a circular retest runs: what matched, what the earlier run said, the question."""

    def __init__(self, headline: str, points: list[str], earlier: str, question: str) -> None:
        body = Text()
        body.append(headline + "\n")
        for point in points:
            body.append("  • " + point + "\n")
        body.append("\n" + earlier + "\n", style="dim")
        body.append("\n" + question)
        super().__init__("⟲ Circular retest", body, default=False, yes="Run anyway", no="Don't run")
        self.add_class("-retest")


class RemedyDialog(KeysHelp, ModalScreen[str]):
    """The unified diff of a remedy, what it addresses; Apply / Revert / Cancel. The diff
    scrolls by keyboard while a button keeps the focus (↑ ↓ PgUp PgDn Home End), and by mouse."""

    BINDINGS = [
        Binding("a", "choose('apply')", "apply", id="remedy.apply"),
        Binding("v", "choose('revert')", "revert", id="remedy.revert"),
        Binding("escape", "choose('cancel')", "cancel", id="remedy.cancel"),
        Binding("up", "scroll_diff('up')", "diff up a line", key_display="↑"),
        Binding("down", "scroll_diff('down')", "diff down a line", key_display="↓"),
        Binding("pageup", "scroll_diff('page_up')", "diff up a page", key_display="PgUp"),
        Binding("pagedown", "scroll_diff('page_down')", "diff down a page", key_display="PgDn"),
        Binding("home", "scroll_diff('home')", "diff top", key_display="Home"),
        Binding("end", "scroll_diff('end')", "diff end", key_display="End"),
        KEYS,
        *ARROWS,
    ]

    def __init__(self, remedy: str, path: str, diff: str, notes: list[str], blocked: list[str], can_revert: bool) -> None:
        super().__init__(classes="dialog")
        self.remedy, self.path, self.diff = remedy, path, diff
        self.notes, self.blocked, self.can_revert = notes, blocked, can_revert

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="-wide"):
            yield Label(f"Remedy {self.remedy} · {self.path}", id="dialog-title")
            if self.notes:
                yield Static("\n".join(self.notes), id="dialog-notes")
            if self.blocked:
                yield Static(Text("Blocked — not applied:\n" + "\n".join(self.blocked), style="bold red"), id="dialog-blocked")
            with VerticalScroll(id="diff"):
                if self.diff:
                    yield Static(Syntax(self.diff, "diff", theme="ansi_dark", word_wrap=False), id="diff-text")
                else:
                    said = "It is applied (the file has it): Revert [v] puts the original bytes back." if self.can_revert \
                        else "No change: the file already has it."
                    yield Static(said, id="diff-text")
            if self.diff:
                yield Static("↑ ↓ PgUp PgDn Home End or the mouse: scroll the diff · ? every key", id="dialog-hint")
            with Horizontal(id="dialog-buttons"):
                if self.diff or not self.can_revert:  # applied already: Revert is what can be done
                    yield Button(key_label("Apply [a]"), id="apply", variant="success", disabled=bool(self.blocked) or not self.diff)
                if self.can_revert:
                    yield Button(key_label("Revert [v]"), id="revert", variant="warning")
                yield Button(key_label("Cancel [esc]"), id="cancel")

    def on_mount(self) -> None:
        first = next((b for b in self.query(Button) if not b.disabled), None)
        if first is not None:
            first.focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id or "cancel")

    def action_scroll_diff(self, how: str) -> None:
        diff = self.query_one("#diff", VerticalScroll)
        {"up": diff.scroll_up, "down": diff.scroll_down, "page_up": diff.scroll_page_up,
         "page_down": diff.scroll_page_down, "home": diff.scroll_home, "end": diff.scroll_end}[how](animate=False)

    def action_choose(self, what: str) -> None:
        if what == "apply" and (self.blocked or not self.diff):
            return
        if what == "revert" and not self.can_revert:
            return
        self.dismiss(what)


class AddDialog(KeysHelp, ModalScreen[dict[str, Any] | None]):
    """Add a symptom, a hypothesis, a note or a link: a short form.

    *submit* records what was typed and returns None, or ``(field, message)`` when it was
    refused: the dialog then stays open, keeps every field as typed and shows the message
    beside that field ("a", "b" or "c")."""

    BINDINGS = [Binding("escape", "cancel", "cancel", id="add.cancel"), KEYS, *ARROWS]
    KINDS = [("note", "note"), ("hypothesis", "hypothesis"), ("symptom", "symptom"), ("link", "link")]
    HINTS = {
        "note": ("text of the note", "about (a hypothesis id or #run, optional)", ""),
        "hypothesis": ("id, e.g. nccl-timeout", "title", "claim: what would be true"),
        "symptom": ("id, e.g. oom-at-step-40 (or a catalog id)", "title", "the error text"),
        "link": ("from hypothesis id", "kind: refines | competes | exposes | explains", "to (hypothesis or symptom id)"),
    }

    def __init__(self, about: str | None = None, submit: Any = None) -> None:
        super().__init__(classes="dialog")
        self.about = about
        self.submit = submit

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label("Add", id="dialog-title")
            yield Select(self.KINDS, value="note", allow_blank=False, id="add-kind")
            for field, value, hidden in (("a", "", False), ("b", self.about or "", False), ("c", "", True)):
                yield Input(placeholder=self.HINTS["note"]["abc".index(field)], value=value, id=f"add-{field}",
                            classes="-hidden" if hidden else "")
                yield Static("", id=f"add-{field}-error", classes="field-error -hidden")
            with Horizontal(id="dialog-buttons"):
                yield Button(key_label("Add [enter]"), id="add", variant="primary")
                yield Button(key_label("Cancel [esc]"), id="cancel")

    def on_mount(self) -> None:
        self.query_one("#add-a", Input).focus()

    def on_select_changed(self, event: Select.Changed) -> None:
        a, b, c = self.HINTS[str(event.value)]
        self.query_one("#add-a", Input).placeholder = a
        self.query_one("#add-b", Input).placeholder = b
        third = self.query_one("#add-c", Input)
        third.placeholder = c
        third.set_class(not c, "-hidden")
        self._show_error(None)

    def _values(self) -> dict[str, Any]:
        return {
            "kind": str(self.query_one("#add-kind", Select).value),
            "a": self.query_one("#add-a", Input).value.strip(),
            "b": self.query_one("#add-b", Input).value.strip(),
            "c": self.query_one("#add-c", Input).value.strip(),
        }

    def _show_error(self, refused: tuple[str, str] | None) -> None:
        for field in "abc":
            box = self.query_one(f"#add-{field}-error", Static)
            said = refused is not None and refused[0] == field
            box.update(Text(f"↑ {refused[1]}", style="bold red") if said and refused else "")
            box.set_class(not said, "-hidden")
            self.query_one(f"#add-{field}", Input).set_class(said, "-invalid")
        if refused is not None:
            self.query_one(f"#add-{refused[0]}", Input).focus()

    def _submit(self) -> None:
        values = self._values()
        refused = self.submit(values) if self.submit is not None else None
        if refused is not None:
            self._show_error(refused)  # stay open: what was typed is still there
            return
        self.dismiss(values)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "add":
            self._submit()
        else:
            self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class TargetDialog(KeysHelp, ModalScreen[str | None]):
    """Pick the target probes run on."""

    BINDINGS = [Binding("escape", "cancel", "cancel", id="target.cancel"), KEYS]

    def __init__(self, targets: list[tuple[str, str]], current: str) -> None:
        super().__init__(classes="dialog")
        self.targets, self.current = targets, current

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label("Target", id="dialog-title")
            yield OptionList(
                *[Option(Text.assemble((name, "bold"), "  ", (describe, "dim")), id=name) for name, describe in self.targets],
                id="targets",
            )

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        names = [n for n, _ in self.targets]
        options.highlighted = names.index(self.current) if self.current in names else 0
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)


class FleetMatrix(KeysHelp, ModalScreen[None]):
    """A fleet's comparison: members across, the fields that differ down, the odd values
    marked; who could not be reached below. Esc closes."""

    BINDINGS = [Binding("escape", "close", "close", id="fleet.close"), Binding("q", "close", "close", show=False), KEYS]

    def __init__(self, comparison: Any, how: str = "") -> None:
        super().__init__(classes="dialog")
        self.comparison = comparison
        self.how = how

    def compose(self) -> ComposeResult:
        c = self.comparison
        with Vertical(id="dialog", classes="-wide"):
            yield Label(f"Fleet {c.fleet} · {c.probe}" + (f" · {self.how}" if self.how else ""), id="dialog-title")
            yield Static(Text(c.headline(), style="bold"), id="dialog-notes")
            yield DataTable(id="matrix", zebra_stripes=True, cursor_type="row")
            if c.unreachable:
                yield Static(Text("\n".join(f"not reached: {m} — {why} (no evidence)" for m, why in c.unreachable.items()),
                                  style="magenta"), id="dialog-blocked")
            with Horizontal(id="dialog-buttons"):
                yield Button(key_label("Close [esc]"), id="close")

    def on_mount(self) -> None:
        c = self.comparison
        table = self.query_one(DataTable)
        members = list(c.runs)
        table.add_columns("field", *[f"{m} #{c.runs[m]}" for m in members])
        for spread in c.spreads:
            row = [Text(spread.name + (" ⚠" if spread.drift else ""), style="bold" if spread.drift else "")]
            for m in members:
                odd = m in spread.odd
                value = spread.odd[m] if odd else spread.majority
                if spread.name.startswith("state: "):
                    shown = "another" if odd else "same"
                else:
                    shown = "absent" if value is None else str(value)
                row.append(Text(shown, style="bold red" if odd else "dim"))
            table.add_row(*row)
        if not c.spreads:
            table.add_row(Text(f"every member the same on all {c.agreeing} fields", style="green"), *["" for _ in members])
        table.focus()

    def on_button_pressed(self, _event: Button.Pressed) -> None:
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)
