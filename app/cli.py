"""The `sleuth` command line: the parser and the dispatch.

Every command takes ``--session PATH`` (default: the current investigation under
``.sleuth/``). Bad input — an unknown id, a malformed ``sleuth.toml`` or catalog file, a
corrupt session — is one line on stderr naming what and where, and exit status 2;
nothing already stored is touched. A target, agent or broker that cannot be reached
(probes.ReachError) is one line too, and exit status 1, as a run whose transport failed.

This module imports nothing but the standard library's argparse: each command names its
handler as ``"module:function"`` (app/session_cli.py, screen_cli.py, log_cli.py, exchange_cli.py,
known_cli.py, probe_cli.py, remedy_cli.py, agent_cli.py, demo.py, mcp_server), imported only when that command runs, so ``sleuth --version`` and
``--help`` start in the time of Python itself (bench/probe_latency.py, version_vs_python).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

from .. import __version__

__all__ = ["EXIT_CODES", "build_parser", "main"]

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_RETEST = 0, 1, 2, 3
EXIT_CODES = {
    EXIT_OK: "done (a run: it completed)",
    EXIT_FAILED: "a run did not complete (failed, killed, timed out, transport, no result), a target or the broker "
                 "not reached, or --grep found nothing",
    EXIT_BAD_INPUT: "bad input: an unknown id, a malformed sleuth.toml or session, a path that cannot be used",
    EXIT_RETEST: "refused: a circular retest (the same check in the same state); --force runs it",
    130: "interrupted (Ctrl-C)",
}
# the remedies' ids (probes/remedies REMEDIES; tests/integration/test_cli.py holds the two together)
REMEDY_NAMES = ("lock", "precompile")


def _epilog() -> str:
    return "exit status:\n" + "\n".join(f"  {code:<4} {what}" for code, what in EXIT_CODES.items())


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--session", metavar="PATH", help="session file (default: the current investigation in .sleuth/)"
    )
    parser = argparse.ArgumentParser(
        prog="sleuth",
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="A debugging assistant for failures in remote GPU training: hypotheses, "
        "probes on the real target, every byte of output, circular-retest warnings, remedies, replay.",
    )
    parser.set_defaults(func="screen_cli:cmd_ui")
    parser.add_argument("--version", action="version", version=f"sleuth {__version__}")
    parser.add_argument("--session", metavar="PATH", help=argparse.SUPPRESS)
    parser.add_argument("--target", default="local", help="target of the investigation screen (default: local)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def add(
        name: str, func: str, help: str, parent: Any = sub
    ) -> argparse.ArgumentParser:
        p = parent.add_parser(name, help=help, description=help, parents=[common])
        p.set_defaults(func=func)
        return p

    _start_commands(add)
    _known_commands(add)
    _graph_commands(sub, add)
    _log_commands(add)
    _probe_commands(sub, add)
    _agent_commands(sub, add)
    _remedy_commands(sub, add)
    _demo_command(sub, add)
    _mcp_command(add)
    _exchange_commands(add)
    return parser


def _start_commands(add: Any) -> None:
    """init, new, status: a project and its investigations."""
    p = add("init", "session_cli:cmd_init", "write a commented sleuth.toml and start an investigation here")
    p.add_argument("dir", nargs="?", default=".", help="directory (default: here)")
    p.add_argument("--title", help="title of the investigation")
    p.add_argument("--force", action="store_true", help="overwrite an existing sleuth.toml")

    p = add("new", "session_cli:cmd_new", "start a new investigation and make it current")
    p.add_argument("title", nargs="?", default="investigation")

    add("status", "session_cli:cmd_status", "the current investigation in a few lines")


def _known_commands(add: Any) -> None:
    """known, upgrade: upstream's issues for a target's versions, and their fixed releases tried."""
    p = add("known", "known_cli:cmd_known", "known upstream issues that apply to a target's measured versions")
    p.add_argument("--target", default="local", help="whose versions are read now (default: local)")
    p.add_argument("--all", action="store_true", help="the whole catalog, shipped and yours (.sleuth/known/*.toml)")
    p.add_argument("--json", action="store_true")

    p = add("upgrade", "known_cli:cmd_upgrade",
            "try a known issue's fixed release in an overlay at the target (your environment untouched), "
            "then re-run the check that showed the issue to verify; --revert removes the overlay")
    p.add_argument("issue", metavar="ISSUE", help="a known issue's id, e.g. pytorch#126024 (sleuth known --all)")
    p.add_argument("--target", default="local")
    p.add_argument("--version", help="the version to try (default: the issue's fixed_in)")
    p.add_argument("--no-deps", action="store_true", help="install only the package into the overlay, not what it needs")
    p.add_argument("--index-url", metavar="URL", help="the package index pip reads at the target")
    p.add_argument("--find-links", metavar="DIR_OR_URL", action="append", help="where pip also looks (repeatable)")
    p.add_argument("--no-index", action="store_true", help="only --find-links, no index")
    p.add_argument("--probe", help="the check to verify with (default: the latest run on the target that showed the issue)")
    p.add_argument("--script", metavar="FILE", help="verify with this script (as probe run --script)")
    p.add_argument("--param", action="append", default=[], metavar="K=V", help="a parameter of the verifying check")
    p.add_argument("--no-verify", action="store_true", help="make the overlay only")
    p.add_argument("--revert", action="store_true", help="remove the overlay (the revert)")
    p.add_argument("--json", action="store_true")


def _graph_commands(sub: Any, add: Any) -> None:
    """The hypothesis graph: hypotheses, hypothesis, symptom, link, note, baseline."""
    p = add("hypotheses", "session_cli:cmd_hypotheses", "list hypotheses with their derived status and evidence")
    p.add_argument("--json", action="store_true", help="print a JSON list")

    hyp = sub.add_parser("hypothesis", help="add or remove a hypothesis", description="add or remove a hypothesis")
    hyp_sub = hyp.add_subparsers(dest="action", metavar="ACTION")
    hyp_sub.required = True
    p = add("add", "session_cli:cmd_hypothesis_add", "add a hypothesis to the investigation", hyp_sub)
    p.add_argument("id")
    p.add_argument("--title")
    p.add_argument("--claim")
    p.add_argument("--explains", action="append", default=[], metavar="SYMPTOM")
    p.add_argument("--refines", action="append", default=[], metavar="HYPOTHESIS")
    p.add_argument("--competes", action="append", default=[], metavar="HYPOTHESIS")
    p.add_argument("--exposes", action="append", default=[], metavar="HYPOTHESIS")

    p = add("remove", "session_cli:cmd_hypothesis_remove", "take a hypothesis back (a typo, a wrong guess); recorded as an event", hyp_sub)
    p.add_argument("id")

    sym = sub.add_parser("symptom", help="record what was observed", description="record what was observed")
    sym_sub = sym.add_subparsers(dest="action", metavar="ACTION")
    sym_sub.required = True
    p = add("list", "session_cli:cmd_symptom_list", "the symptoms recorded, and what explains each", sym_sub)
    p.add_argument("--json", action="store_true")
    p = add("remove", "session_cli:cmd_symptom_remove", "take a symptom back; recorded as an event", sym_sub)
    p.add_argument("id")
    p = add("add", "session_cli:cmd_symptom_add", "add a symptom (a catalog id such as fx-trace-error fills in the text)", sym_sub)
    p.add_argument("id")
    p.add_argument("--title")
    p.add_argument("--text")

    p = add("link", "session_cli:cmd_link", "link two hypotheses (refines, competes, exposes) or a hypothesis to a symptom (explains)"
    )
    p.add_argument("src", metavar="HYPOTHESIS")
    p.add_argument("kind", choices=["refines", "competes", "exposes", "explains"])
    p.add_argument("dst", metavar="TARGET")

    p = add("note", "session_cli:cmd_note", "add a note to the timeline")
    p.add_argument("text", nargs="+")
    p.add_argument("--about", metavar="ID", help="a hypothesis id or a run (#N)")

    p = add("baseline", "session_cli:cmd_baseline", "mark a completed run as the baseline of its target")
    p.add_argument("run", metavar="#N")


def _log_commands(add: Any) -> None:
    """open, replay, events, output: the investigation read back."""
    p = add("open", "screen_cli:cmd_ui", "open the investigation screen on a session file (plain `sleuth`: the current one)")
    p.add_argument("path", nargs="?", help="session file, or a directory: its newest investigation (default: current)")
    p.add_argument("--target", default="local", help="target probes run on (default: local)")

    p = add("replay", "screen_cli:cmd_replay", "the investigation as it stood at event K (the replay screen at a terminal)")
    p.add_argument("path", nargs="?", help="session file, or a directory: its newest investigation (default: current)")
    p.add_argument("--at", type=int, metavar="K", help="fold events 1..K (default: all)")
    p.add_argument("--json", action="store_true", help="print the folded state as JSON")
    p.add_argument("--text", action="store_true", help="print a summary instead of opening the replay screen")

    p = add("events", "log_cli:cmd_events", "the event log, each event in words")
    p.add_argument("--json", action="store_true")

    p = add("output", "log_cli:cmd_output", "print a run's stored output as plain text (every byte; pipe it anywhere)")
    p.add_argument("run", metavar="RUN", help="the run number (7 or #7)")
    p.add_argument("--stream", choices=["stdout", "stderr"], help="one stream only (default: both, as they came)")
    p.add_argument("--grep", metavar="PAT", help="only lines matching this regular expression (exit 1 if none)")
    p.add_argument("-i", "--ignore-case", action="store_true", help="with --grep: ignore case")
    p.add_argument("-n", "--line-numbers", action="store_true", help="prefix each line with its number in the run")
    p.add_argument("--raw", action="store_true", help="write the stored bytes exactly, as the command printed them (no --grep or -n)")


def _mcp_command(add: Any) -> None:
    """mcp: the investigation served to a coding agent."""
    p = add("mcp", "mcp_server:cmd_mcp",
            "serve this investigation to a coding agent (Model Context Protocol): stdio, or --http on loopback "
            "with a token (needs sleuth[mcp])")
    p.add_argument("--http", action="store_true", help="streamable HTTP at http://HOST:PORT/mcp instead of stdio")
    p.add_argument("--host", default="127.0.0.1", help="with --http: loopback only (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="with --http (default 8765)")
    p.add_argument("--no-agent", action="store_true", help="runs in sessions of their own, not the broker's resident agents")
    p.add_argument("--project", metavar="DIR", help="the project (sleuth.toml, .sleuth/); default: found from here")


def _exchange_commands(add: Any) -> None:
    """export, import: a session out and back in."""
    p = add("export", "exchange_cli:cmd_export", "export the session: json (all of it), markdown (the postmortem), cast (one run)")
    p.add_argument(
        "--format",
        choices=["json", "markdown", "cast"],
        help="json (default; `sleuth import` reads it), markdown (default for -o *.md), "
        "cast: one run as asciicast v3 (default for -o *.cast)",
    )
    p.add_argument("--run", metavar="N", help="the run to record (with --format cast)")
    p.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")

    p = add("import", "exchange_cli:cmd_import", "make a session file from a `sleuth export --format json` file")
    p.add_argument("file", metavar="FILE.json")
    p.add_argument("-o", "--output", metavar="SESSION", help="session file to write (default: a new one in .sleuth/)")
    p.add_argument("--keep-current", action="store_true", help="do not make the imported session current")


def _probe_commands(sub: Any, add: Any) -> None:
    probe = sub.add_parser("probe", help="list and run probes", description="list and run probes")
    probe_sub = probe.add_subparsers(dest="action", metavar="ACTION")
    probe_sub.required = True
    p = add("list", "probe_cli:cmd_probe_list", "the built-in probes and what they test", probe_sub)
    p.add_argument("--json", action="store_true")
    p = add("run", "probe_cli:cmd_probe_run", "run a probe on a target and record it", probe_sub)
    p.add_argument("id", nargs="?", help="a built-in probe id (sleuth probe list)")
    p.add_argument("--script", metavar="FILE", help="your own Python probe (same protocol: emit(), params)")
    p.add_argument("--shell", metavar="CMD", help="a shell command, run as bash -c CMD at the far end")
    p.add_argument("--hook", action="store_true",
                   help="with --shell: every Python process the command starts can dump its stacks to sleuth "
                        "without ptrace (faulthandler on SIGUSR2; the stacks probe uses it)")
    p.add_argument("--sample", action="store_true",
                   help="with --shell: the command is one sample of a flaky failure; its runs in the same state pool "
                        "as trials (how many failed of how many), never refused as circular retests")
    p.add_argument("--poll", action="store_true",
                   help="with --shell: the command is meant to repeat (nvidia-smi, the tail of a log); said once, "
                        "its repeats on this target are never refused as circular retests")
    p.add_argument("--target", default="local", help="target name from sleuth.toml (default: local)")
    p.add_argument("--no-agent", action="store_true",
                   help="run in a session of its own, not through the resident agent the broker keeps between commands")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE", help="probe parameter (JSON value or text)")
    p.add_argument("--timeout", type=float, help="seconds before the run is killed")
    p.add_argument("--force", action="store_true", help="run even if it is a circular retest")
    p.add_argument("--reason", metavar="WHY", help="with --force: why it is run again (kept with the run and its flag)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--quiet", action="store_true", help="do not echo the output live")

    target = sub.add_parser("target", help="show and check targets", description="show and check targets")
    target_sub = target.add_subparsers(dest="action", metavar="ACTION")
    target_sub.required = True
    p = add("show", "probe_cli:cmd_target_show", "print exactly what each hop of a target receives", target_sub)
    p.add_argument("name")
    p.add_argument("--probe", metavar="ID")
    p.add_argument("--shell", metavar="CMD")
    p = add("check", "probe_cli:cmd_target_check", "round-trip argv and environment through every hop", target_sub)
    p.add_argument("name")
    p.add_argument("--json", action="store_true")


def _agent_commands(sub: Any, add: Any) -> None:
    agent = sub.add_parser("agent", help="the agents kept between commands (status, stop)",
                           description="the broker that keeps one resident agent per target between commands")
    agent_sub = agent.add_subparsers(dest="action", metavar="ACTION")
    agent_sub.required = True
    p = add("status", "agent_cli:cmd_agent_status", "the broker and the agents it holds", agent_sub)
    p.add_argument("--json", action="store_true")
    add("stop", "agent_cli:cmd_agent_stop", "close every agent (and the processes at the far end) and stop the broker", agent_sub)
    p = add("serve", "agent_cli:cmd_agent_serve", "run the broker (sleuth starts it by itself when a command needs it)", agent_sub)
    p.add_argument("--socket", help="the Unix socket to listen on (default: the investigation's)")
    p.add_argument("--idle", type=float, metavar="SECONDS",
                   help="stop after this many seconds without a request (default: SLEUTH_AGENT_IDLE, else 600)")


def _remedy_commands(sub: Any, add: Any) -> None:
    remedy = sub.add_parser("remedy", help="preview, apply and revert code remedies", description="preview, apply and revert code remedies")
    rsub = remedy.add_subparsers(dest="action", metavar="ACTION")
    rsub.required = True
    add("list", "remedy_cli:cmd_list", "the remedies and the hypotheses they address", rsub)
    for name, func, words in (
        ("preview", "remedy_cli:cmd_preview", "show the diff a remedy would make"),
        ("apply", "remedy_cli:cmd_apply", "apply a remedy to a file (atomic, recorded)"),
    ):
        p = add(name, func, words, rsub)
        p.add_argument("name", metavar="REMEDY", help=f"{' or '.join(REMEDY_NAMES)} (sleuth remedy list)")
        p.add_argument("path", nargs="?", help="a file, or a directory: every module under it (default: the target's code tree)")
        p.add_argument("--target", default="local")
        p.add_argument("--shapes", metavar="JSON", help="precompile: shapes file (default: the latest fx-trace-state run)")
        if name == "preview":
            p.add_argument("--json", action="store_true")
        else:
            p.add_argument("--hypothesis", help="the hypothesis it addresses (default: the remedy's own)")
            p.add_argument("--into-installed-package", action="store_true",
                           help="also change a file of an installed package (site-packages): refused without it")
    p = add("revert", "remedy_cli:cmd_revert", "restore the exact original bytes of a remedied file", rsub)
    p.add_argument("path", nargs="?", help="a file, or a directory (default: the target's code tree)")
    p.add_argument("--target", default="local", help="a remote target: PATH is on it (relative to its code.remote)")


def _demo_command(sub: Any, add: Any) -> None:
    p = add("demo", "demo:cmd_demo", "the whole investigation on the bundled example drafter, here, no server needed")
    p.add_argument("dir", nargs="?", default="sleuth-demo", help="where (default: ./sleuth-demo)")
    p.add_argument("--auto", action="store_true", help="run it headless and write the postmortem")
    p.add_argument("--force", action="store_true", help="use a non-empty directory (never overwriting a file sleuth did not write)")


_PARSER: list[argparse.ArgumentParser] = []


def _parser() -> argparse.ArgumentParser:
    """One parser per process (parsing does not change it): a child forked from the broker
    finds it built."""
    if not _PARSER:
        _PARSER.append(build_parser())
    return _PARSER[0]


def main(argv: Sequence[str] | None = None, *, here: bool = False) -> int:
    """Run one command. A later command of a project whose agent broker runs is handed to it
    (app/quick.py: run in a child forked from the broker, with sleuth imported already) unless
    *here*, or `--help`/`--version` are asked for."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if not here and not {"-h", "--help", "--version"} & set(args_list):
        from .quick import try_broker

        served = try_broker(args_list)
        if served is not None:
            return served
    args = _parser().parse_args(args_list)
    module, _, name = args.func.partition(":")
    from ..sessions.store import author_as

    try:
        # who this command's events say wrote them (the UI says "ui" itself; `sleuth mcp`, the client's name)
        with author_as("cli"):
            handler = getattr(importlib.import_module(f".{module}", __package__), name)
            return int(handler(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `sleuth … | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 0
    except Exception as exc:
        # the four roots (app/errors.py); imported here, where the raising module loaded them already
        from .errors import HypothesisError, ProbesError, ReachError, SessionError, UsageError

        if isinstance(exc, ReachError):  # the target, its agent or the broker not reached: not bad input
            print(f"sleuth: error: {exc}", file=sys.stderr)
            return EXIT_FAILED
        if isinstance(exc, (UsageError, SessionError, ProbesError, HypothesisError)):
            print(f"sleuth: error: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
        if isinstance(exc, OSError) and exc.filename is not None:  # a path this machine refused
            where = f"{exc.filename}" + (f" -> {exc.filename2}" if exc.filename2 else "")
            print(f"sleuth: error: {where}: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
        raise


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
