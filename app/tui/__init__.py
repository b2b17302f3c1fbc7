"""The terminal UI (Textual): the investigation screen, the replay screen, their dialogs and
the output view. The only package that imports textual."""

from __future__ import annotations

from .app import SelectionCommands, SleuthApp
from .output import OutputView
from .screens import InvestigationScreen, ReplayScreen

__all__ = ["InvestigationScreen", "OutputView", "ReplayScreen", "SelectionCommands", "SleuthApp"]
