"""The precompile remedy: before the program starts its worker threads, call the compiled
flex_attention once per shape / dtype / device / grad mode the workers will use, then
``torch.compiler.set_stance("fail_on_recompile")`` — no compile happens while workers run,
and a shape that was missed fails loudly instead of racing.

It addresses *concurrent compile* only: a thread that FX-traces while drafters call
compiled code trips the flag without any compile (concurrent FX trace needs the lock).
The shapes come from an ``fx-trace-state`` run (or are given): q/k/v sizes and strides,
dtypes, devices, grad mode, and the block mask (lengths, block size, mask_mod by name).
"""

from __future__ import annotations

from typing import Any, cast

import libcst as cst
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider, QualifiedNameProvider

from .common import COMPILE, FLEX, PARTIAL, PROCESSES, THREADS, Findings, after_imports, line_of, qualified, splice
from .files import CodeFile

__all__ = ["precompile_transform"]

CALL = "_sleuth_precompile"


def _compiled_names(source: str) -> list[str]:
    """Module-level names bound to torch.compile(flex_attention…) (wrapped or not)."""
    wrapper = MetadataWrapper(cst.parse_module(source))
    found: list[str] = []

    class Scan(cst.CSTVisitor):
        METADATA_DEPENDENCIES = (QualifiedNameProvider,)

        def visit_Assign(self, node: cst.Assign) -> None:
            value = node.value
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "_sleuth_serialized":
                value = value.args[0].value
            if not (isinstance(value, cst.Call) and qualified(self, value.func) & COMPILE and value.args):
                return
            first = value.args[0].value
            ok = bool(qualified(self, first) & FLEX) or (
                isinstance(first, cst.Call) and qualified(self, first.func) & PARTIAL and first.args
                and qualified(self, first.args[0].value) & FLEX
            )
            if ok:
                for t in node.targets:
                    if isinstance(t.target, cst.Name):
                        found.append(t.target.value)

    wrapper.visit(Scan())
    return found


def _names_in_module(file: CodeFile, modname: str) -> list[str]:
    """The compiled flex_attention names of module *modname*, found beside *file* or in a
    folder above it (``pkg.model`` from ``pkg/train.py``); none when it is not there."""
    relative = modname.replace(".", "/") + ".py"
    for up in range(modname.count(".") + 1):
        text = file.sibling("../" * up + relative).read_text()
        if text is not None:
            return _compiled_names(text)
    return []


def _helper(shapes: list[dict[str, Any]], flex_import: tuple[str, str], masks: dict[tuple[str, str], str], source_note: str) -> str:
    mod, name = flex_import
    lines = []
    imports = {}
    if mod:
        imports.setdefault(mod, []).append(f"{name} as _sleuth_flex")
    for (mmod, mname), alias in masks.items():
        if mmod and mmod != "__main__":
            imports.setdefault(mmod, []).append(f"{mname} as {alias}")
    for m, names in imports.items():
        lines.append(f"    from {m} import {', '.join(names)}")
    if not mod:
        lines.append(f"    _sleuth_flex = {name}")
    for (mmod, mname), alias in masks.items():
        if not mmod or mmod == "__main__":
            lines.append(f"    {alias} = {mname}")
    mask_map = "{" + ", ".join(f"{mname!r}: {alias}" for (_m, mname), alias in masks.items()) + "}"
    table = "[\n" + "".join(f"    {spec!r},\n" for spec in shapes) + "]"
    return f'''
# --- sleuth: precompile remedy ------------------------------------------------------------
# Compile every flex_attention shape the workers will use before they start, then make any
# further compile an error: no compile can run while workers call compiled code (and a
# shape missed here fails loudly instead of racing). {source_note}
# Added by sleuth; remove with `sleuth remedy revert`.
_SLEUTH_SHAPES = {table}


def {CALL}():
    import contextlib
    import sys
    import time

    import torch
    from torch.nn.attention.flex_attention import create_block_mask

    torch.compiler.set_stance("default")  # compiling is what we are here to do
    started = time.perf_counter()
{chr(10).join(lines)}
    masks = {mask_map}

    def tensor(spec):
        t = torch.empty_strided(spec["shape"], spec["stride"], dtype=getattr(torch, spec["dtype"]), device=spec["device"])
        return t.normal_().requires_grad_(spec["requires_grad"])

    for spec in _SLEUTH_SHAPES:
        bm = spec["block_mask"]
        mask = create_block_mask(
            masks[bm["mask_mod"]], bm["B"], bm["H"], bm["q_len"], bm["kv_len"],
            device=spec["q"]["device"], BLOCK_SIZE=tuple(bm["block_size"]),
        )
        amp = spec.get("autocast")  # the workers' thread-local state: grad mode and autocast
        autocast = torch.autocast(amp["device_type"], dtype=getattr(torch, amp["dtype"])) if amp else contextlib.nullcontext()
        with torch.set_grad_enabled(spec["grad"]), autocast:
            out = _sleuth_flex(tensor(spec["q"]), tensor(spec["k"]), tensor(spec["v"]), block_mask=mask)
            if spec["grad"] and out.requires_grad:
                out.sum().backward()
    torch.compiler.set_stance("fail_on_recompile")
    print(f"sleuth: precompiled {{len(_SLEUTH_SHAPES)}} flex_attention shape(s) in {{time.perf_counter() - started:.2f}} s", file=sys.stderr)


# --- end sleuth ---------------------------------------------------------------------------
'''


