"""The probe protocol: building the program a run sends, and reading records back.

The program on stdin is the prelude (``far/prelude.py``, with the far end's helper part
``far/common.py`` at its head: ``far.program("prelude")``) plus one call ``_sleuth_main(config)``; the config — nonce, parameters, the probe's source — is embedded as
a JSON string inside a Python string literal made by ``repr``, which is exact for any text.
Records come back as lines ``@@sleuth:<nonce> {json}`` on stdout; the nonce is fresh per
run, so a probe's own output can never be taken for a record.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from typing import Any

from .far import program

__all__ = ["ProgramSpec", "RecordParser", "build_program", "new_nonce", "PRELUDE"]

PRELUDE = program("prelude")


def new_nonce() -> str:
    return secrets.token_hex(8)


@dataclass(frozen=True)
class ProgramSpec:
    """What to run: a Python probe's source, or a shell command (mode "shell")."""

    probe: str
    source: str = ""
    filename: str = "<probe>"
    params: dict[str, Any] = field(default_factory=dict)
    mode: str = "python"  # "python" | "shell"
    shell: str = ""
    code_dir: str | None = None
    quiet: bool = True
    fork: bool = False  # the probe may run forked from a warm agent (its PROBE says "fork": True)
    # directories put first on sys.path and PYTHONPATH (an upgrade's overlay); such a run is
    # never forked from an agent, whose imports would hide the overlay's packages
    path_prefix: tuple[str, ...] = ()
    hook: bool = False  # a shell command's Python processes get sleuth's stack-dump hook (probes/far/hook.py)
    parts: tuple[tuple[str, str], ...] = ()  # (file name, text): run before the probe, in its namespace


def build_program(spec: ProgramSpec, nonce: str) -> bytes:
    config = {
        "nonce": nonce,
        "probe": spec.probe,
        "source": spec.source,
        "filename": spec.filename,
        "params": spec.params,
        "mode": spec.mode,
        "shell": spec.shell,
        "code_dir": spec.code_dir,
        "quiet": spec.quiet,
        "path_prefix": list(spec.path_prefix),
    }
    if spec.hook:
        config["hook"] = program("hook")
    if spec.parts:
        config["parts"] = [list(part) for part in spec.parts]
    payload = json.dumps(config, ensure_ascii=True)
    return (PRELUDE + f"\n_sleuth_main(_json.loads({payload!r}))\n").encode("utf-8")


class RecordParser:
    """Pulls records out of a stdout byte stream, chunk by chunk."""

    def __init__(self, nonce: str) -> None:
        self.marker = f"@@sleuth:{nonce} ".encode()
        self.records: list[dict[str, Any]] = []
        self.malformed = 0
        self._tail = b""

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        marker, tail = self.marker, self._tail
        if marker not in data and (not tail or marker not in tail + data[: len(marker)]):
            # the usual chunk: plain output, no record in it or across its start (no copy)
            self._tail = self._keep(tail + data if len(data) < len(marker) else data)
            return []
        buffer = tail + data
        lines = buffer.split(b"\n")
        last = lines.pop()
        self._tail = last if self.marker in last else self._keep(last)
        return [r for r in (self._line(line) for line in lines) if r is not None]

    def _keep(self, buffer: bytes) -> bytes:
        """The end of *buffer* that could be the first part of a marker (and its record)."""
        end = buffer[-len(self.marker) :]
        return end[end.rfind(b"\n") + 1 :]

    def finish(self) -> list[dict[str, Any]]:
        tail, self._tail = self._tail, b""
        rec = self._line(tail)
        return [rec] if rec is not None else []

    def _line(self, line: bytes) -> dict[str, Any] | None:
        at = line.find(self.marker)
        if at < 0:
            return None
        try:
            rec = json.loads(line[at + len(self.marker) :].decode("utf-8", "replace"))
        except ValueError:
            self.malformed += 1
            return None
        if not isinstance(rec, dict) or "kind" not in rec:
            self.malformed += 1
            return None
        self.records.append(rec)
        return rec

    def kinds(self) -> list[str]:
        return [r["kind"] for r in self.records]
