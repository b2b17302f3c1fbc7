"""Probes on a real target: OpenSSH sshd on 127.0.0.1, a jump host, a pct hop, a venv.

Every classification is produced for real here: a probe that completes, raises, is killed
by a signal, runs past its timeout, loses its sshd mid-run, meets a refused port or a wrong
host key, or exits without reporting.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import time
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sleuth.probes import HopChain, SshPool, execute, run_chain
from sleuth.sessions import Investigation, Redactor, request_for_shell, run_probe
from support.remote import Sink, probe, run, wait_gone


def test_probe_reaches_the_far_end_through_jump_host_container_and_venv(sshd):
    target = sshd.target()
    src = "import os, sys\nprint('inside', os.environ.get('SLEUTH_TEST_CT'))\nemit('result', ct=os.environ.get('SLEUTH_TEST_CT'), container=os.environ.get('container'), prefix=sys.prefix, got=params)"
    out = run(execute(target, probe(src, answer=42, text="it's \"quoted\" $HOME `id`"), Sink()))
    assert out.classification == "completed", out.reason
    result = next(r for r in out.records if r["kind"] == "result")
    assert result["ct"] == "200" and result["container"] == "lxc"
    assert result["prefix"] == str(sshd.venv)  # the venv's python, no activate
    assert result["got"] == {"answer": 42, "text": "it's \"quoted\" $HOME `id`"}
    assert out.state["env"]["executable"] == sshd.python
    chain = HopChain.python(target)
    assert chain.remote_command == f"pct exec 200 -- {sshd.python} -"
    hops = chain.hops("program on stdin")
    assert [h.name.split(" ")[0] for h in hops] == ["ssh", "ssh", "pct", sshd.python]


ARG = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=24),
    st.sampled_from(["'", '"', "$HOME", "${PATH}", "`id`", "$(id)", "\\", "\\\\n", "\n", "a\nb", ";", "|", "&", "&&",
                     ";|&", "*", "~", "--", "-c", "", " ", "\t", "ü", "日本語", "🙂", "'\"'\"'", "!$", "#x", "%s"]),
)


@pytest.mark.slow
def test_random_argv_survives_ssh_container_python_byte_for_byte(sshd):
    target = sshd.target(jump=False)
    loop = asyncio.new_event_loop()
    pool = SshPool()
    program = b"import sys, json\nsys.stdout.write(json.dumps(sys.argv[1:]))\n"
    seen = {"n": 0}

    @settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(st.lists(ARG, max_size=6))
    def roundtrip(argv):
        sink = Sink()
        info = loop.run_until_complete(run_chain(HopChain.python(target, argv), program, sink.write, pool=pool))
        assert info.exit_status == 0, sink.text("stderr")
        assert json.loads(sink.text()) == argv
        seen["n"] += 1

    try:
        roundtrip()
    finally:
        loop.run_until_complete(pool.close())
        loop.close()
    assert seen["n"] >= 1000


CONFIG_DUMP = """
import json
config = {"model_type": "qwen3_5", "vision_config": {"depth": 27, "hidden_size": 1152}}
for i in range(10000):
    print(json.dumps({"line": i, **config}))
