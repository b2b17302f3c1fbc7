"""The lock remedy: one process-wide re-entrant lock around every call of a compiled
flex_attention, every create_block_mask and every FX tracing site of a module — the same
lock object in every remedied module of the process (``threading.__dict__.setdefault``:
atomic, whichever module is imported first, with or without sleuth installed).

The compiled function is wrapped where it is made (``_sleuth_serialized(torch.compile(
flex_attention))``, or a ``@_sleuth_serialized`` decorator above ``@torch.compile``), so
every call through any alias, attribute or lazy singleton takes the lock; block-mask and
tracing calls are wrapped where they happen. A lock around the *first* call only is not
enough (measured on an H200: 101,350 of 193,401 calls still failed).
"""

from __future__ import annotations

import libcst as cst
from libcst.metadata import (
    MetadataWrapper,
    ParentNodeProvider,
    PositionProvider,
    QualifiedNameProvider,
    QualifiedNameSource,
)

from .common import (
    BLOCK_MASK,
    COMPILE,
    FLEX,
    FLEX_WRAPPERS,
    MAKE_FX,
    PARTIAL,
    PROCESSES,
    THREADS,
    TRACERS,
    Findings,
    after_imports,
    is_call_to,
    line_of,
    qualified,
    splice,
)

__all__ = ["LOCK_HELPER", "lock_transform"]

WRAP = "_sleuth_serialized"
# What serializing a whole compiled model's forward cost, measured (bench/remedy_overhead.py)
WHOLE_MODEL_COST = ("the example drafter's, four threads: 0.04 % on an H200, 9.8 % on a 2-core CPU; "
                    "bench/remedy_overhead.py --model-only measures yours")
LOCK_HELPER = '''
# --- sleuth: lock remedy ------------------------------------------------------------------
# torch's FX-tracing flag is process-global: a thread that calls compiled code while another
# thread compiles or FX-traces trips it ("Detected that you are using FX to symbolically
# trace a dynamo-optimized function"). Every compiled flex_attention call, create_block_mask
# and FX tracing site below goes through one re-entrant lock — the same one in every module
# sleuth remedied, whichever is imported first (it is kept on the threading module), so a
# compile in one module and a trace in another exclude each other. Added by sleuth; remove
# with `sleuth remedy revert`.
import functools as _sleuth_functools
import threading as _sleuth_threading

_SLEUTH_LOCK = _sleuth_threading.__dict__.setdefault("_sleuth_remedy_lock", _sleuth_threading.RLock())


def _sleuth_serialized(fn):
    if hasattr(fn, "parameters") and hasattr(fn, "forward"):  # a (compiled) module stays a module
        fn.forward = _sleuth_serialized(fn.forward)
        return fn

    @_sleuth_functools.wraps(fn)
    def _sleuth_locked(*args, **kwargs):
        with _SLEUTH_LOCK:
            return fn(*args, **kwargs)

    return _sleuth_locked


# --- end sleuth ---------------------------------------------------------------------------
'''


def _wrap(node: cst.BaseExpression) -> cst.Call:
    return cst.Call(func=cst.Name(WRAP), args=[cst.Arg(node)])


