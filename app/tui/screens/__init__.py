"""The screens (frogmouth's split: screens compose the widgets of ``app/tui/widgets.py``).

* :class:`BrowseScreen` — the layout and everything reading an investigation needs.
* :class:`InvestigationScreen` — live: run, cancel, remedy, add, target, baseline.
* :class:`ReplayScreen` — the investigation at event k, with a scrubber.
"""

from __future__ import annotations

from .browse import BrowseScreen
from .live import InvestigationScreen
from .replay import ReplayScreen

__all__ = ["BrowseScreen", "InvestigationScreen", "ReplayScreen"]
