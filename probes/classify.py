"""How a run ended: exactly one classification and a sentence of facts that says why.

``completed`` · ``failed`` (the probe raised, or exited non-zero after reporting) ·
``killed`` (a signal; exit 137 is SIGKILL, usually the OOM killer) · ``timed_out`` ·
``transport`` (could not connect, auth, host key, connection lost) · ``no_result``
(exited without a ``done`` record: cut short, crashed before reporting, not a sleuth probe).
"""

from __future__ import annotations

import signal as _signal
from dataclasses import dataclass, field

__all__ = ["CLASSIFICATIONS", "RunFacts", "classify"]

CLASSIFICATIONS = ("completed", "failed", "killed", "timed_out", "transport", "no_result")


@dataclass
class RunFacts:
    """What is known about a run when it ends; the only input of :func:`classify`."""

    mode: str = "python"  # "python" (a sleuth probe) | "shell"
    exit_status: int | None = None
    signal: str | None = None  # "KILL", "TERM", ...
    timed_out: float | None = None  # the timeout, if it fired
    cancelled: bool = False
    transport_error: str | None = None
    kinds: list[str] = field(default_factory=list)  # record kinds, in order
    error: dict | None = None  # the error record, if any
    lines: dict[str, int] = field(default_factory=lambda: {"stdout": 0, "stderr": 0})
    last_lines: dict[str, list[str]] = field(default_factory=lambda: {"stdout": [], "stderr": []})
    seconds: float = 0.0


def _signame(sig: str | int) -> str:
    if isinstance(sig, int):
        try:
            return _signal.Signals(sig).name
        except ValueError:
            return f"signal {sig}"
    return sig if sig.startswith("SIG") else f"SIG{sig}"


def _line_counts(f: RunFacts) -> str:
    """'stdout had 3 lines, stderr 0' ('1 line' for one)."""
    n = f.lines["stdout"]
    return f"stdout had {n:,} line{'s' * (n != 1)}, stderr {f.lines['stderr']:,}"


def _streams(f: RunFacts) -> str:
    parts = [_line_counts(f)]
    for stream in ("stderr", "stdout"):
        tail = [ln for ln in f.last_lines.get(stream, []) if ln.strip()][-2:]
        if tail:
            parts.append(f"last {stream}: " + " | ".join(_clip(t) for t in tail))
    return "; ".join(parts)


def _clip(text: str, width: int = 120) -> str:
    text = text.strip()
    return text if len(text) <= width else text[: width - 1] + "…"


def _records(f: RunFacts) -> str:
    if not f.kinds:
        return "no records arrived"
    counts: dict[str, int] = {}
    for k in f.kinds:
        counts[k] = counts.get(k, 0) + 1
    return "records: " + ", ".join(f"{k}×{n}" if n > 1 else k for k, n in counts.items())


def classify(f: RunFacts) -> tuple[str, str]:
    """(classification, reason) for the facts of one ended run."""
    if f.transport_error:
        return "transport", f"{f.transport_error}; nothing the probe did is evidence ({_records(f)})"
    if f.timed_out is not None:
        return "timed_out", f"no end after {f.timed_out:g} s, so it was killed; {_records(f)}; {_streams(f)}"
    if f.cancelled:
        return "killed", f"cancelled after {f.seconds:.1f} s, and its processes killed; {_records(f)}; {_streams(f)}"
    done = "done" in f.kinds
    sig = f.signal
    if sig is None and f.exit_status is not None and f.exit_status > 128 and not done:
        # A container hop (pct, docker) turns a signal into exit status 128 + N.
        try:
            sig = _signal.Signals(f.exit_status - 128).name
        except ValueError:
            sig = None
    if sig is not None and not done:
        name = _signame(sig)
        oom = " (SIGKILL with no one asking: usually the OOM killer)" if name == "SIGKILL" else ""
        status = f" (exit status {f.exit_status})" if f.exit_status not in (None, -1) else ""
        return "killed", f"killed by {name}{status}{oom}; {_records(f)}; {_streams(f)}"
    if f.mode == "shell":
        if f.exit_status == 0:
            return "completed", f"exited 0; {_line_counts(f)}"
        return "failed", f"exited {f.exit_status}; {_streams(f)}"
    if f.error is not None:
        where = " before its done record" if not done else ""
        return "failed", (
            f"the probe raised {f.error.get('type')}: {_clip(str(f.error.get('message', '')), 400)}{where}; "
            f"{_records(f)}; {_streams(f)}"
        )
    if done:
        if f.exit_status in (0, None):
            return "completed", (
                f"done record received, exit status 0; {_records(f)}; {_line_counts(f)}"
            )
        return "failed", f"exited {f.exit_status} after its done record; {_records(f)}; {_streams(f)}"
    if f.exit_status is None:
        return "transport", f"the connection ended with no exit status; {_records(f)}; {_streams(f)}"
    return "no_result", (
        f"exited {f.exit_status} without a done record (cut short, crashed before reporting, "
        f"or not a sleuth probe); {_records(f)}; {_streams(f)}"
    )
