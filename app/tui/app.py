"""The Textual app: one investigation (live) or one session file (replay), the target, the
probe catalog, and the command-palette provider built from the current selection."""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from textual.app import App
from textual.command import Hit, Hits, Provider

from ...probes import Config, Runner, SshPool, Transport, builtin_probes, load_config
from ...probes.broker import BrokerClient
from ...sessions import Investigation, Store, Workspace
from .screens import InvestigationScreen, ReplayScreen

__all__ = ["SleuthApp", "SelectionCommands"]

CSS = Path(__file__).resolve().parents[1] / "sleuth.tcss"


class SelectionCommands(Provider):
    """What the tree's selection allows: run its probes, preview its remedies, and so on."""

    def _commands(self) -> list[tuple[str, str, Callable[[], object]]]:
        screen = self.screen
        if isinstance(screen, InvestigationScreen):
            return screen.selection_commands()
        return []

    async def discover(self) -> Hits:
        for name, help, callback in self._commands():
            yield Hit(1.0, name, callback, help=help)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, help, callback in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), partial(callback), help=help)


class SleuthApp(App):
    """``SleuthApp.live(workspace, path)`` or ``SleuthApp.replay(path)``."""

    CSS_PATH = str(CSS)
    TITLE = "sleuth"
    NOTIFICATION_TIMEOUT = 4  # seconds; errors say how long they stay (timeout=10)
    COMMANDS = App.COMMANDS | {SelectionCommands}

    def __init__(
        self,
        workspace: Workspace,
        inv: Investigation,
        config: Config,
        *,
        replay_at: int | None = None,
        replaying: bool = False,
        hint: str | None = None,
        clock: Callable[[], float] = time.time,
        target: str = "local",
        transport: Transport | None = None,
    ) -> None:
        super().__init__()
        self.workspace = workspace
        self.inv = inv
        self.config = config
        self.probes = builtin_probes()
        self.target = config.target(target)
        self.clock = clock
        inv.clock = clock  # what the UI records is stamped with the app's clock (fixed in tests)
        if not replaying:
            inv.store.author = "ui"  # its events say the UI wrote them (another process's say who they are)
        self.pool = SshPool()
        # runs go through the resident agents, unless a transport is given (the tests' fake)
        self.transport = transport
        # probes run through the resident agents the broker keeps between commands (the CLI's
        # too: one agent per target whoever asks)
        self.agents = BrokerClient(workspace.dir)
        self.runner: Runner = transport if transport is not None else self.agents
        self._replaying = replaying
        self._replay_at = replay_at
        self._hint = hint

    @classmethod
    def live(cls, workspace: Workspace, path: Path | str | None = None, **kw) -> SleuthApp:
        config = load_config(workspace.config_path)
        inv = workspace.open(path)
        return cls(workspace, inv, config, **kw)

    @classmethod
    def replay(cls, path: Path | str, at: int | None = None, workspace: Workspace | None = None, **kw) -> SleuthApp:
        workspace = workspace or Workspace(".")
        inv = Investigation.replay(path)
        return cls(workspace, inv, load_config(workspace.config_path), replaying=True, replay_at=at, **kw)

    def on_mount(self) -> None:
        if self._replaying:
            store: Store = self.inv.store
            self.push_screen(ReplayScreen(list(store.events()), self._replay_at, hint=self._hint))
        else:
            self.push_screen(InvestigationScreen(hint=self._hint))

    async def on_unmount(self) -> None:
        await self.agents.close()  # the broker keeps its agents for the next command
        await self.pool.close()  # this app's own ssh connections (state reads of fleets, remote files)
        self.inv.close()
