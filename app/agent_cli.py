"""`sleuth agent serve|status|stop`: the broker that keeps one resident agent per target
between commands (see probes/broker.py)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from pathlib import Path

from ..probes import load_config
from ..probes.broker import DEFAULT_IDLE_S, BrokerClient, BrokerError, broker_socket
from ..probes.broker_server import serve
from ..sessions import Workspace
from .quick import code_digest

__all__ = ["cmd_agent_serve", "cmd_agent_status", "cmd_agent_stop"]


def _command(argv: list[str]) -> int:
    """A command a client handed to the broker (app/quick.py), in a child forked from it."""
    from .cli import main

    return main(argv, here=True)


def _preload() -> None:
    """What the commands the broker serves import, imported once here: a forked child starts
    with it (that is the point of serving them)."""
    from ..probes import builtin_probes
    from . import probe_cli, remedy_cli, session_cli  # noqa: F401
    from .cli import _parser

    _parser()
    builtin_probes()
    try:
        ws = Workspace.find()
        ws.catalog()  # the project's catalog and sleuth.toml, parsed once here
        load_config(ws.config_path)
    except Exception:  # noqa: BLE001 - a broken file is said by the command that reads it
        pass


def cmd_agent_serve(args: argparse.Namespace) -> int:
    _preload()
    path = Path(args.socket) if args.socket else broker_socket(Workspace.find().dir)
    for sig in (signal.SIGTERM, signal.SIGHUP):  # a polite kill closes the agents too
        signal.signal(sig, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        idle = args.idle if args.idle is not None else float(os.environ.get("SLEUTH_AGENT_IDLE", DEFAULT_IDLE_S))
        asyncio.run(serve(path, idle, commands=_command, digest=code_digest()))
    except KeyboardInterrupt:
        pass
    return 0


def cmd_agent_status(args: argparse.Namespace) -> int:
    client = BrokerClient(Workspace.find().dir, start=False)
    try:
        status = asyncio.run(client.ask("status"))
    except BrokerError as exc:
        if exc.untrusted:  # something listens there that is not this user's broker: said, not hidden
            print(f"sleuth: {exc}; commands here run without a broker", file=sys.stderr)
            return 1
        print(json.dumps({"running": False}) if args.json else f"no agent broker for {client.sleuth_dir} (none runs)")
        return 0
    except OSError:
        print(json.dumps({"running": False}) if args.json else f"no agent broker for {client.sleuth_dir} (none runs)")
        return 0
    if args.json:
        print(json.dumps({"running": True, **status}, indent=2))
        return 0
    print(f"agent broker pid {status['pid']} · {status['socket']} · up {status['up_s']:.0f} s · {status['runs']} runs"
          f" · stops after {status['idle_s']:.0f} s idle (idle {status['idle_for_s']:.0f} s)")
    for a in status["agents"]:
        state = "dead" if a["dead"] else "busy" if a["busy"] else "idle"
        print(f"  {a['target']:<24} agent pid {a['pid']} (at the far end) · {state} · version {a['version']}")
    for target, why in status.get("unavailable", {}).items():
        print(f"  {target:<24} no agent: {why}")
    if not status["agents"]:
        print("  no agents yet")
    return 0


def cmd_agent_stop(args: argparse.Namespace) -> int:
    client = BrokerClient(Workspace.find().dir, start=False)
    try:
        said = asyncio.run(client.ask("stop"))
    except BrokerError as exc:
        if exc.untrusted:
            print(f"sleuth: {exc}; nothing stopped", file=sys.stderr)
            return 1
        print("no agent broker runs here")
        return 0
    except OSError:
        print("no agent broker runs here")
        return 0
    print(f"agent broker stopping: {said.get('agents', 0)} agent(s) closed, their processes ended")
    return 0
