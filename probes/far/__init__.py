"""The far end: every program sleuth sends as text to a target's Python (3.8+, standard library
only, no sleuth installed there). None of them is imported to run here.

    common.py    the helper part: sleuth's cache folder, distribution names (PEP 503), a
                 package's install time, the secret-name rule, the stand-in ``emit``. It is the
                 head of the prelude, which gives a probe its names; a probe script run standalone
                 reads it from here (probes/scripts/). sessions/redact.py imports its rule.
    prelude.py   runs one probe (or a shell command) and sends its records (probes/protocol.py)
    agent.py     the resident agent, started once per target (probes/agent.py)
    hook.py      the stack-dump sitecustomize of ``sleuth probe run --shell CMD --hook``
    overlay.py   makes and removes an upgrade's overlay, sent as the probe after the prelude
                 (sessions/overlay.py)

:func:`program` is the one way to read them. Each is written for Python 3.8: no ``match``, no
``str.removeprefix``, no ``dict | dict``, no ``list[int]`` outside annotations
(tests/unit/test_far_end.py parses each with 3.8's grammar).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["FOLDER", "PROGRAMS", "program"]

FOLDER = Path(__file__).parent
PROGRAMS = ("prelude", "agent", "hook", "overlay")
# the programs that start with the helper part; overlay.py, sent after the prelude, has its names
_WITH_HELPERS = frozenset({"prelude"})


def program(name: str) -> str:
    """The text sleuth sends as the far-end program *name* (one of PROGRAMS), the helper part
    (common.py) first where the program needs it."""
    if name not in PROGRAMS:
        raise ValueError(f"no far-end program {name!r} (there are {', '.join(PROGRAMS)})")
    text = (FOLDER / f"{name}.py").read_text(encoding="utf-8")
    if name in _WITH_HELPERS:
        return (FOLDER / "common.py").read_text(encoding="utf-8") + "\n" + text
    return text
