"""Session exchange formats: the whole session as JSON (exported and imported again,
byte-for-byte the same on a second export), and one run as an asciicast v3 recording.

JSON (``format: "sleuth-session"``, ``schema: 2``)::

    {"events":  [{"seq", "ts", "kind", "data"}, ...],
     "outputs": {"RUN": {"complete": bool,
                         "chunks": [[stream, ts, base64 bytes], ...]}}}

Chunks are kept exactly as the store holds them, so an import rebuilds the same line index
and a second export is identical. Everything was redacted on the way into the store; an
import redacts again (a hand-edited file gets no secret in either).

Exceptions:
    ExchangeError   the JSON is not a sleuth session export, or is inconsistent; the
                    message says what and where (the path inside the document)
"""

from __future__ import annotations

import base64
import binascii
import codecs
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..hypotheses import Event, EventKind, InvestigationState
from .errors import ExchangeError
from .output_index import STREAMS
from .redact import Redactor
from .store import SCHEMA_VERSION, Store

__all__ = ["ExchangeError", "export_session", "import_session", "run_cast", "dump_export"]

FORMAT = "sleuth-session"


def export_session(store: Store, upto: int | None = None) -> dict[str, Any]:
    """Events (up to *upto*) and every run's captured output, as stored."""
    events = list(store.events(upto))
    runs = sorted({int(e.data["run"]) for e in events if e.kind == EventKind.RUN_STARTED})
    outputs: dict[str, Any] = {}
    for run in runs:
        chunks = [[stream, ts, base64.b64encode(data).decode("ascii")] for stream, ts, data in store.output_chunks(run)]
        summary = store.output_summary(run)
        if chunks or summary["complete"]:
            outputs[str(run)] = {"complete": summary["complete"], "chunks": chunks}
    return {
        "format": FORMAT,
        "schema": SCHEMA_VERSION,
        "events": [e.to_dict() for e in events],
        "outputs": outputs,
    }


def dump_export(doc: dict[str, Any]) -> str:
    """The one textual form of an export (so two exports of one session compare equal)."""
    return json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def _need(cond: bool, where: str, what: str) -> None:
    if not cond:
        raise ExchangeError(f"{where}: {what}")


def _check(doc: Any, source: str) -> None:
    _need(isinstance(doc, dict), source, "not a JSON object")
    _need(doc.get("format") == FORMAT, f"{source}: format", f"expected {FORMAT!r}, found {doc.get('format')!r}")
    schema = doc.get("schema")
    _need(isinstance(schema, int), f"{source}: schema", "missing or not a number")
    _need(
        schema <= SCHEMA_VERSION, f"{source}: schema", f"{schema} is from a newer sleuth; upgrade sleuth to import it"
    )
    events = doc.get("events")
    _need(isinstance(events, list) and bool(events), f"{source}: events", "missing or empty")
    for i, e in enumerate(events):
        where = f"{source}: events[{i}]"
        _need(isinstance(e, dict) and {"seq", "ts", "kind", "data"} <= set(e), where, "needs seq, ts, kind and data")
        _need(
            e["seq"] == i + 1,
            f"{where}.seq",
            f"expected {i + 1}, found {e['seq']!r} (events must be whole and in order)",
        )
        _need(isinstance(e["ts"], (int, float)), f"{where}.ts", "not a number")
        _need(
            isinstance(e["kind"], str) and isinstance(e["data"], dict),
            where,
            "kind must be a string and data an object",
        )
        _need(isinstance(e.get("author", ""), str), f"{where}.author", "not a string")
    outputs = doc.get("outputs", {})
    _need(isinstance(outputs, dict), f"{source}: outputs", "not an object")
    for run, out in outputs.items():
        where = f"{source}: outputs[{run!r}]"
        _need(run.isdigit(), where, "run ids are numbers")
        _need(isinstance(out, dict) and isinstance(out.get("chunks"), list), where, "needs a chunks list")
        for j, chunk in enumerate(out["chunks"]):
            _need(
                isinstance(chunk, list)
                and len(chunk) == 3
                and chunk[0] in STREAMS
                and isinstance(chunk[1], (int, float)),
                f"{where}.chunks[{j}]",
                "expected [stream, ts, base64]",
            )


