"""What every MCP tool of sleuth's shares: the SDK's server with its one-line refusals, the
tools' shared work (:class:`Sleuth`: the workspace, its config, the session a call writes to),
and how a tool is declared — a module-level function whose first argument is that shared work,
marked with :func:`tool` (its hints, its typed answer, a description per parameter) and added
to a server by :func:`add_tools`. The families of tools are app/mcp_server/runs.py,
investigation.py and remedies.py; what they answer is answers.py."""

from __future__ import annotations

import difflib
import inspect
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import Field, ValidationError

from ..errors import UsageError

try:
    from mcp.server import MCPServer
    from mcp.server.mcpserver import Context
    from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
    from mcp.types import CallToolResult, TextContent, ToolAnnotations
except ImportError:  # the base install stays lean: the SDK is the extra's
    raise UsageError("sleuth mcp needs the MCP SDK: pip install 'sleuth[mcp]'") from None

from ...probes import load_config
from ...probes.broker import BrokerClient
from ...sessions import Investigation, Workspace
from ..errors import HypothesisError, ProbesError, ReachError, SessionError
from .answers import render

__all__ = ["FORCE_SAID", "READS", "REASON_SAID", "TARGET_SAID", "WRITES", "Context", "MCPServer", "Sleuth",
           "ToolError", "add_tools", "hints", "regex", "rooted", "target_of", "tool"]

TARGET_SAID = "the target's name in sleuth.toml ('local' is this machine); an unknown name is refused"
FORCE_SAID = "run it even though it repeats an earlier check in the same state (needs `reason`)"
REASON_SAID = "why a repeat is run anyway (with force=true); recorded with the run"


def _author(ctx: Context | None) -> str:
    """mcp:<the client's name from its handshake or its request's envelope>, else mcp."""
    try:
        params = ctx.session.client_params if ctx is not None else None
        name = params.client_info.name if params is not None and params.client_info is not None else ""
    except (AttributeError, LookupError, RuntimeError):
        name = ""
    return f"mcp:{name}" if name else "mcp"


class Sleuth:
    """The tools' shared work: the workspace, its config, the session they write to."""

    def __init__(self, workspace: Workspace, session: str | None = None, no_agent: bool = False) -> None:
        self.ws = workspace
        self.session = session
        self.no_agent = no_agent

    @contextmanager
    def open(self, ctx: Context | None) -> Iterator[Investigation]:
        """The investigation for one call, its events said to be this client's."""
        try:
            inv = self.ws.open(self.session)
        except (SessionError, HypothesisError, ProbesError) as exc:
            raise ToolError(str(exc)) from None
        inv.store.author = _author(ctx)
        try:
            yield inv
        except ReachError as exc:  # a transport fault: never evidence
            raise ToolError(f"not reached: {exc}") from None
        except (UsageError, SessionError, ProbesError, HypothesisError) as exc:
            raise ToolError(str(exc)) from None
        finally:
            inv.close()

    def config(self):
        try:
            return load_config(self.ws.config_path)
        except (ProbesError, SessionError) as exc:
            raise ToolError(str(exc)) from None

    def runner(self) -> BrokerClient | None:
        return None if self.no_agent else BrokerClient(self.ws.dir)


def hints(*, read_only: bool = False, destructive: bool = False, idempotent: bool = False,
           open_world: bool = False) -> ToolAnnotations:
    return ToolAnnotations(read_only_hint=read_only, destructive_hint=destructive, idempotent_hint=idempotent,
                           open_world_hint=open_world)


READS = hints(read_only=True, idempotent=True)  # the session only
WRITES = hints()  # appends to the session, changes nothing else

Fn = TypeVar("Fn", bound=Callable[..., Any])


def _description(doc: str | None) -> str:
    """A docstring as one paragraph: no indentation, no line breaks of the source."""
    return re.sub(r"\s*\n\s*", " ", inspect.cleandoc(doc or "")).strip()


def _described(fn: Callable[..., Any], params: dict[str, str], returns: Any) -> None:
    """Give *fn*'s signature a description per parameter and its typed answer, as
    ``Annotated[T, Field(description=…)]``: the SDK builds the tool's schemas from it. A
    parameter without a description is a mistake made here, said at start."""
    sig = inspect.signature(fn, eval_str=True)
    out = []
    for name, p in sig.parameters.items():
        if name == "ctx":
            out.append(p)
            continue
        if name not in params:
            raise TypeError(f"tool {fn.__name__}: parameter {name!r} has no description")
        out.append(p.replace(annotation=Annotated[p.annotation, Field(description=params[name])]))
    unused = set(params) - set(sig.parameters)
    if unused:
        raise TypeError(f"tool {fn.__name__}: descriptions of no parameter: {', '.join(sorted(unused))}")
    fn.__signature__ = sig.replace(parameters=out, return_annotation=returns)  # type: ignore[attr-defined]