def _is_wrapper(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == WRAP


class _LockTransformer(cst.CSTTransformer):
    METADATA_DEPENDENCIES = (QualifiedNameProvider, PositionProvider, ParentNodeProvider)

    def __init__(self, findings: Findings) -> None:
        super().__init__()
        self.found = findings
        self.changed = 0
        self.flex_functions: set[str] = set()  # local defs that call flex_attention
        self.has_helper = False
        self.threads = 0
        self.processes = 0
        self.module_functions: set[str] = set()  # functions defined at the module's top level

    # ---- pass 1 facts (collected while visiting; the module is small)

    def visit_Module(self, node: cst.Module) -> None:
        meta = self

        class Scan(cst.CSTVisitor):
            def __init__(self) -> None:
                self.stack: list[str] = []

            def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
                fn = node
                if not self.stack:
                    meta.module_functions.add(fn.name.value)
                self.stack.append(fn.name.value)
                if fn.name.value == WRAP:
                    meta.has_helper = True

            def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
                self.stack.pop()

            def visit_Call(self, node: cst.Call) -> None:
                call = node
                q = qualified(meta, call.func)
                if q & FLEX and self.stack:
                    meta.flex_functions.update(self.stack)
                if q & THREADS:
                    meta.threads += 1
                if q & PROCESSES:
                    meta.processes += 1

        node.visit(Scan())

    def _wrapped_already(self, node: cst.CSTNode) -> bool:
        parent = self.get_metadata(ParentNodeProvider, node, None)
        while isinstance(parent, cst.Arg):
            parent = self.get_metadata(ParentNodeProvider, parent, None)
        return parent is not None and _is_wrapper(parent)

    def _what_compiles(self, call: cst.Call) -> str | None:
        """What a torch.compile call compiles, when it is a function sleuth can wrap:
        flex_attention (or a partial or local wrapper of it), create_block_mask, or a plain
        function (defined here, or imported); None for anything else (a module, a parameter)."""
        if self._compiles_flex(call):
            return "flex_attention"
        if not call.args:
            return None
        first = call.args[0].value
        if isinstance(first, cst.Call) and qualified(self, first.func) & PARTIAL and first.args:
            first = first.args[0].value
        q = qualified(self, first)
        if q & BLOCK_MASK:
            return "create_block_mask"
        if isinstance(first, cst.Name) and first.value in self.module_functions:
            return first.value
        imported = self._imported_function(first)
        return imported

    def _imported_function(self, node: cst.CSTNode) -> str | None:
        """The qualified name of an imported function (lowercase: not a class) *node* names."""
        try:
            names = self.get_metadata(QualifiedNameProvider, node, set())
        except KeyError:
            return None
        for q in names:
            last = q.name.rsplit(".", 1)[-1]
            if q.source == QualifiedNameSource.IMPORT and last[:1].islower():
                return q.name
        return None

    def _compiles_flex(self, call: cst.Call) -> bool:
        if not call.args:
            return False
        first = call.args[0].value
        if qualified(self, first) & FLEX:
            return True
        if isinstance(first, cst.Call) and qualified(self, first.func) & PARTIAL and first.args:
            return bool(qualified(self, first.args[0].value) & FLEX)
        if isinstance(first, cst.Name) and first.value in self.flex_functions:
            return True
        return False

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        original, updated = original_node, updated_node
        line = line_of(self, original)
        if _is_wrapper(original) or self._wrapped_already(original):
            return updated
        q = qualified(self, original.func)
        if q & COMPILE:
            if not original.args or original.args[0].keyword is not None:  # @torch.compile(...): see leave_FunctionDef
                return updated
            what = self._what_compiles(original)
            if what is not None:
                self.found.add(line, f"torch.compile({what}…): every call of the result takes the lock")
                self.changed += 1
                return _wrap(updated)
            code = cst.Module([]).code_for_node(original.args[0].value)
            self.found.add(line, f"torch.compile({code}): a compiled model or callable — every call (a module's forward) "
                           "takes the lock; serializing a whole forward costs more than one kernel "
                           f"({WHOLE_MODEL_COST}): if that is too much, lock only the flex_attention inside it instead")
            self.changed += 1
            return _wrap(updated)
        if isinstance(original.func, cst.Attribute) and original.func.attr.value == "compile" and not q & COMPILE \
                and not original.args:
            code = cst.Module([]).code_for_node(original.func.value)
            self.found.add(line, f"{code}.compile() compiles the module in place: its calls are not locked (lock the "
                           "flex_attention inside it)", left_unlocked=True)
            return updated
        if q & FLEX_WRAPPERS:
            self.found.add(line, f"{sorted(q & FLEX_WRAPPERS)[0].rsplit('.', 1)[1]}(…) (a lazily compiled flex_attention)")
            self.changed += 1
            return updated.with_changes(func=_wrap(updated.func))
        if q & BLOCK_MASK:
            self.found.add(line, "create_block_mask(…)")
            self.changed += 1
            return updated.with_changes(func=_wrap(updated.func))
        if q & TRACERS:
            self.found.add(line, f"FX tracing site {sorted(q & TRACERS)[0]}(…)")
            self.changed += 1
            return updated.with_changes(func=_wrap(updated.func))
        if isinstance(original.func, cst.Call) and isinstance(original.func.func, (cst.Name, cst.Attribute)) \
                and is_call_to(self, original.func, MAKE_FX):
            self.found.add(line, "FX tracing site make_fx(…)(…)")
            self.changed += 1
            return updated.with_changes(func=_wrap(updated.func))
        if q & MAKE_FX and isinstance(original.func, (cst.Name, cst.Attribute)):
            parent = self.get_metadata(ParentNodeProvider, original, None)
            if not (isinstance(parent, cst.Call) and parent.func is original) and not self._wrapped_already(original):
                self.found.add(line, "make_fx(…) kept for a later call: that call is not locked", handled=False)
        return updated

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        original, updated = original_node, updated_node
        decorators = list(updated.decorators)
        compiled = [
            d for d in original.decorators
            if qualified(self, d.decorator) & COMPILE
            or (isinstance(d.decorator, cst.Call) and qualified(self, d.decorator.func) & COMPILE)
        ]
        already = any(isinstance(d.decorator, cst.Name) and d.decorator.value == WRAP for d in original.decorators)
        if compiled and not already:
            self.found.add(line_of(self, original), f"@torch.compile def {original.name.value}: every call takes the lock")
            self.changed += 1
            return updated.with_changes(decorators=[cst.Decorator(cst.Name(WRAP)), *decorators])
        return updated

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        updated = updated_node
        if not self.changed or self.has_helper:
            return updated
        body = list(updated.body)
        at = after_imports(body)
        return updated.with_changes(body=splice(body, at, LOCK_HELPER))


OLD_LOCK = "_SLEUTH_LOCK = _sleuth_threading.RLock()\n"  # one lock per module, before issue 14
SHARED_LOCK = '_SLEUTH_LOCK = _sleuth_threading.__dict__.setdefault("_sleuth_remedy_lock", _sleuth_threading.RLock())\n'


def lock_transform(source: str) -> tuple[str, Findings, dict[str, int]]:
    """(new source, what was found, counts) for the lock remedy on one module."""
    findings = Findings()
    if OLD_LOCK in source:  # remedied by an older sleuth: its lock excluded nothing outside this module
        source = source.replace(OLD_LOCK, SHARED_LOCK)
        findings.add(0, "the lock sleuth added before is now the one process-wide lock every remedied module shares")
    module = cst.parse_module(source)
    wrapper = MetadataWrapper(module)
    transformer = _LockTransformer(findings)
    new = wrapper.visit(transformer)
    changed = transformer.changed
    if not changed and transformer.threads:  # workers, but their compile is elsewhere (a library's)
        from .first_pass import first_pass_transform

        code, changed = first_pass_transform(source, findings)
        if changed:
            return code, findings, {"changed": changed, "threads": transformer.threads, "processes": transformer.processes}
    if transformer.processes and not transformer.threads:
        findings.add(
            0,
            "this module starts processes, not threads: separate processes do not share the FX flag, "
            "so a lock here would protect nothing between them",
            handled=True,
        )
    return new.code, findings, {"changed": transformer.changed, "threads": transformer.threads, "processes": transformer.processes}
