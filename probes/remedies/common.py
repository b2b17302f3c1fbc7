"""What the remedies need to know about a module: which calls compile flex_attention,
build block masks, FX-trace, or start threads — found by qualified name, so aliases
(``from torch import compile as c``, ``import ... flex_attention as fa``) are seen too."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import PositionProvider, QualifiedNameProvider

__all__ = [
    "COMPILE", "FLEX", "FLEX_WRAPPERS", "BLOCK_MASK", "TRACERS", "THREADS", "PROCESSES",
    "Finding", "qualified", "is_call_to", "line_of",
]

COMPILE = {"torch.compile"}
FLEX = {"torch.nn.attention.flex_attention.flex_attention"}
# functions that call an (internally, lazily) compiled flex_attention
FLEX_WRAPPERS = {
    "transformers.integrations.flex_attention.compile_friendly_flex_attention",
    "transformers.integrations.flex_attention.WrappedFlexAttention",
}
PARTIAL = {"functools.partial"}
BLOCK_MASK = {"torch.nn.attention.flex_attention.create_block_mask"}
TRACERS = {
    "torch.fx.symbolic_trace",
    "torch.fx._symbolic_trace.symbolic_trace",
    "torchvision.models.feature_extraction.create_feature_extractor",
    "torch.export.export",
    "torch.export",
}
MAKE_FX = {"torch.fx.experimental.proxy_tensor.make_fx"}
THREADS = {"threading.Thread", "concurrent.futures.ThreadPoolExecutor", "concurrent.futures.thread.ThreadPoolExecutor"}
PROCESSES = {
    "torch.multiprocessing.spawn",
    "torch.multiprocessing.start_processes",
    "torch.multiprocessing.Process",
    "multiprocessing.Process",
    "concurrent.futures.ProcessPoolExecutor",
}


@dataclass
class Finding:
    line: int
    what: str
    handled: bool = True  # False: sleuth will not write the file (it would be half-fixed)
    left_unlocked: bool = False  # seen, deliberately not locked: said in the preview and the apply
    nothing: bool = False  # unhandled only because there is nothing here for the remedy (its compile is elsewhere)


@dataclass
class Findings:
    items: list[Finding] = field(default_factory=list)

    def add(self, line: int, what: str, handled: bool = True, left_unlocked: bool = False, nothing: bool = False) -> None:
        self.items.append(Finding(line, what, handled, left_unlocked, nothing))

    @property
    def left(self) -> list[Finding]:
        return [f for f in self.items if f.left_unlocked]

    @property
    def unhandled(self) -> list[Finding]:
        return [f for f in self.items if not f.handled]


def qualified(meta, node: cst.CSTNode) -> set[str]:
    try:
        return {q.name for q in meta.get_metadata(QualifiedNameProvider, node, set())}
    except KeyError:
        return set()


def is_call_to(meta, node: cst.CSTNode, names: set[str]) -> bool:
    return isinstance(node, cst.Call) and bool(qualified(meta, node.func) & names)


def line_of(meta, node: cst.CSTNode) -> int:
    try:
        return meta.get_metadata(PositionProvider, node).start.line
    except KeyError:
        return 0


def splice(
    body: Sequence[cst.SimpleStatementLine | cst.BaseCompoundStatement], at: int, helper_source: str
) -> list[cst.SimpleStatementLine | cst.BaseCompoundStatement]:
    """Insert the statements of *helper_source* at *at*, keeping its comment block on top
    and its closing comment above the statement that follows."""
    helper = cst.parse_module(helper_source)
    stmts = list(helper.body)
    stmts[0] = stmts[0].with_changes(leading_lines=[cst.EmptyLine(), *helper.header, *stmts[0].leading_lines])
    rest = list(body[at:])
    footer = [line for line in helper.footer if line.comment is not None]
    if rest:
        rest[0] = rest[0].with_changes(leading_lines=[cst.EmptyLine(), *footer, cst.EmptyLine(), *rest[0].leading_lines])
    return [*body[:at], *stmts, *rest]


def after_imports(body: Sequence[cst.SimpleStatementLine | cst.BaseCompoundStatement]) -> int:
    """Index just after the module's leading docstring and imports (where helpers go)."""
    at = 0
    for i, stmt in enumerate(body):
        if isinstance(stmt, cst.SimpleStatementLine) and all(
            isinstance(s, (cst.Import, cst.ImportFrom)) or (isinstance(s, cst.Expr) and isinstance(s.value, cst.SimpleString))
            for s in stmt.body
        ):
            at = i + 1
        elif at:
            break
    return at
