"""Findings about a target's environment that its runs' output shows on every run: said once
per target as a note of the investigation, not on every run.

A finding is recognised in a run's stderr as it streams (a pattern, held across chunk
boundaries); the first run on a target that shows it records a note ("sleuth: on local: …");
later runs on that target only count it. Every byte of output is still stored: the CLI's live
echo leaves such lines out after the first time and says how many it left out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ENV_FINDINGS", "EnvFinding", "FindingWatch", "known_env_line"]


@dataclass(frozen=True)
class EnvFinding:
    id: str
    pattern: re.Pattern[bytes]  # the line that shows it
    companion: re.Pattern[bytes] | None  # the line Python's warnings module prints after it, if any
    sentence: str  # what it means, said once per target


ENV_FINDINGS = (
    EnvFinding(
        "numpy-missing",
        re.compile(rb"UserWarning: Failed to initialize NumPy: No module named 'numpy'"),
        re.compile(rb"^\s+cpu = _conversion_method_template\(device=torch\.device\(\"cpu\"\)\)\s*$"),
        "torch warns 'Failed to initialize NumPy' on every import: numpy is not installed in the target's "
        "environment. torch works without it (tensors cannot become numpy arrays); nothing sleuth measures "
        "depends on it. Every run's output keeps the warning.",
    ),
)


def known_env_line(line: bytes) -> EnvFinding | None:
    """The finding a line of stderr shows (or is the companion line of), if any."""
    for finding in ENV_FINDINGS:
        if finding.pattern.search(line) or (finding.companion is not None and finding.companion.match(line)):
            return finding
    return None


class FindingWatch:
    """Watches a run's stderr as it streams for the findings above (a line split across two
    chunks is seen whole: the tail of the previous chunk is kept)."""

    def __init__(self) -> None:
        self.seen: list[EnvFinding] = []
        self._tail = b""

    def feed(self, stream: str, data: bytes) -> None:
        if stream != "stderr" or len(self.seen) == len(ENV_FINDINGS):
            return
        text = self._tail + data
        for finding in ENV_FINDINGS:
            if finding not in self.seen and finding.pattern.search(text):
                self.seen.append(finding)
        self._tail = text[-256:]