class _Insert(cst.CSTTransformer):
    METADATA_DEPENDENCIES = (QualifiedNameProvider, PositionProvider, ParentNodeProvider)

    def __init__(self, findings: Findings) -> None:
        super().__init__()
        self.found = findings
        self.target: cst.CSTNode | None = None  # the statement that starts the workers
        self.processes_line = 0
        self.already = False

    def visit_Call(self, node: cst.Call) -> None:
        q = qualified(self, node.func)
        if isinstance(node.func, cst.Name) and node.func.value == CALL:
            self.already = True
        if q & THREADS and self.target is None:
            stmt: cst.CSTNode = node
            parent = cast(cst.CSTNode, self.get_metadata(ParentNodeProvider, stmt))
            while not isinstance(parent, (cst.IndentedBlock, cst.Module)):
                stmt, parent = parent, cast(cst.CSTNode, self.get_metadata(ParentNodeProvider, parent))
            self.target = stmt
            self.found.add(line_of(self, node), f"workers start here ({sorted(q & THREADS)[0]}): precompile runs just before")
        if q & PROCESSES and not self.processes_line:
            self.processes_line = line_of(self, node)

    def _insert(self, body: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
        out = []
        for stmt in body:
            if stmt is self.target_updated:
                out.append(cst.parse_statement(f"{CALL}()  # sleuth: precompile before the workers start\n"))
            out.append(stmt)
        return out

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode):  # type: ignore[override]
        if original is self.target:
            self.target_updated = updated
        if isinstance(updated, cst.IndentedBlock) and getattr(self, "target_updated", None) in updated.body:
            return updated.with_changes(body=self._insert(list(updated.body)))
        if isinstance(updated, cst.Module) and getattr(self, "target_updated", None) in updated.body:
            return updated.with_changes(body=self._insert(list(updated.body)))
        return super().on_leave(original, updated)


def precompile_transform(source: str, file: CodeFile, shapes: list[dict[str, Any]], source_note: str = "") -> tuple[str, Findings, dict[str, int]]:
    findings = Findings()
    module = cst.parse_module(source)
    wrapper = MetadataWrapper(module)
    inserter = _Insert(findings)
    if "def _sleuth_precompile" in source:
        findings.add(0, "precompile is already in this module")
        return source, findings, {"changed": 0}
    if not shapes:
        findings.add(0, "no shapes to precompile: run the fx-trace-state probe first (or pass --shapes FILE)", handled=False,
                     nothing=not _compiled_names(source))
        return source, findings, {"changed": 0}
    # Which compiled function: where the recorded calls were compiled, else this module.
    site = {s.get("compiled", "").rpartition(":")[0] for s in shapes} - {""}
    flex_import: tuple[str, str] | None = None
    for modname in sorted(site) + ["__main__"]:
        if modname in ("__main__", file.path.stem):
            names = _compiled_names(source)
            if names:
                flex_import = ("", names[0])
                break
        else:
            names = _names_in_module(file, modname)
            if names:
                flex_import = (modname, names[0])
                break
    if flex_import is None:
        seen = f" (they were compiled at {', '.join(sorted({str(x.get('compiled')) for x in shapes if x.get('compiled')}))})" \
            if site else ""
        findings.add(0, "cannot find the module-level torch.compile(flex_attention) the recorded calls used" + seen, handled=False,
                     nothing=not _compiled_names(source))
        return source, findings, {"changed": 0}
    masks: dict[tuple[str, str], str] = {}
    for spec in shapes:
        bm = spec.get("block_mask")
        if not bm or not bm.get("mask_mod") or bm["mask_mod"] == "<lambda>":
            findings.add(0, "a recorded call has no named mask_mod (a lambda or no block mask): cannot rebuild its mask", handled=False)
            return source, findings, {"changed": 0}
        key = (bm.get("mask_module") or "", bm["mask_mod"])
        masks.setdefault(key, f"_sleuth_mask_{len(masks)}")
    new = wrapper.visit(inserter)
    if inserter.target is None:
        if inserter.processes_line:
            findings.add(
                inserter.processes_line,
                "workers here are processes: a precompile in the parent does not reach them, and they do not "
                "share the FX flag; precompile inside each worker instead",
                handled=False,
            )
        else:
            findings.add(0, "no threading.Thread / ThreadPoolExecutor start in this module: apply precompile to the file that starts the workers", handled=False)
        return source, findings, {"changed": 0}
    body = list(new.body)
    at = after_imports(body)
    where = f"the compiled function is {flex_import[0] + '.' if flex_import[0] else ''}{flex_import[1]}"
    findings.add(0, f"{len(shapes)} shape(s) to precompile; {where}")
    new = new.with_changes(body=splice(body, at, _helper(shapes, flex_import, masks, source_note)))
    return new.code, findings, {"changed": 1}
