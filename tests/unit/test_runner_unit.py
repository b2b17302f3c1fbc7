"""The runner, classification and `sessions.run_probe` over the in-memory MockTransport.

No process and no sshd: the far end is a function that answers the program it is sent, so
each way a run can end is produced exactly and checked for what a user reads — the
classification, the reason, the records, the stored output, the evidence and the flags.
The same paths against real processes and a real sshd: test_transport.py, test_agent.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sleuth.probes import HopChain, MockTransport, ProgramSpec, Reply, Target, execute, probe_reply
from sleuth.probes.catalog import builtin_probes
from sleuth.sessions import CircularRetest, request_for_probe, request_for_shell, run_probe
from support.cli import verdicts
from support.sessions import env_state

LOCAL = Target(name="local")
REMOTE = Target(name="ct200", ssh="gpu", jump=("bastion",))
SPEC = ProgramSpec(probe="unit", source="emit('result', x=1)")


class Sink:
    def __init__(self) -> None:
        self.data: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}

    def write(self, stream: str, data: bytes) -> None:
        self.data[stream].extend(data)

    def flush(self) -> None:
        pass


def run(transport: MockTransport, target: Target = LOCAL, spec: ProgramSpec = SPEC, **kw: Any):
    sink = Sink()
    outcome = asyncio.run(execute(target, spec, sink, runner=transport, **kw))
    return outcome, sink


def test_completed_with_records_output_and_line_counts():
    transport = MockTransport(lambda chain, stdin: probe_reply(
        stdin, [{"kind": "result", "x": 1}], stdout=b"hello\nworld\n", stderr=b"warn\n", state=env_state()))
    outcome, sink = run(transport)
    assert outcome.classification == "completed", outcome.reason
    assert outcome.records == [{"kind": "result", "x": 1}, {"kind": "done"}]
    assert outcome.state == env_state()  # the state record is kept apart from the others
    assert bytes(sink.data["stdout"]).startswith(b"hello\nworld\n@@sleuth:")
    assert outcome.lines == {"stdout": 5, "stderr": 1}  # 2 lines + state, result, done records
    (chain, stdin), = transport.calls
    assert chain.far_argv[-1] == "-" and b"_sleuth_main(" in stdin  # the program went on stdin


def test_failed_when_the_probe_reports_an_error():
    transport = MockTransport(lambda chain, stdin: probe_reply(
        stdin, [{"kind": "error", "type": "RuntimeError", "message": "Detected that you are using FX"}],
        stderr=b"Traceback (most recent call last):\n", exit_status=1))
    outcome, _ = run(transport)
    assert outcome.classification == "failed"
    assert "raised RuntimeError: Detected that you are using FX" in outcome.reason


def test_killed_by_a_signal_names_it_and_the_oom_killer():
    transport = MockTransport(lambda chain, stdin: Reply(stdout=[b"loading\n"], exit_status=137, signal="KILL"))
    outcome, _ = run(transport)
    assert outcome.classification == "killed"
    assert "SIGKILL" in outcome.reason and "OOM killer" in outcome.reason and "last stdout: loading" in outcome.reason


def test_timed_out_kills_the_far_end():
    transport = MockTransport(lambda chain, stdin: Reply(stdout=[b"compiling\n"], hang=True))
    outcome, sink = run(transport, timeout=0.2)
    assert outcome.classification == "timed_out"
    assert "no end after 0.2 s" in outcome.reason
    assert len(transport.killed) == 1 and bytes(sink.data["stdout"]) == b"compiling\n"


def test_cancel_kills_and_is_classified_killed():
    transport = MockTransport(lambda chain, stdin: Reply(hang=True))

    async def go():
        cancel = asyncio.Event()
        asyncio.get_running_loop().call_later(0.1, cancel.set)
        return await execute(LOCAL, SPEC, Sink(), runner=transport, cancel=cancel, timeout=30)

    outcome = asyncio.run(go())
    assert outcome.classification == "killed" and "cancelled" in outcome.reason
    assert len(transport.killed) == 1


def test_no_result_when_it_exits_without_a_done_record():
    transport = MockTransport(lambda chain, stdin: probe_reply(stdin, [{"kind": "result", "x": 1}], done=False))
    outcome, _ = run(transport)
    assert outcome.classification == "no_result"
    assert "without a done record" in outcome.reason and "records: result" in outcome.reason


def test_a_lost_connection_is_transport_and_keeps_no_state():
    def lost(chain: HopChain, stdin: bytes) -> Reply:
        reply = probe_reply(stdin, [{"kind": "result", "x": 1}], done=False, state=env_state())
        reply.lost = "hop 2 (ssh gpu): the connection was lost after 1.0 s"
        return reply

    outcome, _ = run(MockTransport(lost), target=REMOTE)
    assert outcome.classification == "transport"
    assert outcome.reason.startswith("hop 2 (ssh gpu): the connection was lost")
    assert "nothing the probe did is evidence" in outcome.reason
    assert outcome.failed_hop == 2 and outcome.state is None


def test_a_hop_that_cannot_be_reached_is_transport_naming_it():
    from sleuth.probes import Transport, TransportError

    class Unreachable(Transport):
        async def start(self, chain, *, fork=False):
            raise TransportError("hop 1 (ssh bastion jump): connection refused", 1)

    outcome = asyncio.run(execute(REMOTE, SPEC, Sink(), runner=Unreachable()))
    assert outcome.classification == "transport" and outcome.failed_hop == 1
    assert "hop 1 (ssh bastion jump): connection refused" in outcome.reason


def test_records_split_across_chunks_are_found():
    def chunky(chain, stdin):
        whole = probe_reply(stdin, [{"kind": "result", "x": 7}], stdout=b"x" * 100 + b"\n").stdout[0]
        return Reply(stdout=[whole[i : i + 7] for i in range(0, len(whole), 7)])

    outcome, sink = run(MockTransport(chunky))
    assert outcome.classification == "completed"
    assert {"kind": "result", "x": 7} in outcome.records


@settings(max_examples=200, deadline=None)
@given(cuts=st.lists(st.integers(1, 400), min_size=0, max_size=12), prefix=st.sampled_from([b"", b"noise ", b"@@sleu"]))
def test_the_record_parser_finds_the_same_records_however_the_stream_is_cut(cuts, prefix):
    """Records (and a marker split anywhere, even inside it) come out the same for any chunking."""
    from sleuth.probes.protocol import RecordParser

    marker = b"@@sleuth:n0nce "
    stream = (b"plain output line\n" + prefix + marker + b'{"kind": "log", "i": 1}\n' + b"x" * 90 + b"\n"
              + marker + b'{"kind": "result", "ok": true}\n' + b"@@sleuth:other {}\n" + marker + b'{"kind": "done"}')
    parser = RecordParser("n0nce")
    at = 0
    for cut in sorted(set(cuts)):
        parser.feed(stream[at:cut])
        at = max(at, cut)
    parser.feed(stream[at:])
    parser.finish()
    assert parser.kinds() == ["log", "result", "done"]


# ------------------------------------------------------------------ run_probe: evidence and flags

def fingerprint_reply(torch: str = "2.11.0+cu128", **dists: str):
    """A far end whose env-fingerprint reports *torch* and *dists*, and a state to match."""
    def handler(chain, stdin):
        distributions = {"torch": torch, **dists}
        result = {"kind": "result", "fingerprint": {"python": "3.11.7", "torch.cuda": torch.rpartition("+cu")[2] or None,
                                                    "distributions": distributions},
                  "distributions": distributions, "torch": torch}
        return probe_reply(stdin, [result], state=env_state(torch=torch, distributions=distributions))
    return MockTransport(handler)


def fingerprint(inv, transport, **kw):
    probe = builtin_probes()["env-fingerprint"]
    return asyncio.run(run_probe(inv, LOCAL, request_for_probe(inv, probe, LOCAL, {}), runner=transport, **kw))


def test_run_probe_names_the_drift_from_the_baseline_and_records_evidence(inv):
    first = fingerprint(inv, fingerprint_reply())
    assert [e.verdict for e in inv.state.verdicts_for(first.run)] == ["inconclusive"]  # no baseline yet
    inv.mark_baseline(first.run)
    report = fingerprint(inv, fingerprint_reply("2.11.0+cu130", numpy="2.1.0"))
    info = inv.state.runs[report.run]
    assert info.classification == "completed" and info.state_key
    data = report.to_json(inv)
    assert verdicts(data) == [{"hypothesis": "version-drift", "verdict": "supports"}]
    (result,) = [r for r in data["records"] if r["kind"] == "result"]
    assert result["has_baseline"] is True and result["drift"] == 3
    assert result["changes"] == [
        {"name": "torch", "before": "2.11.0+cu128", "after": "2.11.0+cu130"},
        {"name": "torch.cuda", "before": "128", "after": "130"},
        {"name": "numpy", "before": None, "after": "2.1.0"},
    ]
    assert inv.state.status("version-drift") == "supported"
    assert b'"torch": "2.11.0+cu130"' in inv.store.output_bytes(report.run, "stdout")  # the output is in the store


def test_run_probe_refuses_a_circular_retest_then_records_a_forced_one(inv):
    first = fingerprint(inv, fingerprint_reply())
    inv.mark_baseline(first.run)
    second = fingerprint(inv, fingerprint_reply())  # the baseline is part of the question: not a retest of #1
    with pytest.raises(CircularRetest) as flag:
        fingerprint(inv, fingerprint_reply())
    assert flag.value.check.retest_of.id == second.run and flag.value.check.measured
    assert f"this repeats #{second.run}" in str(flag.value) and "measured just now: same torch 2.11.0+cu128" in str(flag.value)
    assert len(inv.state.runs) == 2  # declined: nothing ran
    forced = fingerprint(inv, fingerprint_reply(), force=True)
    assert inv.state.runs[forced.run].retest_of == second.run
    # the repeat, and the refuted version-drift asked again in the state that refuted it
    assert [(f.kind, f.run, f.earlier or f.hypothesis) for f in inv.state.flags] == [
        ("circular-retest", forced.run, second.run), ("revisit", forced.run, "version-drift")]


def test_a_state_that_cannot_be_read_flags_nothing(inv):
    fingerprint(inv, fingerprint_reply())
    calls = []

    def flaky(chain, stdin):
        calls.append(stdin)
        if len(calls) == 1:  # the state read: the connection drops
            return Reply(lost="hop 1: the agent went away after 0.1 s")
        return fingerprint_reply().handler(chain, stdin)

    report = fingerprint(inv, MockTransport(flaky))
    assert inv.state.runs[report.run].retest_of is None and not inv.state.flags
    assert b'"mode": "state"' in calls[0]  # the first call read the state, nothing else


def test_a_transport_failure_records_no_evidence(inv):
    def lost(chain, stdin):
        return Reply(lost="hop 1: the agent went away after 0.5 s")

    report = fingerprint(inv, MockTransport(lost))  # the state read fails too: unknown, no flag
    assert inv.state.runs[report.run].classification == "transport"
    assert report.to_json(inv)["evidence"] == []
    assert inv.state.status("version-drift") == "open"


def test_a_shell_run_through_the_fake_keeps_every_byte(inv):
    big = b"".join(b"line %d\n" % i for i in range(5000))
    transport = MockTransport(lambda chain, stdin: Reply(stdout=[big[:30000], big[30000:]], exit_status=0))
    report = asyncio.run(run_probe(inv, LOCAL, request_for_shell("pip list | tail -20"), runner=transport))
    assert inv.state.runs[report.run].classification == "completed"
    assert inv.store.output_bytes(report.run, "stdout") == big
    assert inv.store.line_count(report.run) == 5000
