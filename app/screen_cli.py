"""The commands that open the investigation screen: `sleuth` / `sleuth open` (live), and
`sleuth replay` (the screen at event K at a terminal; its state as text or JSON otherwise)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..hypotheses import STATUS_GLYPHS
from ..probes import load_config
from ..sessions import Investigation, Workspace
from .errors import UsageError
from .session_args import print_json, session_path, ui_available

__all__ = ["cmd_replay", "cmd_ui"]


def cmd_ui(args: argparse.Namespace) -> int:
    """`sleuth` / `sleuth open PATH`: the investigation screen."""
    from .tui import SleuthApp

    ws = Workspace.find()
    load_config(ws.config_path)  # a broken sleuth.toml is reported before the screen opens
    path = getattr(args, "path", None) or args.session
    if path is not None and Path(path).is_dir():
        path = session_path(path)  # a directory: its newest investigation
    elif path is not None and not Path(path).is_file():
        raise UsageError(f"{path}: no such session file or directory")
    if not ui_available():  # escape codes into a pipe help nobody
        raise UsageError("the UI needs a terminal (stdin and stdout are not one): open it in one with `sleuth`, "
                         "or use the commands: `sleuth status`, `sleuth hypotheses`, `sleuth events`, `sleuth --help`")
    SleuthApp.live(ws, path, target=getattr(args, "target", None) or "local").run()
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    path = session_path(args.path or args.session)
    if not args.json and not args.text and ui_available():
        from .tui import SleuthApp

        Investigation.replay(path, args.at).close()  # bad path or event number: exit 2 before the screen
        SleuthApp.replay(path, args.at).run()
        return 0
    with Investigation.replay(path, args.at) as inv:
        snap = inv.state.snapshot()
        snap["events_total"] = inv.store.event_count()
        if args.json:
            print_json(snap)
            return 0
        print(f"{path} at event {snap['event']} of {snap['events_total']}: {snap['title']}")
        for h in snap["hypotheses"]:
            print(f"  {STATUS_GLYPHS[h['status']]} {h['id']:<22} {h['status']}")
        for f in snap["flags"]:
            print(f"  ⚑ {f['kind']}: {f['message']}")
    return 0
