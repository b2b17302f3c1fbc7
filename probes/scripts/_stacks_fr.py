"""The stacks probe's part that reads each rank's torch Flight Recorder: asked of sleuth's hook
where the rank registered it (a byte on its FIFO, no signal), else read from the dump its
watchdog left (plain data only), condensed to what sleuth reads; and the finding when the job
records nothing. Sent before probes/scripts/stacks.py (its PROBE says ``"parts"``) and run in
the same namespace; standard library only, Python 3.8+."""

import json
import os
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the prelude's helper part, the parts on /proc and the hook, in this namespace at the far end
    from ..far.common import emit
    from ._stacks_hook import hook_dir
    from ._stacks_proc import FR_ENV, HZ, read


class _PlainUnpickler:
    """torch's Flight Recorder dumps are pickles of plain dicts, lists, strings and numbers:
    anything that names a class or a function is refused (a dump file is never trusted)."""

    @staticmethod
    def load(data):
        import io
        import pickle

        class Plain(pickle.Unpickler):
            def find_class(self, module, name):
                raise pickle.UnpicklingError(f"{module}.{name} is not plain data")

        return Plain(io.BytesIO(data)).load()


def fr_dump_path(p):
    """Where torch writes this rank's Flight Recorder dump when its watchdog fires (a timeout
    with TORCH_NCCL_DUMP_ON_TIMEOUT=1): the prefix plus the rank."""
    env = p["env"] or {}
    if p.get("rank") in (None, ""):
        return None
    prefix = env.get("TORCH_FR_DUMP_TEMP_FILE") or env.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE") or "/tmp/nccl_trace_rank_"
    return prefix + str(p["rank"])


def started_at(pid):
    """When the process started (seconds since the epoch), from /proc."""
    text = read(f"/proc/{pid}/stat")
    uptime = read("/proc/uptime")
    if not text or not uptime:
        return None
    ticks = int(text.rsplit(")", 1)[1].split()[19])
    return time.time() - float(uptime.split()[0]) + ticks / float(HZ)


def fr_condense(raw, source, path):
    """The parts of a dump sleuth reads: per group its last enqueued and completed collective,
    and the last entries (group, number, op, sizes, finished)."""
    if isinstance(raw, dict) and isinstance(raw.get("recorders"), dict):  # the hook's: NCCL's and the CPU one
        parts = [fr_condense(r, source, path) for r in raw["recorders"].values()]
        read = [p for p in parts if not p.get("error")]
        if not read:
            errors = "; ".join(p["error"] for p in parts) or "this torch has no Flight Recorder"
            return {"source": source, "path": path, "error": errors}
        status = {}
        for part in read:
            for pg, st in part["pg_status"].items():
                mine = status.setdefault(pg, {})
                for k, v in st.items():
                    mine[k] = max(mine.get(k, v), v)
        return {"source": source, "path": path, "version": read[0].get("version"), "pg_status": status,
                "entries": [e for part in read for e in part["entries"]]}
    if not isinstance(raw, dict):
        return {"source": source, "path": path, "error": "not a Flight Recorder dump"}
    if raw.get("error"):
        return {"source": source, "path": path, "error": str(raw["error"])}
    entries = []
    for e in (raw.get("entries") or [])[-64:]:
        if not isinstance(e, dict):
            continue
        pg = e.get("process_group") or ["?", "?"]
        entries.append({"pg": str(pg[0]), "pg_name": str(pg[1]) if len(pg) > 1 else "", "seq": e.get("collective_seq_id"),
                        "p2p_seq": e.get("p2p_seq_id"), "p2p": bool(e.get("is_p2p")), "op": e.get("profiling_name"),
                        "sizes": e.get("input_sizes"), "state": e.get("state"), "retired": e.get("retired"),
                        "record": e.get("record_id")})
    status = {}
    for pg, st in (raw.get("pg_status") or {}).items():
        if isinstance(st, dict):
            status[str(pg)] = {k: int(v) for k, v in st.items() if str(v).lstrip("-").isdigit()}
    return {"source": source, "path": path, "version": raw.get("version"), "pg_status": status, "entries": entries}


def flight_recorders(procs, timeout):
    """Each rank's Flight Recorder: asked of the hook where the rank registered it (a byte on its
    FIFO; no signal), else read from the dump its watchdog left. {pid: condensed or None}."""
    out = {}  # type: dict
    for p in procs:
        out[p["pid"]] = None
    asked = {}
    for p in procs:
        fifo = os.path.join(hook_dir(p["env"]), f"fr-{p['pid']}.fifo")
        answer = fifo[:-len(".fifo")] + ".json"
        if os.path.exists(fifo):
            try:
                if os.path.exists(answer):
                    os.unlink(answer)
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO: nobody listens (not this process)
                try:
                    os.write(fd, b"1")
                finally:
                    os.close(fd)
                asked[p["pid"]] = answer
                continue
            except OSError as exc:
                out[p["pid"]] = {"source": "hook", "path": fifo, "error": f"the hook did not listen: {exc.strerror}"}
        path = fr_dump_path(p)
        born = started_at(p["pid"])
        if path and os.path.isfile(path):
            try:
                if born is not None and os.path.getmtime(path) < born:
                    out[p["pid"]] = {"source": "dump", "path": path, "error": "the dump there is older than the process"}
                    continue
                with open(path, "rb") as f:
                    data = f.read()
                raw = json.loads(data) if data[:1] == b"{" else _PlainUnpickler.load(data)
                out[p["pid"]] = fr_condense(raw, "dump", path)
            except Exception as exc:
                out[p["pid"]] = {"source": "dump", "path": path, "error": f"{type(exc).__name__}: {exc}"}
    deadline = time.time() + timeout
    while asked and time.time() < deadline:
        for pid, answer in list(asked.items()):
            if os.path.exists(answer):
                try:
                    with open(answer, "rb") as f:
                        out[pid] = fr_condense(json.loads(f.read() or b"null"), "hook", answer)
                except (OSError, ValueError) as exc:
                    out[pid] = {"source": "hook", "path": answer, "error": f"unreadable answer: {exc}"}
                del asked[pid]
        time.sleep(0.01)
    for pid, answer in asked.items():
        out[pid] = {"source": "hook", "path": answer, "error": f"no answer from the hook within {timeout:.1f} s"}
    return out


def say_flight_recorder_off(procs, recorders):
    recording = [p for p in procs if any((p["env"] or {}).get(k.decode()) not in (None, "", "0") for k in FR_ENV[:2])]
    if procs and recorders and not recording and not any(recorders.values()):
        emit("finding", finding="flight-recorder-off", text="torch's Flight Recorder is off in this job (no "
             "TORCH_FR_BUFFER_SIZE): only stacks say which collective each rank waits in",
             fix="start the job with `sleuth probe run --shell CMD --hook` (it sets TORCH_FR_BUFFER_SIZE=2000), or "
                 "set TORCH_FR_BUFFER_SIZE=2000 (and TORCH_NCCL_DUMP_ON_TIMEOUT=1 for NCCL dumps on timeout) yourself")
