"""What `sleuth mcp` answers, apart from how it serves: each tool's answer as a typed dict (the
SDK derives the tool's outputSchema from these, so a client sees every field described), the
answers every tool family builds (a run's, the state one speaks of), and the text block a model
reads beside structuredContent (:func:`render`: the sentences and the excerpt's lines, each
field once, never a second JSON copy). The tools (runs.py, investigation.py, remedies.py) fill
these in."""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import ConfigDict, Field, with_config
from typing_extensions import TypedDict

from ...hypotheses.stored import StateRead
from ...sessions import Investigation
from ..excerpt import DEFAULT_BUDGET, excerpt
from ..timeline import run_changes, run_findings

__all__ = ["Events", "Hypotheses", "Known", "OutputPage", "PageLine", "Remedy", "RunAnswer", "StateSaid", "Status",
           "Written", "bounded_records", "render", "run_answer", "state_said"]


# ---------------------------------------------------------------- what a client is told

# Each tool's answer, typed: the SDK derives the tool's outputSchema from these (and checks
# each answer against it), so a client sees every field described. Extra fields stay allowed:
# a probe's report carries fields of its own.

_OPEN = ConfigDict(extra="allow")
D = Field  # short: every field below says what it is


@with_config(_OPEN)
class StateSaid(TypedDict, total=False):
    """The state an answer speaks of."""

    target: Annotated[str, D(description="the target this state is of")]
    as_of_event: Annotated[int, D(description="the session's last event when the answer was made")]
    known: Annotated[bool, D(description="whether the target's state has been read (false: never read, or a shell "
                                         "command ran since)")]
    key: Annotated[Any, D(description="the state's key: the same key is the same measured state")]
    versions: Annotated[Any, D(description="python, torch, triton as read")]
    remedies_active: Annotated[list[Any], D(description="remedies applied on the target now ('lock #3')")]
    said: Annotated[str, D(description="the state in words")]


@with_config(_OPEN)
class RunAnswer(TypedDict, total=False):
    """A run as an agent reads it; or, when `refused` is set, the refusal of a repeated check with the
    earlier run's answer in `earlier`; or, for a fleet target, one answer per member in `answers`."""

    run_id: Annotated[int, D(description="the run's id: run_output(run_id=…) reads its whole output")]
    probe: Annotated[str | None, D(description="the probe run ('shell' for a shell command)")]
    target: Annotated[str, D(description="where it ran")]
    classification: Annotated[str | None, D(description="how it ended: completed, failed, timeout, …")]
    reason: Annotated[str | None, D(description="why it ended so, in words")]
    command: Annotated[str, D(description="the shell command, as sent")]
    params: Annotated[Any, D(description="the probe's parameters")]
    evidence: Annotated[list[Any], D(description="what the run means for each hypothesis: verdict and why")]
    findings: Annotated[Any, D(description="what the run found, in words")]
    flags: Annotated[list[Any], D(description="flags raised on the run (circular-retest, oscillation, …)")]
    records: Annotated[list[Any], D(description="the probe's records (its data), bounded")]
    records_left_out: Annotated[str, D(description="which record fields were too big for the answer, and where "
                                                   "they are whole")]
    lines: Annotated[Any, D(description="the run's line counts per stream")]
    bytes: Annotated[int, D(description="the run's output bytes")]
    retest_of: Annotated[Any, D(description="the earlier run this one repeats, if any")]
    state_changes: Annotated[Any, D(description="what changed since the last run of this same check "
                                                "(caches and code included)")]
    verified: Annotated[list[Any], D(description="remedies this run verified")]
    by: Annotated[str, D(description="who ran it: ui, cli, mcp:<client>")]
    output: Annotated[dict[str, Any], D(description="a bounded excerpt of the output: `lines` (each with its number "
                                                    "`n`, or a gap said with `omitted` and `count`), `left_out`, "
                                                    "`read_more`")]
    state: Annotated[StateSaid, D(description="the state the run ran in")]
    forced_because: Annotated[str, D(description="the reason given with force=true")]
    samples: Annotated[dict[str, Any], D(description="sample=true: this command's samples in this state pooled: "
                                                     "`runs`, `failed`, `ids`, `interval` (95%), `said`")]
    refused: Annotated[str, D(description="set when the call was refused: 'circular-retest'")]
    message: Annotated[str, D(description="the refusal in words")]
    earlier_run: Annotated[int | None, D(description="the run this call would have repeated")]
    earlier: Annotated[dict[str, Any], D(description="the earlier run's answer")]
    how_to_run_anyway: Annotated[str, D(description="what to change, or force=true with a reason")]
    fleet: Annotated[str, D(description="the fleet target run on")]
    members: Annotated[list[str], D(description="the fleet's members")]
    runs: Annotated[dict[str, int], D(description="each member's run id")]
    not_run_again: Annotated[dict[str, Any], D(description="members in the same state as their earlier run")]
    headline: Annotated[str | None, D(description="the fleet's comparison in one line")]
    sentences: Annotated[list[str], D(description="how the members differ")]
    answers: Annotated[dict[str, Any], D(description="each member's run answer")]
    reading: Annotated[dict[str, Any], D(description="stacks only: verdict, sentences, odd_ranks")]


