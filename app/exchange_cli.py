"""Sessions in and out: `sleuth export` (json: all of it, markdown: the postmortem, cast: one
run; to stdout or a file written whole) and `sleuth import` (a session file from an export)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from ..hypotheses import EventKind
from ..sessions import (
    ExchangeError,
    Investigation,
    Workspace,
    dump_export,
    import_session,
    run_cast,
    write_postmortem,
)
from .errors import UsageError

__all__ = ["cmd_export", "cmd_import"]


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
