"""The `sleuth` command line: drives an investigation without the UI.

Every command takes ``--session PATH`` (default: the current investigation under
``.sleuth/``). Bad input — an unknown id, a malformed ``sleuth.toml`` or catalog file, a
corrupt session — is one line on stderr naming what and where, and exit status 2;
nothing already stored is touched.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .. import __version__
from ..hypotheses import STATUS_GLYPHS, EventKind, InvestigationState
from ..probes import TEMPLATE, load_config
from ..sessions import (
    ExchangeError,
    Investigation,
    Workspace,
    dump_export,
    import_session,
    run_cast,
    write_postmortem,
)
from .agent_cli import add_agent_commands
from .demo import add_demo_command
from .errors import HypothesisError, ProbesError, SessionError, UsageError
from .probe_cli import add_probe_commands
from .remedy_cli import add_remedy_commands
from .views import event_sentence

__all__ = ["main", "build_parser"]

EXIT_BAD_INPUT = 2
GLYPHS = STATUS_GLYPHS


def _out(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=False) + "\n")


# ---------------------------------------------------------------- commands


def cmd_init(args: argparse.Namespace) -> int:
    ws = Workspace(args.dir)
    ws.root.mkdir(parents=True, exist_ok=True)
    if ws.config_path.exists() and not args.force:
        load_config(ws.config_path)  # still tell the user if the existing one is broken
        print(f"{ws.config_path} exists; kept as it is")
    else:
        ws.config_path.write_text(TEMPLATE, encoding="utf-8")
        print(f"wrote {ws.config_path}")
    ws.user_hypotheses.mkdir(parents=True, exist_ok=True)
    if ws.current_path() is None or args.title:
        inv = ws.create(args.title or ws.root.name)
        print(f"started investigation {inv.path}")
        inv.close()
    else:
        print(f"current investigation: {ws.current_path()}")
    print(f"your own hypotheses go in {ws.user_hypotheses}/*.toml (schema: docs/catalog.md)")
    return 0


def cmd_new(args: argparse.Namespace) -> int:
    ws = Workspace.find()
    inv = ws.create(args.title)
    print(f"started investigation {inv.path}")
    inv.close()
    return 0


def _open(args: argparse.Namespace, create: bool = False) -> Investigation:
    ws = Workspace.find()
    load_config(ws.config_path)  # a broken sleuth.toml is reported before anything is written
    return ws.open(args.session, create=create)


def cmd_hypotheses(args: argparse.Namespace) -> int:
    with _open(args) as inv:
        tree = inv.hypotheses_json()
        if args.json:
            _out(tree)
            return 0

        def show(node: dict[str, Any], depth: int) -> None:
            ev = node["evidence"]
            links = " ".join(f"{link['kind']} {link['to']}" for link in node["links"] if link["kind"] != "refines")
            print(
                f"{'  ' * depth}{GLYPHS[node['status']]} {node['id']:<{24 - 2 * depth}} {node['status']:<12} "
                f"{ev['supports']}▲ {ev['refutes']}▼ {ev['inconclusive']}?  "
                f"probes: {', '.join(node['probes']) or '-'}  remedies: {', '.join(node['remedies']) or '-'}"
                + (f"  ({links})" if links else "")
            )
            for child in node["refinements"]:
                show(child, depth + 1)

        for node in tree:
            show(node, 0)
    return 0


def cmd_hypothesis_add(args: argparse.Namespace) -> int:
    links = [("refines", h) for h in args.refines] + [("competes", h) for h in args.competes]
    links += [("exposes", h) for h in args.exposes]
    with _open(args) as inv:
        inv.add_hypothesis(args.id, args.title or args.id, args.claim or "", args.explains, links)
        print(f"added hypothesis {args.id} to {inv.path}")
    return 0


def cmd_hypothesis_remove(args: argparse.Namespace) -> int:
    with _open(args) as inv:
        inv.remove_hypothesis(args.id)
        print(f"removed hypothesis {args.id} (recorded: replay shows it up to here)")
    return 0


def cmd_symptom_list(args: argparse.Namespace) -> int:
    with _open(args) as inv:
        st = inv.state
        if args.json:
            _out([{"id": s.id, "title": s.title, "text": s.text} for s in st.symptoms.values()])
            return 0
        if not st.symptoms:
            print("no symptoms yet: sleuth symptom add ID")
        for sym in st.symptoms.values():
            explained = [h for h, hyp in st.hypotheses.items() if sym.id in hyp.explains]
            print(f"{sym.id:<24} {sym.title}" + (f"  (explained by {', '.join(explained)})" if explained else ""))
    return 0


def cmd_symptom_remove(args: argparse.Namespace) -> int:
    with _open(args) as inv:
        inv.remove_symptom(args.id)
        print(f"removed symptom {args.id} (recorded: replay shows it up to here)")
    return 0


def cmd_symptom_add(args: argparse.Namespace) -> int:
    with _open(args) as inv:
        inv.add_symptom(args.id, args.title or "", args.text or "")
        print(f"added symptom {args.id}")
    return 0


def cmd_link(args: argparse.Namespace) -> int:
    with _open(args) as inv:
        inv.link(args.src, args.kind, args.dst)
        print(f"linked {args.src} {args.kind} {args.dst}")
    return 0


def cmd_note(args: argparse.Namespace) -> int:
    with _open(args) as inv:
        inv.add_note(" ".join(args.text), args.about)
        print("noted")
    return 0


def cmd_baseline(args: argparse.Namespace) -> int:
    with _open(args) as inv:
        inv.mark_baseline(_run_id(args.run))
        print(f"run #{_run_id(args.run)} is the baseline of its target")
    return 0


def _run_id(text: str) -> int:
    digits = text.lstrip("#")
    if not digits.isdigit():
        raise UsageError(f"{text!r} is not a run number (#N)")
    return int(digits)


def _ui_available() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()


def cmd_ui(args: argparse.Namespace) -> int:
    """`sleuth` / `sleuth open PATH`: the investigation screen."""
    from .tui import SleuthApp

    ws = Workspace.find()
    load_config(ws.config_path)  # a broken sleuth.toml is reported before the screen opens
    path = getattr(args, "path", None) or args.session
    if path is not None and Path(path).is_dir():
        path = _session_path(path)  # a directory: its newest investigation
    elif path is not None and not Path(path).is_file():
        raise UsageError(f"{path}: no such session file or directory")
    if not _ui_available():  # escape codes into a pipe help nobody
        raise UsageError("the UI needs a terminal (stdin and stdout are not one): open it in one with `sleuth`, "
                         "or use the commands: `sleuth status`, `sleuth hypotheses`, `sleuth events`, `sleuth --help`")
    SleuthApp.live(ws, path, target=getattr(args, "target", None) or "local").run()
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    path = _session_path(args.path or args.session)
    if not args.json and not args.text and _ui_available():
        from .tui import SleuthApp

        Investigation.replay(path, args.at).close()  # bad path or event number: exit 2 before the screen
        SleuthApp.replay(path, args.at).run()
        return 0
    with Investigation.replay(path, args.at) as inv:
        snap = inv.state.snapshot()
        snap["events_total"] = inv.store.event_count()
        if args.json:
            _out(snap)
            return 0
        print(f"{path} at event {snap['event']} of {snap['events_total']}: {snap['title']}")
        for h in snap["hypotheses"]:
            print(f"  {GLYPHS[h['status']]} {h['id']:<22} {h['status']}")
        for f in snap["flags"]:
            print(f"  ⚑ {f['kind']}: {f['message']}")
    return 0


def cmd_events(args: argparse.Namespace) -> int:
    path = _session_path(args.session)
    with Investigation.replay(path) as inv:
        events = list(inv.store.events())
        if args.json:
            _out([e.to_dict() for e in events])
            return 0
        t0 = events[0].ts if events else 0.0
        st = InvestigationState()
        for e in events:  # each in words, with the names the state has at that event
            st.apply(e)
            stamp = time.strftime("%H:%M:%S", time.gmtime(e.ts - t0))
            print(f"{e.seq:>5} +{stamp} {e.kind:<20} {event_sentence(e, st)}")
    return 0


def cmd_output(args: argparse.Namespace) -> int:
    """A run's stored output as plain text: every byte as the run wrote it, pipe-friendly."""
    path = _session_path(args.session)
    run = _run_id(args.run)
    pattern = None
    if args.grep is not None:
        try:
            pattern = re.compile(args.grep, re.IGNORECASE if args.ignore_case else 0)
        except re.error as exc:
            raise UsageError(f"--grep {args.grep!r}: not a regular expression ({exc})") from None
    with Investigation.replay(path) as inv:
        if run not in inv.state.runs:
            known = ", ".join(f"#{r}" for r in inv.state.runs) or "none yet"
            raise UsageError(f"no run #{run} in {path}; runs: {known}")
        store = inv.store
        summary = store.output_summary(run)
        total = summary["lines"][args.stream] if args.stream else sum(summary["lines"].values())
        out = sys.stdout
        matched = 0
        for start in range(0, total, 10_000):
            for ln in store.lines(run, start, 10_000, stream=args.stream):
                text = ln.text.rstrip("\n")
                if pattern is not None and not pattern.search(text):
                    continue
                matched += 1
                out.write((f"{ln.number + 1}:" if args.line_numbers else "") + text + "\n")
        out.flush()
    if pattern is not None and not matched:
        return 1  # as grep: nothing matched
    return 0


