"""The UI through Textual's Pilot: the terminal size the UI tests use, the tree's nodes, selecting one,
a widget's text, waiting until no worker is pending or running."""

from __future__ import annotations

from sleuth.app.tui import SleuthApp
from textual.app import App
from textual.widgets import Static, Tree

SIZE = (140, 48)


def tree_nodes(app: SleuthApp) -> list:
    tree = app.screen.query_one(Tree)
    out, stack = [], list(tree.root.children)
    while stack:
        node = stack.pop(0)
        out.append(node)
        stack[:0] = list(node.children)
    return out


def node_for(app: SleuthApp, kind: str, ident: str, hypothesis: str | None = None):
    for node in tree_nodes(app):
        sel = node.data
        if sel is not None and sel.kind == kind and sel.id == ident and (hypothesis is None or sel.hypothesis == hypothesis):
            return node
    raise AssertionError(f"no {kind} {ident} in the tree")


async def select(pilot, kind: str, ident: str, hypothesis: str | None = None) -> None:
    app = pilot.app
    node = node_for(app, kind, ident, hypothesis)
    node.parent.expand() if node.parent is not None else None
    await pilot.pause()
    tree = app.screen.query_one(Tree)
    tree.move_cursor(node_for(app, kind, ident, hypothesis))
    await pilot.pause()


def text_of(app: SleuthApp, selector: str) -> str:
    return str(app.screen.query_one(selector, Static).render())


async def settle(pilot, timeout: float = 120.0) -> None:
    """Until no worker (a run, the fold scan, a search) is pending or running."""
    import time

    from textual.worker import WorkerState

    end = time.monotonic() + timeout
    while any(w.state in (WorkerState.PENDING, WorkerState.RUNNING) for w in pilot.app.workers):
        assert time.monotonic() < end, "workers still running"
        await pilot.pause(0.05)
    await pilot.pause()


def record_notifications(app: App) -> list[str]:
    """What *app* notifies from now on (App.notify's message), in order: the list fills as the
    app, its screens and widgets call notify."""
    said: list[str] = []
    notify = app.notify

    def recording(message, *args, **kwargs):
        said.append(str(message))
        return notify(message, *args, **kwargs)

    app.notify = recording
    return said