@with_config(_OPEN)
class PageLine(TypedDict, total=False):
    """One line of a run's output."""

    n: Annotated[int, D(description="its 1-based number (over both streams, or over `stream` when one is asked)")]
    stream: Annotated[str, D(description="stdout or stderr")]
    text: Annotated[str, D(description="its text, without the newline")]
    utf8: Annotated[bool, D(description="false when the line's bytes are not UTF-8 (then `text` shows them with "
                                        "U+FFFD and `base64` holds them exactly)")]
    base64: Annotated[str, D(description="the line's exact bytes, base64, when they are not UTF-8")]
    newline: Annotated[bool, D(description="false for a last line the command ended without a newline")]


OutputPage = with_config(_OPEN)(TypedDict("OutputPage", {
    "run": Annotated[int, D(description="the run read (the same as run_id)")],
    "run_id": Annotated[int, D(description="the run read")],
    "lines_total": Annotated[int, D(description="the run's lines (of `stream`, or of both)")],
    "stream": Annotated[str, D(description="stdout, stderr or both")],
    "state": Annotated[dict[str, Any], D(description="the state the run ran in")],
    "from": Annotated[int, D(description="the first line asked for")],
    "lines": Annotated[list[PageLine], D(description="the page's lines")],
    "complete": Annotated[bool, D(description="false while the run still writes")],
    "next_start": Annotated[int | None, D(description="where the next page starts (null: no more)")],
    "grep": Annotated[str, D(description="the regex the lines matched")],
    "matched": Annotated[int, D(description="how many lines matched from `from` on")],
    "not_utf8": Annotated[int, D(description="how many lines on the page are not UTF-8 (see each line's base64)")],
    "said": Annotated[str, D(description="the page in words")],
}, total=False))


@with_config(_OPEN)
class Status(TypedDict, total=False):
    """The investigation in brief."""

    session: Annotated[str, D(description="the session's file")]
    title: Annotated[str, D(description="the investigation's title")]
    events: Annotated[int, D(description="events so far")]
    runs: Annotated[int, D(description="runs so far")]
    symptoms: Annotated[list[dict[str, Any]], D(description="symptoms recorded (id, title)")]
    hypotheses: Annotated[list[dict[str, Any]], D(description="each hypothesis's id, status and evidence counts")]
    flags: Annotated[list[dict[str, Any]], D(description="the last flags raised")]
    next_step: Annotated[dict[str, Any], D(description="the one suggested next step: action, said, probe, remedy")]
    probes: Annotated[dict[str, str], D(description="the built-in probes: id → title")]
    targets: Annotated[list[str], D(description="the targets of sleuth.toml")]
    state: Annotated[StateSaid, D(description="the state of `target`")]


@with_config(_OPEN)
class Hypotheses(TypedDict, total=False):
    """Every hypothesis."""

    hypotheses: Annotated[list[dict[str, Any]], D(description="each hypothesis: status, evidence, probes, remedies, "
                                                              "known issues, refinements")]
    as_of_event: Annotated[int, D(description="the session's last event")]


@with_config(_OPEN)
class Events(TypedDict, total=False):
    """A page of the event log."""

    events: Annotated[list[dict[str, Any]], D(description="each event: seq, ts, kind, by (who wrote it), said")]
    last_event: Annotated[int, D(description="the session's last event")]
    more: Annotated[bool, D(description="whether events past this page exist")]


@with_config(_OPEN)
class Written(TypedDict, total=False):
    """What was written to the investigation."""

    event: Annotated[int, D(description="the event it was written as")]
    noted: Annotated[str, D(description="note: the text noted")]
    about: Annotated[str | None, D(description="note: what it is about")]
    added: Annotated[str, D(description="the id added")]
    title: Annotated[str, D(description="its title")]
    status: Annotated[str, D(description="hypothesis_add: its derived status")]
    explained_by: Annotated[list[str], D(description="symptom_add: the hypotheses that explain it")]
    hypotheses_joined: Annotated[list[str], D(description="symptom_add: the catalog's hypotheses that joined")]
    linked: Annotated[list[str], D(description="link: [src, kind, dst]")]
    baseline: Annotated[int, D(description="baseline: the run marked")]
    target: Annotated[str, D(description="baseline: the run's target")]


