"""The commands on the investigation itself: init, hypotheses, symptoms, notes, the UI,
replay, events, output, export and import (the parser is app/cli.py's)."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from ..hypotheses import STATUS_GLYPHS, EventKind
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
from ..sessions.paging import matching_lines
from .errors import UsageError
from .timeline import narrated

GLYPHS = STATUS_GLYPHS


def _out(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=False) + "\n")


# ---------------------------------------------------------------- commands


def cmd_init(args: argparse.Namespace) -> int:
    ws = Workspace(args.dir)
    if ws.root.exists() and not ws.root.is_dir():
        raise UsageError(f"{ws.root}: is not a directory")
    if ws.dir.exists() and not ws.dir.is_dir():  # before anything is written
        raise UsageError(f"{ws.dir}: is a file; sleuth keeps its investigations in a folder of that name "
                         "(move the file away)")
    ws.root.mkdir(parents=True, exist_ok=True)
    ws.user_hypotheses.mkdir(parents=True, exist_ok=True)
    if ws.config_path.exists() and not args.force:
        load_config(ws.config_path)  # still tell the user if the existing one is broken
        print(f"{ws.config_path} exists; kept as it is")
    else:
        ws.config_path.write_text(TEMPLATE, encoding="utf-8")
        print(f"wrote {ws.config_path}")
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
        for e, said in narrated(events):
            stamp = time.strftime("%H:%M:%S", time.gmtime(e.ts - t0))
            by = f" by {e.author}" if e.author else ""
            print(f"{e.seq:>5} +{stamp} {e.kind:<20} {said}{by}")
    return 0


def cmd_output(args: argparse.Namespace) -> int:
    """A run's stored output as plain text: every byte as the run wrote it, pipe-friendly.

    A last line the run ended without a newline is written without one. Bytes that are not
    UTF-8 are shown with U+FFFD and said on stderr; ``--raw`` writes the stored bytes
    exactly (of one ``--stream``, or both as they came), nothing decoded."""
    path = _session_path(args.session)
    run = _run_id(args.run)
    raw = bool(getattr(args, "raw", False))
    if raw and (args.grep is not None or args.line_numbers):
        raise UsageError("--raw writes the stored bytes exactly: it takes no --grep or --line-numbers")
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
        if raw:
            for stream, _ts, data in store.output_chunks(run):
                if args.stream in (None, stream):
                    sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
            return 0
        out = sys.stdout
        matched = 0
        odd = 0
        owed = ""  # the newline a line without one is owed once another line follows it
        for ln in matching_lines(store, run, 0, args.stream, pattern):
            matched += 1
            odd += ln.raw is not None
            out.write(owed + (f"{ln.number + 1}:" if args.line_numbers else "") + ln.text.rstrip("\n"))
            owed = "\n"
            if ln.newline or pattern is not None or args.line_numbers:
                out.write("\n")
                owed = ""
        out.flush()
    if odd:
        print(f"sleuth output: {odd} line{'s' * (odd != 1)} not UTF-8 (shown with U+FFFD): "
              f"sleuth output {run} --raw writes the stored bytes exactly", file=sys.stderr)
    if pattern is not None and not matched:
        return 1  # as grep: nothing matched
    return 0


def _session_path(explicit: str | None) -> Path:
    """The session file *explicit* names (a file, or a directory: its newest investigation),
    else the current one."""
    return Workspace.find().resolve(explicit)


def _writable(out: str) -> Path:
    """Where -o writes: its folder must exist (sleuth makes no folder you did not name)."""
    path = Path(out)
    if path.is_dir():
        raise UsageError(f"-o {out}: is a directory; give a file name")
    if not path.parent.is_dir():
        raise UsageError(f"-o {out}: no such directory {path.parent}")
    return path


def _write_whole(path: Path, text: str) -> None:
    """Write *text* to a temporary file beside *path*, then rename it over: a failed write
    leaves nothing half-written."""
    tmp = path.with_name(f".{path.name}.sleuth-tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def cmd_export(args: argparse.Namespace) -> int:
    path = Workspace.find().resolve(args.session)
    out = args.output
    if out not in (None, "-"):
        _writable(out)
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
        _write_whole(Path(out), text)
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
    except IsADirectoryError:
        raise UsageError(f"{source}: is a directory; give a file written by `sleuth export --format json`") from None
    except OSError as exc:
        raise UsageError(f"{source}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{source}: not UTF-8 text (a `sleuth export --format json` file is)") from None
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
