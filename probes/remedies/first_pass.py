"""The lock remedy where the compile lives in a library: each worker's first pass runs alone.

When a module starts worker threads but holds no compile site of its own (the drafter built
on transformers: ``torch.compile(flex_attention)`` is inside the library), the lock cannot wrap
the compiled function where it is made without changing an installed package. What it can
do, in the user's own code, is serialise what the workers' first compile needs: each worker
thread's first pass through its loop runs alone, so the compiles it triggers finish before
any other thread runs a pass; later passes run together, never beside a first pass (a
readers-writer gate, first passes first). One gate per process, shared by every remedied
module (kept on the threading module, as the lock is).

A loop that waits on the other workers (a barrier, an event, a join) could wait forever
behind a first pass run alone: such a worker is said and left as it is.
"""

from __future__ import annotations

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider, QualifiedNameProvider

from .common import Findings, after_imports, line_of, qualified, splice

__all__ = ["FIRST_PASS_HELPER", "first_pass_transform"]

GATE = "_SLEUTH_FIRST_PASS"
FIRST_PASS_HELPER = '''
# --- sleuth: lock remedy, first pass ------------------------------------------------------
# The compile these worker threads need happens inside a library (transformers compiles
# flex_attention and the block mask itself). While one thread compiles, torch's compile state
# is process-global (the FX tracing flag; torch.compiler.is_compiling() answers True on every
# thread): another thread running the model meanwhile takes the library's compile-time branch
# and dies, or runs flex_attention uncompiled. Each worker's first pass through its loop runs
# alone, so its compiles finish before any other thread runs a pass; later passes run
# together, never beside a first pass. One gate per process, whichever remedied module is
# imported first. Added by sleuth; remove with `sleuth remedy revert`.
import threading as _sleuth_threading


class _SleuthFirstPass:
    def __init__(self):
        self._cond = _sleuth_threading.Condition()
        self._first = False  # a thread is in its first pass
        self._waiting = 0  # threads waiting for their first pass: they go before later passes
        self._passes = 0  # later passes running
        self._here = _sleuth_threading.local()

    def __enter__(self):
        here = self._here
        depth = getattr(here, "depth", 0)
        here.depth = depth + 1
        if depth:  # a pass inside a pass: the outer one holds the gate
            return self
        here.first = not getattr(here, "passed", False)
        with self._cond:
            if here.first:
                self._waiting += 1
                while self._first or self._passes:
                    self._cond.wait()
                self._waiting -= 1
                self._first = True
            else:
                while self._first or self._waiting:
                    self._cond.wait()
                self._passes += 1
        return self

    def __exit__(self, *exc):
        here = self._here
        here.depth -= 1
        if here.depth:
            return False
        with self._cond:
            if here.first:
                self._first = False
                here.passed = True
            else:
                self._passes -= 1
            self._cond.notify_all()
        return False


_SLEUTH_FIRST_PASS = _sleuth_threading.__dict__.setdefault("_sleuth_first_pass", _SleuthFirstPass())
# --- end sleuth ---------------------------------------------------------------------------
'''
THREAD_START = {"threading.Thread"}
POOL_CALLS = ("submit", "map")  # concurrent.futures executors: the function is the first argument
WAITS = {"wait", "acquire", "join"}  # a worker that waits on the others inside its loop


def _gated(node: cst.CSTNode) -> bool:
    return (isinstance(node, cst.With) and len(node.items) == 1 and isinstance(node.items[0].item, cst.Name)
            and node.items[0].item.value == GATE)


class _Targets(cst.CSTVisitor):
    """The functions handed to threads: Thread(target=f), executor.submit(f, …), executor.map(f, …)."""

    METADATA_DEPENDENCIES = (QualifiedNameProvider, PositionProvider)

    def __init__(self) -> None:
        self.names: dict[str, int] = {}  # name -> line of the first start
        self.gated = False

    def visit_Call(self, node: cst.Call) -> None:
        fn = None
        if qualified(self, node.func) & THREAD_START:
            fn = next((a.value for a in node.args if a.keyword is not None and a.keyword.value == "target"), None)
        elif isinstance(node.func, cst.Attribute) and node.func.attr.value in POOL_CALLS and node.args:
            if node.args[0].keyword is None:
                fn = node.args[0].value
        if isinstance(fn, cst.Name):
            self.names.setdefault(fn.value, line_of(self, node))

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == GATE:
            self.gated = True


class _Calls(cst.CSTVisitor):
    def __init__(self) -> None:
        self.n = 0

    def visit_Call(self, node: cst.Call) -> None:
        self.n += 1


