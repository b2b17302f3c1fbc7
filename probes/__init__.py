"""Everything that touches a target: configuration, hop chains, command building,
transports, capture, the built-in probe scripts and the remedies.

Imports nothing from hypotheses/, sessions/ or app/.
"""

from __future__ import annotations

from .config import CONTAINER_KINDS, TEMPLATE, Config, ConfigError, Container, Target, load_config

__all__ = ["CONTAINER_KINDS", "Config", "ConfigError", "Container", "TEMPLATE", "Target", "load_config"]