def _session_path(explicit: str | None) -> Path:
    """The session file *explicit* names (a file, or a directory: its newest investigation),
    else the current one."""
    return Workspace.find().resolve(explicit)


def cmd_export(args: argparse.Namespace) -> int:
    path = Workspace.find().resolve(args.session)
    out = args.output
    fmt = args.format or (
        "markdown" if out and out.endswith(".md") else "cast" if out and out.endswith(".cast") else "json"
    )
    if fmt == "cast" and args.run is None:
        raise UsageError("--format cast records one run: add --run N (`sleuth events` lists the runs)")
    if fmt != "cast" and args.run is not None:
        raise UsageError("--run goes with --format cast; json and markdown export the whole session")
    with Investigation.replay(path) as inv:
        if fmt == "markdown":
            if out in (None, "-"):
                sys.stdout.write(inv.to_markdown())
            else:
                written = write_postmortem(inv, out)
                print(
                    f"wrote {written} (full outputs in {written.with_name(written.stem + '-output')}/)", file=sys.stderr
                )
            return 0
        if fmt == "cast":
            try:
                text = run_cast(inv.store, inv.state, _run_number(str(args.run)))
            except ExchangeError as exc:
                raise UsageError(str(exc)) from None
        else:
            text = dump_export(inv.export_json())
    if out in (None, "-"):
        sys.stdout.write(text)
    else:
        Path(out).write_text(text, encoding="utf-8")
        print(f"wrote {out}", file=sys.stderr)
    return 0