@with_config(_OPEN)
class Known(TypedDict, total=False):
    """Known upstream issues."""

    target: Annotated[str, D(description="the target whose versions were read")]
    distributions_read: Annotated[int, D(description="installed distributions read on it")]
    applies: Annotated[list[dict[str, Any]], D(description="the issues that apply, with what this session measured of "
                                                           "each fix")]
    catalog: Annotated[list[dict[str, Any]], D(description="all=true: the whole catalog")]


@with_config(_OPEN)
class Remedy(TypedDict, total=False):
    """A remedy's plan, application or revert."""

    remedy: Annotated[str, D(description="the remedy (lock, precompile)")]
    path: Annotated[str, D(description="the file or code tree")]
    diff: Annotated[str, D(description="the unified diff it makes")]
    applicable: Annotated[bool, D(description="preview: whether it can apply as it stands")]
    blocked: Annotated[list[Any], D(description="preview: why it cannot apply")]
    installed: Annotated[list[Any], D(description="preview: files of installed packages it would change")]
    applied: Annotated[bool, D(description="apply: whether anything changed")]
    application: Annotated[int | None, D(description="apply: the application's id")]
    installed_packages: Annotated[list[Any], D(description="apply: installed packages changed")]
    reverted: Annotated[int, D(description="revert: the application undone")]
    files: Annotated[Any, D(description="the files involved")]
    said: Annotated[str, D(description="what was done, in words")]


# ---------------------------------------------------------------- the text block


def _compact(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(", ", ": "),
                                                            default=str)


def _fields(data: dict[str, Any], skip: tuple[str, ...] = ()) -> list[str]:
    """Every field not said otherwise, one line each: nothing of the data is only in the JSON."""
    return [f"{k}: {_compact(v)}" for k, v in data.items() if k not in skip and v not in (None, [], {}, "")]


def _line(item: dict[str, Any], stream: bool = True) -> str:
    mark = " stderr" if stream and item.get("stream") == "stderr" else ""
    text = f"{item['n']}{mark}: {item['text']}"
    if item.get("utf8") is False:
        text += "  [not UTF-8: shown with U+FFFD; the exact bytes are this line's base64 in structuredContent]"
    return text


def _excerpt_text(out: dict[str, Any]) -> list[str]:
    said = [f"output: {out.get('lines_total', 0):,} lines; {out.get('lines_shown', 0):,} shown"
            + (f", {out['left_out']:,} left out (none is lost)" if out.get("left_out") else "")]
    for item in out.get("lines") or []:
        if "n" in item:
            said.append(_line(item))
        elif "omitted" in item:
            a, b = item["omitted"]
            folds = f": {'; '.join(item['folds'])}" if item.get("folds") else ""
            said.append(f"… lines {a:,}–{b:,} left out ({item['count']:,}){folds}")
    if out.get("not_utf8"):
        said.append(out["not_utf8"])
    if out.get("read_more"):
        said.append(out["read_more"])
    return said


def _run_text(data: dict[str, Any]) -> list[str]:
    what = f"`{data['command']}`" if "command" in data else data.get("probe")
    head = f"run #{data.get('run_id')} {what} on {data.get('target')}: {data.get('classification')}"
    if data.get("reason"):
        head += f" — {data['reason']}"
    said = [head]
    said += _fields(data, ("run_id", "probe", "command", "target", "classification", "reason", "output"))
    if isinstance(data.get("output"), dict):
        said += _excerpt_text(data["output"])
    return said


def render(tool: str, data: dict[str, Any]) -> str:
    """What a model reads of an answer: the sentences and the excerpt's lines, each field once,
    no JSON pretty-printed (structuredContent holds the data)."""
    said: list[str]
    if tool in ("probe_run", "stacks"):
        if "refused" in data:
            said = [f"refused ({data['refused']}): {data.get('message')}", str(data.get("how_to_run_anyway", ""))]
            said += _fields(data, ("refused", "message", "how_to_run_anyway", "earlier"))
            if isinstance(data.get("earlier"), dict):
                said += ["the earlier run's answer:", *_run_text(data["earlier"])]
        elif "fleet" in data:
            said = [f"fleet {data['fleet']}: {data.get('headline') or ''}".rstrip()]
            said += _fields(data, ("fleet", "headline", "answers"))
            for member, ans in (data.get("answers") or {}).items():
                said += [f"— {member}:", *_run_text(ans)]
        else:
            said = _run_text(data)
    elif tool == "run_output":
        said = [f"run #{data.get('run')}: {data.get('said', '')}"]
        said += _fields(data, ("run", "run_id", "said", "lines", "lines_total", "from", "next_start"))
        both = data.get("stream") == "both"
        said += [_line(item, both) for item in data.get("lines") or []]
    elif tool == "events":
        said = [f"#{e['seq']} {e['kind']} by {e.get('by') or '?'}: {e.get('said', '')}" for e in data.get("events") or []]
        said += _fields(data, ("events",))
    else:
        said = _fields(data)
    return "\n".join(said) + "\n"