class _Server(MCPServer):
    """The SDK's server, with what a client nobody here wrote needs from every tool: an unknown
    argument refused with the nearest real one, a bad argument said in one line, and a text
    block that is what a model reads (the data is once, in structuredContent)."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        tool = self._tool_manager.get_tool(name)
        if tool is not None:
            _refuse_unknown(tool.name, list(tool.parameters.get("properties") or {}), arguments)
        try:
            result = await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc, UnexpectedToolError) or not isinstance(exc.__cause__, ValidationError):
                raise
            raise ToolError(f"Error executing tool {name}: {_one_line(exc.__cause__)}") from None
        if isinstance(result, CallToolResult) and not result.is_error and isinstance(result.structured_content, dict):
            result = result.model_copy(update={"content": [TextContent(type="text",
                                                                       text=render(name, result.structured_content))]})
        return result


def _refuse_unknown(tool: str, known: list[str], arguments: dict[str, Any]) -> None:
    for key in arguments:
        if key not in known:
            near = difflib.get_close_matches(key, known, n=1, cutoff=0.5)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise ToolError(f"Error executing tool {tool}: unknown argument {key!r}{hint} "
                            f"({tool} takes {', '.join(known) or 'no arguments'})")


def _one_line(exc: ValidationError) -> str:
    """pydantic's errors as one line, in the tool's own names: 'missing argument 'text''."""
    said = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        if err["type"] == "missing":
            said.append(f"missing argument {where!r}")
            continue
        got = repr(err.get("input"))
        got = got if len(got) <= 60 else got[:57] + "..."
        said.append(f"argument {where!r}: {err['msg'][:1].lower()}{err['msg'][1:]} (got {got})")
    return "; ".join(said) or "bad arguments"


@dataclass(frozen=True)
class _Declared:
    hints: ToolAnnotations
    returns: Any
    params: dict[str, str]


def tool(hints: ToolAnnotations, returns: Any, **params: str) -> Callable[[Fn], Fn]:
    """Declare a tool: its annotations, its typed answer, a description per parameter. The
    function's first argument is the :class:`Sleuth` it works with; its docstring, as one
    paragraph, is the tool's description."""
    def mark(fn: Fn) -> Fn:
        fn.__sleuth_tool__ = _Declared(hints, returns, params)  # type: ignore[attr-defined]
        return fn
    return mark


def add_tools(server: MCPServer, sl: Sleuth, fns: list[Callable[..., Any]]) -> None:
    """Add each declared tool to *server*, bound to *sl*."""
    for fn in fns:
        declared: _Declared = fn.__sleuth_tool__  # type: ignore[attr-defined]
        bound = _bind(fn, sl)
        _described(bound, declared.params, declared.returns)
        server.add_tool(bound, description=_description(fn.__doc__), annotations=declared.hints)


def _bind(fn: Callable[..., Any], sl: Sleuth) -> Callable[..., Any]:
    """*fn* with its first argument given: the signature and the type hints the SDK reads are
    the rest of *fn*'s, the name and the docstring *fn*'s; async stays async."""
    async def awaited(*args: Any, **kwargs: Any) -> Any:
        return await fn(sl, *args, **kwargs)

    def called(*args: Any, **kwargs: Any) -> Any:
        return fn(sl, *args, **kwargs)

    call = awaited if inspect.iscoroutinefunction(fn) else called
    sig = inspect.signature(fn, eval_str=True)
    rest = list(sig.parameters.values())[1:]
    call.__name__ = fn.__name__
    call.__qualname__ = fn.__qualname__
    call.__doc__ = fn.__doc__
    call.__module__ = fn.__module__
    call.__signature__ = sig.replace(parameters=rest)  # type: ignore[attr-defined]
    call.__annotations__ = {p.name: p.annotation for p in rest}
    return call


def regex(pattern: str | None, ignore_case: bool = False) -> re.Pattern[str]:
    try:
        return re.compile(pattern or "", re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise ToolError(f"grep {pattern!r}: not a regular expression ({exc})") from None


def target_of(sl: Sleuth, name: str):
    try:
        return sl.config().target(name)
    except (ProbesError, SessionError) as exc:
        raise ToolError(str(exc)) from None


def rooted(sl: Sleuth, target: Any, path: str) -> str:
    """A relative local path is the project's (the server may have been started elsewhere);
    a remote one stays relative to the target's code tree."""
    if target.is_local and not Path(path).is_absolute():
        return str(sl.ws.root / path)
    return path
