"""A module that is imported when first used, not when sleuth starts: asyncssh (and its
cryptography) cost a fifth of a second that a command which never opens ssh need not pay."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

__all__ = ["LazyModule"]


class LazyModule:
    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        module = self.__dict__.get("_module")
        if module is None:
            module = importlib.import_module(self.__dict__["_name"])
            self.__dict__["_module"] = module
        return getattr(module, attr)
