"""An MCP client's name, what a tool call answered (its structured content, or its refusal), and
`sleuth mcp --http` started for a test."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mcp.types import Implementation

AGENT = Implementation(name="pytest-agent", version="1.0")


def answer(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content[0].text
    return result.structured_content


def error_of(result: Any) -> str:
    assert result.is_error, f"expected a refusal, got {result.structured_content}"
    return result.content[0].text


@contextmanager
def http_server(project: Path) -> Iterator[tuple[str, str, list[str]]]:
    """`sleuth mcp --http` in *project* on a free loopback port with a fresh token, once it
    listens: (url, token, the lines it wrote on stderr — filled in when it has stopped)."""
    from support.cli import SLEUTH
    from support.sshd_harness import free_port

    port = free_port()
    token = "t0k-" + os.urandom(8).hex()
    proc = subprocess.Popen([SLEUTH, "mcp", "--http", "--port", str(port), "--no-agent"], cwd=project,
                            env={**os.environ, "SLEUTH_MCP_TOKEN": token}, stderr=subprocess.PIPE, text=True)
    stderr: list[str] = []
    try:
        for _ in range(200):  # until uvicorn listens
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp", token, stderr
    finally:
        proc.terminate()
        stderr.append(proc.communicate(timeout=10)[1])
