"""`sleuth mcp`: the investigation as tools a coding agent calls (Model Context Protocol).

The same investigation the CLI and the UI use (found as the CLI finds it: ``.sleuth/`` here
or above, or ``--session``), through the official SDK (``mcp``, extra ``sleuth[mcp]``): on
stdio, how agent clients start a tool server, or on streamable HTTP bound to loopback with a
bearer token (:func:`serve_http`).

Every tool answers one JSON object. What an agent needs and a shell tool never gave it:

* ``probe_run`` takes ``params`` as an object (never a string to quote) and a ``shell``
  command that sleuth sends on the interpreter's stdin, never re-quoted per hop; it answers
  the run's classification, verdicts, flags, findings and records, and a bounded excerpt of
  the output (app/excerpt.py) that says how many lines it left out and how to read them.
* a circular retest is **refused**, the earlier run's answer in the refusal; ``force`` needs
  a ``reason``, recorded with the run; an oscillating state is flagged in the answer.
* every answer says the state it speaks of (``state``: the target's last known state, the
  event it was read at) and the session's event count.
* every event says who wrote it: ``mcp:<client name>`` (the client's own name from its
  handshake, or from each request's envelope in the 2026-07-28 revision), beside the UI's
  and the CLI's.

Tool errors (an unknown id, a refused argument, a target not reached) come back as MCP tool
errors whose text is the one line the CLI would print; nothing is written by a refused call.

The package: tools.py (what every tool shares: the server, declaring a tool, one-line
refusals), one module per family of tools (runs.py, investigation.py, remedies.py), answers.py
(the typed answers and the text block a model reads), http.py (the loopback HTTP server and its
token). A new tool goes in its family's module and its list ``TOOLS``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from ... import __version__
from ...probes import load_config
from ...sessions import Workspace
from ..errors import ProbesError, SessionError, UsageError
from . import investigation, remedies, runs
from .answers import RECORDS_BUDGET, bounded_records
from .http import serve_http, token_for
from .tools import MCPServer, Sleuth, _Server, add_tools

__all__ = ["RECORDS_BUDGET", "bounded_records", "build_server", "cmd_mcp", "serve_http"]

INSTRUCTIONS = """\
sleuth keeps the hypotheses of a failure hunt on remote GPU training, runs checks on the real
target (ssh, jump hosts, containers), keeps every byte of their output, and says what each
result means for each hypothesis in the state the target was in.
Start with `status` (it suggests the next step). Run checks with `probe_run` (a built-in
`probe`, a `script` path or a `shell` command; `params` as an object). Its answer holds a
bounded excerpt of the output; read the rest with `run_output` (line ranges, grep).
A check repeated in the same state is refused with the earlier answer: change something
first, or pass force=true with a reason. Record what you see with `symptom_add` and `note`.
"""


def build_server(workspace: Workspace | None = None, *, session: str | None = None, no_agent: bool = False) -> MCPServer:
    """The MCP server over *workspace*'s investigation (default: the one found from here)."""
    sl = Sleuth(workspace or Workspace.find(), session, no_agent)
    server = _Server("sleuth", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")
    add_tools(server, sl, [*runs.TOOLS, *investigation.TOOLS, *remedies.TOOLS])
    return server


def cmd_mcp(args: argparse.Namespace) -> int:
    """`sleuth mcp`: serve the current investigation to an MCP client."""
    from ...sessions.store import set_author

    if args.project is not None and not Path(args.project).is_dir():
        raise UsageError(f"--project {args.project}: no such directory")
    ws = Workspace.find(args.project or ".")
    if args.project is not None:
        os.chdir(ws.root)  # as if started there: relative paths of sleuth.toml and of probes are the project's
    try:
        load_config(ws.config_path)  # a broken sleuth.toml: exit 2 before the client connects
        ws.resolve(args.session)  # no investigation: said now, not at the first call
    except (ProbesError, SessionError) as exc:
        raise UsageError(str(exc)) from None
    set_author("mcp")  # each call names its client; this covers anything else the server writes
    server = build_server(ws, session=args.session, no_agent=args.no_agent)
    if not args.http:
        asyncio.run(server.run_stdio_async())
        return 0
    token, path = token_for(ws)
    where = f"the token is in {path} (mode 0600)" if path else "the token is SLEUTH_MCP_TOKEN's"
    print(f"sleuth mcp: http://{args.host}:{args.port}/mcp (Authorization: Bearer <token>; {where})", file=sys.stderr)
    asyncio.run(serve_http(server, args.host, args.port, token))
    return 0