def import_session(doc: Any, path: Path | str, source: str = "<json>", redactor: Redactor | None = None) -> Path:
    """Write the export *doc* as a new session file at *path* (which must not exist)."""
    _check(doc, source)
    chunks: dict[int, list[tuple[str, float, bytes]]] = {}
    for run, out in doc.get("outputs", {}).items():
        decoded = []
        for j, (stream, ts, b64) in enumerate(out["chunks"]):
            try:
                decoded.append((stream, float(ts), base64.b64decode(b64, validate=True)))
            except (binascii.Error, TypeError, ValueError):
                raise ExchangeError(f"{source}: outputs[{run!r}].chunks[{j}]: not base64") from None
        chunks[int(run)] = decoded
    # Fold first: an export whose events do not make a session is refused before any write.
    try:
        InvestigationState.fold(_events(doc))
    except (KeyError, TypeError, ValueError) as exc:
        raise ExchangeError(f"{source}: events do not fold into a session ({exc!r})") from None
    store = Store.create(path, redactor)
    try:
        for e in doc["events"]:
            store.append(e["kind"], e["data"], e["ts"], author=str(e.get("author") or ""))
        for run, rows in sorted(chunks.items()):
            writer = store.capture(run)
            for stream, ts, data in rows:
                writer.write_exact(stream, data, ts)
            writer.close(complete=bool(doc["outputs"][str(run)].get("complete", True)))
    except BaseException:
        store.close()
        Path(path).unlink(missing_ok=True)
        raise
    store.close()
    return Path(path)


def _events(doc: dict[str, Any]) -> Iterator[Event]:
    for e in doc["events"]:
        yield Event(int(e["seq"]), float(e["ts"]), e["kind"], e["data"], str(e.get("author") or ""))


def run_cast(store: Store, st: InvestigationState, run: int, cols: int = 120, rows: int = 40) -> str:
    """Run *run*'s output as an asciicast v3 recording (newline-delimited JSON).

    Header, then ``[interval, "o", text]`` per stored chunk (stdout and stderr in the order
    they arrived; intervals are seconds since the previous event, as v3 wants), a marker
    with the classification, and an ``"x"`` exit event with the exit code where one is known.
    """
    info = st.runs.get(run)
    if info is None:
        raise ExchangeError(f"no run #{run}; `sleuth events` lists the runs")
    title = f"sleuth run #{run} · {info.probe} on {info.target}"
    header = {
        "version": 3,
        "term": {"cols": cols, "rows": rows, "type": "xterm-256color"},
        "timestamp": int(info.started_ts),
        "title": title,
        "command": info.probe,
    }
    lines = [json.dumps(header, ensure_ascii=False)]
    last = info.started_ts
    decoders = {s: codecs.getincrementaldecoder("utf-8")("replace") for s in STREAMS}
    at_cr = {s: False for s in STREAMS}

    def event(ts: float, code: str, data: Any) -> None:
        nonlocal last
        ts = max(ts, last)  # intervals are never negative
        lines.append(json.dumps([round(ts - last, 6), code, data], ensure_ascii=False))
        last = ts

    for stream, ts, data in store.output_chunks(run):
        text = decoders[stream].decode(data)
        # A terminal moves to column 0 on a newline (ONLCR); captured pipes carry bare \n.
        out = []
        for ch in text:
            if ch == "\n" and not at_cr[stream]:
                out.append("\r")
            out.append(ch)
            at_cr[stream] = ch == "\r"
        if out:
            event(ts, "o", "".join(out))
    for stream in STREAMS:
        tail = decoders[stream].decode(b"", final=True)
        if tail:
            event(last, "o", tail)
    end = info.finished_ts or last
    if info.classification:
        event(end, "m", f"{info.classification}: {info.reason}")
    if info.exit_status is not None:
        event(end, "x", str(info.exit_status))
    return "\n".join(lines) + "\n"
