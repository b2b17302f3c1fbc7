"""The recorded log as text: `sleuth events` (each event in words) and `sleuth output` (a
run's stored output, every byte, pipe-friendly)."""

from __future__ import annotations

import argparse
import re
import sys
import time

from ..sessions import Investigation
from ..sessions.paging import matching_lines
from .errors import UsageError
from .session_args import print_json, run_id, session_path
from .timeline import narrated

__all__ = ["cmd_events", "cmd_output"]


def cmd_events(args: argparse.Namespace) -> int:
    path = session_path(args.session)
    with Investigation.replay(path) as inv:
        events = list(inv.store.events())
        if args.json:
            print_json([e.to_dict() for e in events])
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
    path = session_path(args.session)
    run = run_id(args.run)
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