def _loops(body: cst.BaseSuite) -> list[cst.For | cst.While]:
    """The loops of a worker's body, inside try/with blocks too (not inside other loops)."""
    if not isinstance(body, cst.IndentedBlock):
        return []
    found: list[cst.For | cst.While] = []
    for stmt in body.body:
        if isinstance(stmt, (cst.For, cst.While)):
            found.append(stmt)
        elif isinstance(stmt, (cst.Try, cst.With)):
            found += _loops(stmt.body)
    return found


def _first_loop(body: cst.BaseSuite) -> cst.For | cst.While | None:
    """The worker's loop: of its loops, the one that does the most (calls in its body) — the
    training steps, not a setup loop over parameters."""
    best, most = None, -1
    for loop in _loops(body):
        calls = _Calls()
        loop.body.visit(calls)
        if calls.n > most:
            best, most = loop, calls.n
    return best


class _WaitsOnOthers(cst.CSTVisitor):
    def __init__(self) -> None:
        self.line_names: list[str] = []

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in WAITS:
            self.line_names.append(node.func.attr.value)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False  # a function defined in the loop is not run by it


def _gate(block: cst.BaseSuite) -> cst.IndentedBlock:
    """*block* inside ``with _SLEUTH_FIRST_PASS:``; a comment after the loop's colon stays there."""
    if isinstance(block, cst.IndentedBlock):
        header, inner = block.header, block.with_changes(header=cst.TrailingWhitespace())
    else:  # `for x in y: step(x)` on one line
        small = [s for s in block.body if isinstance(s, cst.BaseSmallStatement)]
        header, inner = cst.TrailingWhitespace(), cst.IndentedBlock(body=[cst.SimpleStatementLine(body=small)])
    return cst.IndentedBlock(header=header, body=[cst.With(items=[cst.WithItem(item=cst.Name(GATE))], body=inner)])


class _GateWorkers(cst.CSTTransformer):
    def __init__(self, targets: dict[str, int], findings: Findings, lines: dict[cst.FunctionDef, int]) -> None:
        super().__init__()
        self.targets = targets
        self.found = findings
        self.lines = lines
        self.changed = 0
        self._loop: cst.CSTNode | None = None

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if node.name.value not in self.targets:
            return
        line = self.lines.get(node, 0)
        loop = _first_loop(node.body)
        scope: cst.CSTNode = loop if loop is not None else node
        waits = _WaitsOnOthers()
        (loop.body if loop is not None else node.body).visit(waits)
        if waits.line_names:
            self.found.add(line, f"{node.name.value}() waits on other threads in its loop "
                                 f"(.{waits.line_names[0]}()): a first pass run alone could wait forever; not changed",
                           left_unlocked=True)
            return
        self._loop = scope
        where = f"its loop ({'for' if isinstance(loop, cst.For) else 'while'})" if loop is not None else "its body"
        self.found.add(line, f"{node.name.value}() runs in worker threads (started at line {self.targets[node.name.value]}): "
                             f"{where} is gated — each worker's first pass runs alone, later passes together")

    def leave_For(self, original_node: cst.For, updated_node: cst.For) -> cst.For:
        if original_node is self._loop:
            self.changed += 1
            return updated_node.with_changes(body=_gate(updated_node.body))
        return updated_node

    def leave_While(self, original_node: cst.While, updated_node: cst.While) -> cst.While:
        if original_node is self._loop:
            self.changed += 1
            return updated_node.with_changes(body=_gate(updated_node.body))
        return updated_node

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        if original_node is self._loop:
            self.changed += 1
            return updated_node.with_changes(body=_gate(updated_node.body))
        return updated_node


def first_pass_transform(source: str, findings: Findings) -> tuple[str, int]:
    """(new source, functions gated) for a module whose worker threads need a compile it does
    not hold; (source, 0) when it starts no thread, or is gated already."""
    module = cst.parse_module(source)
    wrapper = MetadataWrapper(module)
    scan = _Targets()
    wrapper.visit(scan)
    if not scan.names or scan.gated:
        return source, 0
    lines: dict[cst.FunctionDef, int] = {}

    class Lines(cst.CSTVisitor):
        METADATA_DEPENDENCIES = (PositionProvider,)

        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            lines[node] = line_of(self, node)

    wrapper.visit(Lines())
    gate = _GateWorkers(scan.names, findings, lines)
    new = wrapper.module.visit(gate)
    if not gate.changed:
        return source, 0
    body = list(new.body)
    return new.with_changes(body=splice(body, after_imports(body), FIRST_PASS_HELPER)).code, gate.changed
