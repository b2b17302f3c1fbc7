"""The live screen's remedy actions: preview a remedy's diff in a dialog, apply it, revert
it, offer the run that verifies it. Files are read and written in thread workers; what the
session records is recorded on the loop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual import work

from ....hypotheses import RemedyApplication
from ....probes.remedies import RemedyPlan, preview
from ....sessions import (
    active_application,
    applied_file,
    find_remedy_file,
    record_remedy,
    remedy_inputs,
    restore_application,
    run_to_verify,
    verify_params,
    write_remedy,
)
from ...errors import ProbesError, SessionError
from ..dialogs import ConfirmDialog, RemedyDialog
from .browse import BrowseScreen

__all__ = ["RemedyActions"]


class RemedyActions(BrowseScreen):
    """The ``f`` key and the palette's remedy commands, for the live screen."""

    def start_probe(self, probe: str, extra: dict[str, Any] | None = None) -> None:
        raise NotImplementedError  # the live screen runs the verification

    def _code_dir(self) -> Path:
        target = self.app.target
        root = self.app.workspace.root
        return (root / target.code_local) if target.code_local else root

    def action_remedy(self, name: str | None = None) -> None:
        sel = self.selection
        remedy = name or (sel.id if sel.kind == "remedy" else None)
        hyp = sel.hypothesis
        if remedy is None and hyp in self.state.hypotheses:
            remedies = self.state.hypotheses[hyp].remedies
            step = self.step()
            remedy = (step.remedy if step else None) or (remedies[0] if remedies else None)
        if remedy is None:
            self.notify("select a remedy (✚) or a hypothesis that has one", severity="warning")
            return
        target = self.app.target
        if not target.is_local:
            self.notify(
                f"remedies on {target.name} go through the CLI for now: sleuth remedy apply {remedy} PATH --target {target.name}",
                severity="warning",
                timeout=10,
            )
            return
        # what the session knows is read here, on the loop; files are read in the worker
        shapes, note = remedy_inputs(self.state, remedy, target.name)
        self._prepare_remedy(remedy, hyp, applied_file(self.state, remedy), shapes, note)

    @work(thread=True, exclusive=True, group="remedy")
    def _prepare_remedy(self, remedy: str, hyp: str | None, applied: Path | None, shapes: list | None, note: str) -> None:
        path = applied or find_remedy_file(remedy, self._code_dir())
        if path is None:
            self.app.call_from_thread(
                self.notify, f"no file under {self._code_dir()} that {remedy} would change", severity="warning"
            )
            return
        try:
            plan = preview(remedy, path, shapes=shapes, source_note=note)
        except ProbesError as exc:
            self.app.call_from_thread(self.notify, str(exc), severity="error")
            return
        self.app.call_from_thread(self._offer_remedy, plan, hyp, applied is not None)

    def _offer_remedy(self, plan: RemedyPlan, hyp: str | None, active: bool) -> None:
        self.app.inv.record_preview(plan.remedy, plan.file.key, plan.before_sha, plan.after_sha, plan.blocked)
        path = Path(plan.path)
        root = self.app.workspace.root
        rel = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
        notes = [f"line {f['line']}: {f['what']}" for f in plan.findings]

        def chosen(what: str | None) -> None:
            if what == "apply":
                self._write_remedy(plan, hyp, rel)
            elif what == "revert":
                try:
                    app, _record = active_application(self.state, plan.file)
                except SessionError as exc:
                    self.notify(str(exc), severity="error")
                    return
                # the whole application, every file it changed (a lock on a tree is one), as the CLI does
                self._revert_remedy(self.state.applications[app])

        self.app.push_screen(RemedyDialog(plan.remedy, rel, plan.diff, notes, list(plan.blocked), active), chosen)

    @work(thread=True, exclusive=True, group="remedy")
    def _write_remedy(self, plan: RemedyPlan, hyp: str | None, rel: str) -> None:
        try:
            record = write_remedy(self.state, plan)
        except ProbesError as exc:
            self.app.call_from_thread(self.notify, str(exc), severity="error")
            return
        self.app.call_from_thread(self._remedy_written, plan, record, hyp, rel)

    def _remedy_written(self, plan: RemedyPlan, record: dict[str, Any] | None, hyp: str | None, rel: str) -> None:
        if record is None:
            self.notify(f"{rel}: {plan.remedy} was already there; nothing changed")
            return
        try:
            app = record_remedy(self.app.inv, plan, record, self.app.target, hyp)
        except SessionError as exc:
            self.notify(str(exc), severity="error")
            return
        self.refresh_all()
        self.notify(f"applied {plan.remedy} to {rel} (application #{app})")
        earlier = run_to_verify(self.state, self.app.target.name, plan.remedy)
        if earlier is None:
            return

        extra = verify_params(self.state, earlier)
        trials = f" with {extra['trials']} trials" if "trials" in extra else ""

        def rerun(yes: bool | None) -> None:
            if yes:
                self.start_probe(earlier.probe, extra)

        self.app.push_screen(
            ConfirmDialog("Verify", f"Re-run #{earlier.id} {earlier.probe}{trials} to verify the {plan.remedy}?", default=True),
            rerun,
        )

    @work(thread=True, exclusive=True, group="remedy")
    def _revert_remedy(self, application: RemedyApplication) -> None:
        """Every file of the application back to its original bytes, or none (files here, in
        the worker; the revert is recorded on the loop)."""
        try:
            restored = restore_application(application, self.app.target)
        except ProbesError as exc:  # a file edited since the apply: named, nothing touched
            self.app.call_from_thread(self.notify, str(exc), severity="error", timeout=15)
            return
        self.app.call_from_thread(self._remedy_reverted, application.id, restored)

    def _remedy_reverted(self, app: int, restored: list[str]) -> None:
        try:
            self.app.inv.record_revert(app)
        except SessionError as exc:
            self.notify(str(exc), severity="error")
            return
        root = str(self.app.workspace.root.resolve()) + "/"
        names = [k[len(root):] if k.startswith(root) else k for k in restored]
        files = names[0] if len(names) == 1 else f"{len(names)} files ({', '.join(names)})"
        self.notify(f"reverted application #{app}: {files} {'has' if len(names) == 1 else 'have'} the original bytes")
        self.refresh_all()
