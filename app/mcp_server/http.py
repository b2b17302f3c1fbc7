"""`sleuth mcp --http`: streamable HTTP bound to loopback, every request's bearer token checked
(both protocol eras: the 2026-07-28 single-exchange POST and the handshake era's session)."""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path
from typing import Any

from ...sessions import Workspace
from ..errors import UsageError
from .tools import MCPServer

__all__ = ["LOOPBACK", "serve_http", "token_for"]


class _BearerAuth:
    """ASGI middleware: a request without ``Authorization: Bearer <token>`` gets 401 and
    reaches nothing (compared in constant time; the token is never logged)."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.token = token.encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            given = headers.get(b"authorization", b"")
            scheme, _, value = given.partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(value.strip(), self.token):
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"text/plain"), (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body", "body": b"sleuth mcp: a bearer token is needed\n"})
                return
        await self.app(scope, receive, send)


LOOPBACK = ("127.0.0.1", "::1", "localhost")


def token_for(workspace: Workspace, given: str | None = None) -> tuple[str, Path | None]:
    """The HTTP server's bearer token: SLEUTH_MCP_TOKEN when set, else a new random one written
    to ``.sleuth/mcp-token`` (mode 0600) for the client's config to read."""
    token = given or os.environ.get("SLEUTH_MCP_TOKEN") or ""
    if token:
        return token, None
    token = secrets.token_urlsafe(32)
    workspace.dir.mkdir(parents=True, exist_ok=True)
    path = workspace.dir / "mcp-token"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(token + "\n")
    os.chmod(path, 0o600)
    return token, path


async def serve_http(server: MCPServer, host: str, port: int, token: str) -> None:
    """Streamable HTTP at http://HOST:PORT/mcp, loopback only, every request's token checked."""
    import uvicorn

    if host not in LOOPBACK:
        raise UsageError(f"--host {host}: sleuth mcp serves loopback only (127.0.0.1 or ::1); reach it from "
                         "elsewhere through an ssh tunnel")
    app = _BearerAuth(server.streamable_http_app(host=host), token)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False, lifespan="on")
    await uvicorn.Server(config).serve()