def _run_number(text: str) -> int:
    digits = text.lstrip("#")
    if not digits.isdigit():
        raise UsageError(f"--run {text!r}: expected a run number such as 7 or #7")
    return int(digits)


def _title_of(doc: object) -> str | None:
    """The investigation's title in an export, if it has one (for the new file's name)."""
    events = doc.get("events") if isinstance(doc, dict) else None
    for e in events if isinstance(events, list) else []:
        if isinstance(e, dict) and e.get("kind") == EventKind.INVESTIGATION_CREATED and isinstance(e.get("data"), dict):
            return e["data"].get("title")
    return None


def cmd_import(args: argparse.Namespace) -> int:
    source = Path(args.file)
    try:
        doc = json.loads(source.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{source}: no such file") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{source}:{exc.lineno}:{exc.colno}: not JSON ({exc.msg})") from None
    ws = Workspace.find()
    if args.output:
        dest = Path(args.output)
        if dest.exists():
            raise UsageError(f"{dest}: already exists; choose another -o or remove it")
    else:
        title = _title_of(doc)
        dest = ws.new_path(f"imported {title or source.stem}")
    try:
        import_session(doc, dest, source=str(source))
    except ExchangeError as exc:
        raise UsageError(str(exc)) from None
    if dest.resolve().parent == ws.dir and not args.keep_current:
        ws.set_current(dest)
    print(f"imported {source} into {dest}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    with _open(args, create=False) as inv:
        st = inv.state
        print(f"{inv.path}: {st.title}")
        print(f"  {inv.store.event_count()} events, {len(st.runs)} runs, {len(st.flags)} flags")
        for h in st.hypotheses:
            print(f"  {GLYPHS[st.status(h)]} {h:<22} {st.status(h)}")
    return 0


# ---------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--session", metavar="PATH", help="session file (default: the current investigation in .sleuth/)"
    )
    parser = argparse.ArgumentParser(
        prog="sleuth",
        description="A debugging assistant for failures in remote GPU training: hypotheses, "
        "probes on the real target, every byte of output, circular-retest warnings, remedies, replay.",
    )
    parser.set_defaults(func=cmd_ui)
    parser.add_argument("--version", action="version", version=f"sleuth {__version__}")
    parser.add_argument("--session", metavar="PATH", help=argparse.SUPPRESS)
    parser.add_argument("--target", default="local", help="target of the investigation screen (default: local)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def add(
        name: str, func: Callable[[argparse.Namespace], int], help: str, parent: Any = sub
    ) -> argparse.ArgumentParser:
        p = parent.add_parser(name, help=help, description=help, parents=[common])
        p.set_defaults(func=func)
        return p

    p = add("init", cmd_init, "write a commented sleuth.toml and start an investigation here")
    p.add_argument("dir", nargs="?", default=".", help="directory (default: here)")
    p.add_argument("--title", help="title of the investigation")
    p.add_argument("--force", action="store_true", help="overwrite an existing sleuth.toml")

    p = add("new", cmd_new, "start a new investigation and make it current")
    p.add_argument("title", nargs="?", default="investigation")

    add("status", cmd_status, "the current investigation in a few lines")

    p = add("hypotheses", cmd_hypotheses, "list hypotheses with their derived status and evidence")
    p.add_argument("--json", action="store_true", help="print a JSON list")

    hyp = sub.add_parser("hypothesis", help="add or remove a hypothesis", description="add or remove a hypothesis")
    hyp_sub = hyp.add_subparsers(dest="action", metavar="ACTION")
    hyp_sub.required = True
    p = add("add", cmd_hypothesis_add, "add a hypothesis to the investigation", hyp_sub)
    p.add_argument("id")
    p.add_argument("--title")
    p.add_argument("--claim")
    p.add_argument("--explains", action="append", default=[], metavar="SYMPTOM")
    p.add_argument("--refines", action="append", default=[], metavar="HYPOTHESIS")
    p.add_argument("--competes", action="append", default=[], metavar="HYPOTHESIS")
    p.add_argument("--exposes", action="append", default=[], metavar="HYPOTHESIS")

    p = add("remove", cmd_hypothesis_remove, "take a hypothesis back (a typo, a wrong guess); recorded as an event", hyp_sub)
    p.add_argument("id")

    sym = sub.add_parser("symptom", help="record what was observed", description="record what was observed")
    sym_sub = sym.add_subparsers(dest="action", metavar="ACTION")
    sym_sub.required = True
    p = add("list", cmd_symptom_list, "the symptoms recorded, and what explains each", sym_sub)
    p.add_argument("--json", action="store_true")
    p = add("remove", cmd_symptom_remove, "take a symptom back; recorded as an event", sym_sub)
    p.add_argument("id")
    p = add("add", cmd_symptom_add, "add a symptom (a catalog id such as fx-trace-error fills in the text)", sym_sub)
    p.add_argument("id")
    p.add_argument("--title")
    p.add_argument("--text")

    p = add(
        "link", cmd_link, "link two hypotheses (refines, competes, exposes) or a hypothesis to a symptom (explains)"
    )
    p.add_argument("src", metavar="HYPOTHESIS")
    p.add_argument("kind", choices=["refines", "competes", "exposes", "explains"])
    p.add_argument("dst", metavar="TARGET")

    p = add("note", cmd_note, "add a note to the timeline")
    p.add_argument("text", nargs="+")
    p.add_argument("--about", metavar="ID", help="a hypothesis id or a run (#N)")

    p = add("baseline", cmd_baseline, "mark a completed run as the baseline of its target")
    p.add_argument("run", metavar="#N")

    p = add("open", cmd_ui, "open the investigation screen on a session file (plain `sleuth`: the current one)")
    p.add_argument("path", nargs="?", help="session file, or a directory: its newest investigation (default: current)")
    p.add_argument("--target", default="local", help="target probes run on (default: local)")

    p = add("replay", cmd_replay, "the investigation as it stood at event K (the replay screen at a terminal)")
    p.add_argument("path", nargs="?", help="session file, or a directory: its newest investigation (default: current)")
    p.add_argument("--at", type=int, metavar="K", help="fold events 1..K (default: all)")
    p.add_argument("--json", action="store_true", help="print the folded state as JSON")
    p.add_argument("--text", action="store_true", help="print a summary instead of opening the replay screen")

    p = add("events", cmd_events, "the event log, each event in words")
    p.add_argument("--json", action="store_true")

    p = add("output", cmd_output, "print a run's stored output as plain text (every byte; pipe it anywhere)")
    p.add_argument("run", metavar="RUN", help="the run number (7 or #7)")
    p.add_argument("--stream", choices=["stdout", "stderr"], help="one stream only (default: both, as they came)")
    p.add_argument("--grep", metavar="PAT", help="only lines matching this regular expression (exit 1 if none)")
    p.add_argument("-i", "--ignore-case", action="store_true", help="with --grep: ignore case")
    p.add_argument("-n", "--line-numbers", action="store_true", help="prefix each line with its number in the run")

    add_probe_commands(sub, add)
    add_agent_commands(sub, add)
    add_remedy_commands(sub, add)
    add_demo_command(sub, add)

    p = add("export", cmd_export, "export the session: json (all of it), markdown (the postmortem), cast (one run)")
    p.add_argument(
        "--format",
        choices=["json", "markdown", "cast"],
        help="json (default; `sleuth import` reads it), markdown (default for -o *.md), "
        "cast: one run as asciicast v3 (default for -o *.cast)",
    )
    p.add_argument("--run", metavar="N", help="the run to record (with --format cast)")
    p.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")

    p = add("import", cmd_import, "make a session file from a `sleuth export --format json` file")
    p.add_argument("file", metavar="FILE.json")
    p.add_argument("-o", "--output", metavar="SESSION", help="session file to write (default: a new one in .sleuth/)")
    p.add_argument("--keep-current", action="store_true", help="do not make the imported session current")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (UsageError, SessionError, ProbesError, HypothesisError) as exc:
        print(f"sleuth: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `sleuth … | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