"""


@pytest.fixture
def remote_inv(tmp_path, catalog):
    inv = Investigation.create(tmp_path / "s.sleuth", "transport", catalog, Redactor({}))
    yield inv
    inv.close()


def test_result_after_10000_config_lines_is_found_and_every_line_kept(sshd, remote_inv):
    target = sshd.target()
    src = CONFIG_DUMP + "emit('result', fx_flag_seen=True, threads=4)\n"
    from sleuth.sessions import RunRequest

    req = RunRequest("config-dump", "script", probe(src), {})
    report = run(run_probe(remote_inv, target, req))
    assert report.outcome.classification == "completed"
    assert {"kind": "result", "fx_flag_seen": True, "threads": 4} in report.outcome.records
    store = remote_inv.store
    stdout_lines = store.line_count(report.run, "stdout")
    assert stdout_lines == 10000 + 3  # the dump, the state, result and done records
    lines = store.lines(report.run, 0, 20000, stream="stdout")
    dump = [ln.text for ln in lines if ln.text.startswith('{"line"')]
    assert len(dump) == 10000
    assert json.loads(dump[0])["line"] == 0 and json.loads(dump[-1])["line"] == 9999
    assert remote_inv.state.runs[report.run].lines == {"stdout": 10003, "stderr": 0}


def test_same_probe_dying_before_done_says_why(sshd, remote_inv):
    from sleuth.sessions import RunRequest

    src = CONFIG_DUMP + "import os, sys\nsys.stdout.flush()\nprint('CUDA error: an illegal memory access', file=sys.stderr, flush=True)\nos._exit(1)\n"
    report = run(run_probe(remote_inv, sshd.target(), RunRequest("config-dump", "script", probe(src), {})))
    assert report.outcome.classification == "no_result"
    reason = report.outcome.reason
    assert "without a done record" in reason
    assert "stdout had 10,001 lines, stderr 1" in reason
    assert "CUDA error: an illegal memory access" in reason and '"line": 9999' in reason
    assert remote_inv.store.line_count(report.run, "stdout") == 10001


def test_failed_when_the_probe_raises(sshd):
    out = run(execute(sshd.target(), probe("raise RuntimeError('Detected that you are using FX to symbolically trace')"), Sink()))
    assert out.classification == "failed"
    err = next(r for r in out.records if r["kind"] == "error")
    assert err["type"] == "RuntimeError" and "Traceback" in err["traceback"]
    assert "raised RuntimeError: Detected that you are using FX" in out.reason


def test_killed_by_a_signal(sshd):
    out = run(execute(sshd.target(), probe("import os, signal\nprint('about to die', flush=True)\nos.kill(os.getpid(), signal.SIGKILL)"), Sink()))
    assert out.classification == "killed"
    assert "SIGKILL" in out.reason and "OOM" in out.reason


def test_no_result_from_a_program_that_never_reports(sshd):
    out = run(execute(sshd.target(), probe("import os\nprint('just a script')\nos._exit(0)"), Sink()))
    assert out.classification == "no_result"
    assert "exited 0 without a done record" in out.reason


@pytest.mark.slow
def test_timeout_kills_the_remote_process(sshd):
    marker = f"sleuth-timeout-{uuid.uuid4().hex[:8]}"
    src = f"import subprocess, time, sys\nchild = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', '{marker}'])\nprint('started', flush=True)\ntime.sleep(300)"
    t0 = time.monotonic()
    out = run(execute(sshd.target(), probe(src), Sink(), timeout=2))
    assert out.classification == "timed_out"
    assert "no end after 2 s" in out.reason
    assert time.monotonic() - t0 < 15
    assert wait_gone(sshd, marker) == []  # the probe and its child, both gone


def test_cancel_kills_the_remote_process_group(sshd):
    marker = f"sleuth-cancel-{uuid.uuid4().hex[:8]}"
    src = f"import subprocess, time, sys\nsubprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', '{marker}'])\nprint('ready', flush=True)\ntime.sleep(300)"

    async def go():
        cancel = asyncio.Event()
        sink = Sink()

        def on_output(stream, data):
            if b"ready" in data:
                cancel.set()

        return await execute(sshd.target(), probe(src), sink, cancel=cancel, on_output=on_output)

    out = run(go())
    assert out.classification == "killed" and "cancelled" in out.reason
    assert wait_gone(sshd, marker) == []


def test_connection_refused_is_transport_and_names_the_hop(sshd):
    from support.sshd_harness import free_port

    out = run(execute(sshd.target(jump=False, port=free_port()), probe("emit('result', x=1)"), Sink()))
    assert out.classification == "transport"
    assert "hop 1 (ssh" in out.reason and "connection refused" in out.reason
    assert out.state is None and out.records == []


def test_jump_host_down_is_transport_at_hop_1(sshd):
    from support.sshd_harness import free_port

    target = dataclasses.replace(sshd.target(), jump=(f"127.0.0.1:{free_port()}",))
    out = run(execute(target, probe("emit('result', x=1)"), Sink()))
    assert out.classification == "transport"
    assert out.failed_hop == 1 and "jump" in out.reason


def test_wrong_host_key_is_refused_with_how_to_accept(sshd, tmp_path):
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    pub = (tmp_path / "other_key.pub").read_text().split()
    port = sshd.servers["gpu"].port
    changed = tmp_path / "known_hosts"
    changed.write_text(f"[127.0.0.1]:{port} {pub[0]} {pub[1]}\n")
    out = run(execute(sshd.target(jump=False, known_hosts=str(changed)), probe("emit('result', x=1)"), Sink()))
    assert out.classification == "transport"
    assert "CHANGED" in out.reason and f"[127.0.0.1]:{port}" in out.reason and "ssh-keygen -R" in out.reason
    unknown = tmp_path / "empty_known_hosts"
    unknown.write_text("")
    out = run(execute(sshd.target(jump=False, known_hosts=str(unknown)), probe("emit('result', x=1)"), Sink()))
    assert out.classification == "transport"
    assert "is not known" in out.reason and f"ssh-keyscan -p {port} 127.0.0.1 >> {unknown}" in out.reason


def test_sshd_killed_mid_run_is_transport_and_leaves_no_process(tmp_path_factory):
    from support.sshd_harness import SshHarness

    h = SshHarness(tmp_path_factory.mktemp("sshd-kill")).setup()
    gpu = h.servers["gpu"]
    gpu.start()
    marker = f"sleuth-lost-{uuid.uuid4().hex[:8]}"
    src = f"import time\nprint('{marker}', flush=True)\ntime.sleep(300)"

    async def go():
        def on_output(stream, data):
            if marker.encode() in data:
                gpu.kill_all()  # the listener and every session process it forked

        return await execute(h.target(jump=False), probe(src), Sink(), on_output=on_output, timeout=30)

    try:
        out = run(go())
        assert out.classification == "transport", out.reason
        assert "connection was lost" in out.reason
        deadline = time.monotonic() + 5
        left = ["x"]
        while left and time.monotonic() < deadline:
            ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
            left = [ln for ln in ps.splitlines() if marker in ln]
            time.sleep(0.2)
        assert left == []  # the prelude's watchdog killed the orphaned probe
    finally:
        h.stop()


def test_transport_failure_is_never_evidence(sshd, remote_inv):
    from sleuth.probes import builtin_probes
    from sleuth.sessions import request_for_probe
    from support.sshd_harness import free_port

    target = sshd.target(jump=False, port=free_port())
    req = request_for_probe(remote_inv, builtin_probes()["cache-inventory"], target, {})
    report = run(run_probe(remote_inv, target, req))
    assert report.outcome.classification == "transport"
    assert remote_inv.state.evidence_counts("cache-invalidation") == {"supports": 0, "refutes": 0, "inconclusive": 0}
    assert not [e for e in remote_inv.store.events() if e.kind == "evidence.recorded"]


def test_connection_is_reused_across_probes(sshd):
    target = sshd.target()

    async def go():
        pool = SshPool()
        try:
            await execute(target, probe("emit('result', n=1)"), Sink(), pool=pool)
            first = (await pool.get(target))[0]
            t0 = time.monotonic()
            for _ in range(5):
                out = await execute(target, probe("emit('result', n=2)"), Sink(), pool=pool)
                assert out.classification == "completed"
            per_run = (time.monotonic() - t0) / 5
            second = (await pool.get(target))[0]
            return first is second, per_run
        finally:
            await pool.close()

    same, _per_run = run(go())
    assert same


def test_shell_command_runs_as_bash_c_at_the_far_end(sshd, remote_inv):
    cmd = "echo \"$0\" $((6*7)); echo 'it'\"'\"'s'; echo err >&2; exit 3"
    report = run(run_probe(remote_inv, sshd.target(), request_for_shell(cmd)))
    assert report.outcome.classification == "failed"
    assert "exited 3" in report.outcome.reason
    out = remote_inv.store.output_bytes(report.run, "stdout").decode()
    assert out == "bash 42\nit's\n"
    assert remote_inv.store.output_bytes(report.run, "stderr") == b"err\n"