# ---------------------------------------------------------------- the answers the tools share


def state_said(inv: Investigation, target: str) -> dict[str, Any]:
    """The state an answer speaks of: *target*'s last known state (its key, the run or read
    that told it, the versions in it) and the session's last event. "unknown" when a shell
    command may have changed anything since, or nothing was read yet."""
    st = inv.state
    out: dict[str, Any] = {"target": target, "as_of_event": st.last_seq}
    known = st.known_state(target)
    if known is None:
        out["known"] = False
        out["said"] = (f"the state of {target} is unknown (never read, or a shell command ran since): "
                       "the next probe_run reads it before it runs")
        return out
    state, _parts = known
    read = StateRead.from_dict(state)
    versions = {"python": read.python, "torch": read.torch_version, "triton": read.distributions.get("triton")}
    out.update({"known": True, "key": st.expected_state(target),
                "versions": {k: v for k, v in versions.items() if v},
                "remedies_active": [f"{a.remedy} #{a.id}" for a in st.applications.values()
                                    if a.active and a.target == target],
                "said": f"as last read of {target} (event {st.known_state_seq(target) or st.last_seq})"})
    return out


def run_answer(inv: Investigation, run: int, *, budget: int = DEFAULT_BUDGET, grep: str | None = None,
               report: Any = None) -> dict[str, Any]:
    """A run as an agent reads it: what it was, how it ended, what it means, and the output
    that matters within *budget* bytes."""
    st = inv.state
    info = st.runs[run]
    summary = inv.store.output_summary(run)
    data: dict[str, Any] = report.to_json(inv) if report is not None else {
        "run_id": run, "probe": info.probe, "target": info.target, "classification": info.classification,
        "reason": info.reason, "records": info.records, "state_key": info.state_key, "lines": summary["lines"],
        "bytes": summary["bytes"], "retest_of": info.retest_of,
        "evidence": [{"hypothesis": e.hypothesis, "verdict": e.verdict, "why": e.why()} for e in st.verdict_per_hypothesis(run)],
    }
    data.pop("output", None)  # a path on this machine: run_output reads it
    data["lines"] = summary["lines"]  # the store's count: a last line without a newline is a line, as shown
    if info.kind == "shell":
        data["command"] = info.params.get("cmd", "")
    elif info.params:
        data["params"] = info.params
    data["findings"] = run_findings(st, run)
    data.update(run_changes(st, run))
    data["flags"] = [{"flag": f.kind, "message": f.message, **({"earlier": f.earlier} if f.earlier else {})}
                     for f in st.flags if f.run == run]
    data["verified"] = list(st.verified_by(run))
    data["by"] = st.author(info.started_seq)
    data["records"], left = bounded_records(data.get("records") or [], run)
    if left:
        data["records_left_out"] = left
    data["output"] = excerpt(inv.store, run, budget, grep)
    return data


RECORDS_BUDGET = 48_000  # bytes of the records' JSON an answer carries whole
FIELD_CAP = 2_000  # past the budget: a record keeps its fields up to this size each


def bounded_records(records: list[dict[str, Any]], run: int) -> tuple[list[dict[str, Any]], str | None]:
    """The run's records, whole when they fit :data:`RECORDS_BUDGET`; else each record keeps
    its small fields (the verdict, the sentences, the counts) and names the ones left out —
    a stacks reading of 64 ranks is hundreds of KB of frames. Never silently: the words say
    which fields of which record went, and where they are whole."""
    size = len(json.dumps(records, default=str))
    if size <= RECORDS_BUDGET:
        return records, None
    out, dropped = [], []
    for rec in records:
        kept: dict[str, Any] = {}
        gone = []
        for key, value in rec.items():
            if len(json.dumps(value, default=str)) <= FIELD_CAP or key == "kind":
                kept[key] = value
            else:
                gone.append(key)
        if gone:
            kept["left_out"] = gone
            dropped.append(f"{rec.get('kind', 'record')}: {', '.join(gone)}")
        out.append(kept)
    return out, (f"the records are {size:,} bytes of JSON: left out of this answer — {'; '.join(dropped)}; "
                 f"every record is whole in the stored output: run_output(run={run}, grep='^@@sleuth:')")
