"""An MCP client's name and what a tool call answered: its structured content, or its refusal."""

from __future__ import annotations

from typing import Any

from mcp.types import Implementation

AGENT = Implementation(name="pytest-agent", version="1.0")


def answer(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content[0].text
    return result.structured_content


def error_of(result: Any) -> str:
    assert result.is_error, f"expected a refusal, got {result.structured_content}"
    return result.content[0].text
