"""The resident agent against the real sshd of the transport tests, through jump → host →
pct container → venv: probes run through it, eight at once, cancel, every classification,
and no process of the agent or its children left at the far end when the agent, the sshd or
the client dies; a stale agent is replaced; a far end that cannot run it falls back."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from sleuth.probes import AGENT_VERSION, AgentPool, HopChain, ProgramSpec, execute, load_config, run_chain
from sleuth.probes.agent import AGENT_SOURCE
from support.remote import AGENT_MARK, Sink, agents_left, far_processes, probe, run, wait_gone

# what a test here counts at the far end is its own: idle brokers of earlier tests are stopped
pytestmark = pytest.mark.usefixtures("no_idle_brokers")


async def with_pool(body, ssh_target=None):
    pool = AgentPool()
    try:
        return await body(pool)
    finally:
        await pool.close()


def test_probes_run_through_the_agent_and_reuse_it(sshd):
    target = sshd.target()

    async def body(pool):
        outs = [await execute(target, probe("import sys\nemit('result', exe=sys.executable, n=params['n'])", n=i), Sink(), runner=pool) for i in range(3)]
        health = await pool.agents[target.name].health()
        return outs, health

    outs, health = run(with_pool(body))
    assert [o.classification for o in outs] == ["completed"] * 3
    assert [o.records[0]["n"] for o in outs] == [0, 1, 2]
    assert {o.via for o in outs} == {f"via agent pid {health['pid']} (fresh)"}  # one agent for all three
    assert outs[0].records[0]["exe"] == sshd.python  # inside the container's venv
    assert health["version"] == AGENT_VERSION and health["executable"] == sshd.python
    assert outs[0].state is not None and outs[0].state["env"]["executable"] == sshd.python
    assert agents_left(sshd) == []  # closing the pool ended it


def test_eight_probes_run_at_once_on_one_agent(sshd):
    target = sshd.target()
    src = "import time\nt0 = time.time()\ntime.sleep(1.0)\nemit('result', start=t0, end=time.time())"

    async def body(pool):
        await pool.get(target)
        return await asyncio.gather(*(execute(target, probe(src), Sink(), runner=pool) for _ in range(8)))

    outs = run(with_pool(body))
    assert [o.classification for o in outs] == ["completed"] * 8
    starts = [o.records[0]["start"] for o in outs]
    ends = [o.records[0]["end"] for o in outs]
    assert max(starts) < min(ends)  # all eight were running at the same moment
    assert len({o.via for o in outs}) == 1


def test_cancel_kills_the_remote_child_and_the_agent_stays(sshd):
    target = sshd.target()
    marker = f"sleuth-agent-cancel-{uuid.uuid4().hex[:8]}"
    src = (
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', '{marker}'])\n"
        "print('ready', flush=True)\ntime.sleep(300)"
    )

    async def body(pool):
        cancel = asyncio.Event()

        def on_output(stream, data):
            if b"ready" in data:
                cancel.set()

        out = await execute(target, probe(src), Sink(), runner=pool, cancel=cancel, on_output=on_output)
        gone = await asyncio.to_thread(wait_gone, sshd, marker)
        after = await execute(target, probe("emit('result', ok=1)"), Sink(), runner=pool)
        return out, gone, after

    out, gone, after = run(with_pool(body))
    assert out.classification == "killed" and "cancelled" in out.reason
    assert gone == []  # the child's whole process group, grandchild included
    assert after.classification == "completed" and after.via == out.via  # same agent, still up


@pytest.mark.parametrize(
    "source, classification, says",
    [
        ("raise ValueError('no GPU here')", "failed", "ValueError"),
        ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", "killed", "KILL"),
        ("import os\nprint('partial', flush=True)\nos._exit(0)", "no_result", "done"),
        ("import time\ntime.sleep(30)", "timed_out", "no end after 2 s"),
    ],
)
@pytest.mark.slow
def test_every_classification_through_the_agent(sshd, source, classification, says):
    target = sshd.target(timeout=2.0)

    async def body(pool):
        return await execute(target, probe(source), Sink(), runner=pool)

    out = run(with_pool(body))
    assert out.classification == classification, out.reason
    assert says.lower() in out.reason.lower()
    assert out.via.startswith("via agent pid")


def _long_probe(marker: str) -> str:
    return (
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', '{marker}'])\n"
        "print('ready', flush=True)\ntime.sleep(300)"
    )


def test_killing_the_agent_is_transport_and_leaves_nothing(sshd):
    target = sshd.target()
    marker = f"sleuth-agent-kill-{uuid.uuid4().hex[:8]}"

    async def body(pool):
        agent = await pool.get(target)

        def on_output(stream, data):
            if b"ready" in data:  # kill -9 the agent at the far end, through the same chain
                chain = HopChain(target, ["pct", "exec", "200", "--", "kill", "-9", str(agent.pid)])
                asyncio.ensure_future(run_chain(chain, b"", lambda s, d: None, pool=pool.ssh))

        out = await execute(target, probe(_long_probe(marker)), Sink(), runner=pool, on_output=on_output)
        again = await execute(target, probe("emit('result', ok=1)"), Sink(), runner=pool)
        return out, agent.pid, again

    out, old_pid, again = run(with_pool(body))
    assert out.classification == "transport", out.reason
    assert "agent went away" in out.reason
    assert out.records == [] or all(r["kind"] != "result" for r in out.records)  # never evidence
    assert wait_gone(sshd, marker) == []
    assert again.classification == "completed" and f"pid {old_pid} " not in again.via  # a new agent took over
    assert agents_left(sshd) == []


def test_sshd_killed_is_transport_and_leaves_nothing(tmp_path_factory):
    from support.sshd_harness import SshHarness

    h = SshHarness(tmp_path_factory.mktemp("sshd-agent-kill")).setup()
    gpu = h.servers["gpu"]
    gpu.start()
    marker = f"sleuth-agent-sshd-{uuid.uuid4().hex[:8]}"
    target = h.target(jump=False)

    async def body(pool):
        def on_output(stream, data):
            if b"ready" in data:
                gpu.kill_all()  # the listener and every session process it forked

        return await execute(target, probe(_long_probe(marker)), Sink(), runner=pool, on_output=on_output, timeout=30)

    try:
        out = run(with_pool(body))
        assert out.classification == "transport", out.reason
        deadline = time.monotonic() + 5
        left = ["x"]
        while left and time.monotonic() < deadline:  # sshd is dead: ps here (the same machine)
            ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
            left = [ln for ln in ps.splitlines() if marker in ln or (AGENT_MARK in ln and str(h.root) in ln)]
            time.sleep(0.2)
        assert left == []
    finally:
        h.stop()


@pytest.mark.slow
def test_client_killed_leaves_nothing_at_the_far_end(sshd, tmp_path: Path):
    marker = f"sleuth-agent-client-{uuid.uuid4().hex[:8]}"
    t = sshd.target()
    client = tmp_path / "client.py"
    client.write_text(
        textwrap.dedent(
            f"""
            import asyncio, sys
            sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
            from sleuth.probes import AgentPool, Container, ProgramSpec, Target, execute

            class Sink:
                def write(self, s, d):
                    if b"ready" in d:
                        print("READY", flush=True)
                def flush(self):
                    pass

            target = Target(name="ct200", ssh={t.ssh!r}, port={t.port}, jump={t.jump!r}, identity={t.identity!r},
                            known_hosts={t.known_hosts!r}, container=Container("pct", "200"), python={t.python!r})
            src = {_long_probe(marker)!r}
            asyncio.run(execute(target, ProgramSpec(probe="t", source=src), Sink(), runner=AgentPool()))
            """
        )
    )
    proc = subprocess.Popen([sys.executable, str(client)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "READY"
        assert far_processes(sshd, marker) and far_processes(sshd, AGENT_MARK)
        os.kill(proc.pid, signal.SIGKILL)  # the client dies without a word
        proc.wait(10)
        assert wait_gone(sshd, marker, 10) == []
        assert agents_left(sshd, 10) == []
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_stale_agent_is_replaced(sshd):
    target = sshd.target()

    async def body(pool):
        old = await pool.get(target)
        old_version, old_pid = old.version, old.pid
        pool.source, pool.version = AGENT_SOURCE, AGENT_VERSION  # this sleuth is newer than that agent
        out = await execute(target, probe("emit('result', ok=1)"), Sink(), runner=pool)
        new = pool.agents[target.name]
        gone = await asyncio.to_thread(far_processes, sshd, f"{old_pid} ")
        return old_version, old_pid, out, new.version, new.pid, gone

    stale = AgentPool(source=AGENT_SOURCE + b"\n# an older sleuth's agent\n")

    async def go():
        try:
            return await body(stale)
        finally:
            await stale.close()

    old_version, old_pid, out, new_version, new_pid, gone = run(go())
    assert old_version != AGENT_VERSION and new_version == AGENT_VERSION
    assert new_pid != old_pid and out.classification == "completed"
    assert [r[0] for r in stale.replaced] == [target.name] and "this sleuth's is" in stale.replaced[0][2]
    assert not [ln for ln in gone if ln.split()[0] == str(old_pid)]


def test_a_far_end_that_cannot_run_the_agent_falls_back_and_says_so(sshd, tmp_path: Path):
    # a python that runs programs on stdin but refuses -c (as a locked-down or odd interpreter may)
    wrapper = tmp_path / "python-no-c"
    wrapper.write_text(f'#!/bin/sh\nif [ "$1" = "-c" ]; then echo "-c is not allowed here" >&2; exit 2; fi\nexec {sshd.python} "$@"\n')
    wrapper.chmod(0o755)
    target = sshd.target(python=str(wrapper))

    async def body(pool):
        return [await execute(target, probe("emit('result', ok=1)"), Sink(), runner=pool) for _ in range(2)]

    outs = run(with_pool(body))
    assert [o.classification for o in outs] == ["completed", "completed"]
    assert "no agent on ct200" in outs[0].reason and "-c is not allowed here" in outs[0].reason
    assert "ran in its own session" in outs[1].reason


@pytest.mark.slow
def test_forked_probes_start_with_torch_already_imported():
    pytest.importorskip("torch")
    target = load_config(None).target("local")
    src = "import sys\nwas = 'torch' in sys.modules\nimport torch\nemit('result', was=was, version=torch.__version__)"

    async def body(pool):
        agent = await pool.get(target)
        warmed = await agent.warm(["torch"])
        fresh = await execute(target, probe(src), Sink(), runner=pool)
        spec = probe(src)
        forked = await execute(target, type(spec)(**{**spec.__dict__, "fork": True}), Sink(), runner=pool)
        return warmed, fresh, forked

    warmed, fresh, forked = run(with_pool(body))
    assert warmed["warm"][-1] == "torch" and not warmed["failed"]
    assert fresh.records[0]["was"] is False and fresh.via.endswith("(fresh)")
    assert forked.records[0]["was"] is True and forked.via.endswith("(fork)")
    record = forked.records[0]
    assert json.loads(json.dumps(record)) == record and isinstance(record["version"], str), record  # plain data came back


def test_a_local_agent_run_gets_this_process_environment_as_it_is_now(monkeypatch):
    """The environment a local run gets is decoded once and kept until os.environ changes:
    a variable set, changed or removed after the agent started is seen by the next run."""
    from sleuth.probes import Target

    target = Target("here", python=sys.executable)
    src = "import os\nemit('result', v=os.environ.get('SLEUTH_TEST_ENV'))"

    async def body(pool):
        seen = []
        for value in ("one", "one", "two", None):
            if value is None:
                monkeypatch.delenv("SLEUTH_TEST_ENV")
            else:
                monkeypatch.setenv("SLEUTH_TEST_ENV", value)
            out = await execute(target, ProgramSpec(probe="t", source=src, fork=True), Sink(), runner=pool)
            assert out.classification == "completed", out.reason
            seen.append(out.records[0]["v"])
        return seen

    assert run(with_pool(body)) == ["one", "one", "two", None]


def test_a_run_whose_caller_is_cancelled_is_killed_and_never_holds_the_agent(tmp_path):
    """A run's task cancelled (the UI quitting, a wait_for around it) while its reader has
    stopped taking output: the far end is killed, and the agent's other runs go on — its
    reader does not wait for a reader that is gone."""
    from sleuth.probes import Target
    from sleuth.probes.protocol import build_program, new_nonce

    target = Target("here", python=sys.executable)
    pidfile = tmp_path / "pid"
    src = (f"import os\nopen({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
           "block = b'x' * 1048575 + b'\\n'\nwhile True:\n    os.write(1, block)\n")

    async def body(pool):
        stuck = asyncio.get_running_loop().create_future()  # a reader that never takes more
        program = build_program(ProgramSpec(probe="t", source=src, fork=True), new_nonce())
        task = asyncio.ensure_future(pool.run(HopChain.python(target), program, lambda s, d: stuck, fork=True))
        for _ in range(100):
            await asyncio.sleep(0.1)
            if pidfile.exists() and pidfile.read_text():
                break
        await asyncio.sleep(1.0)  # more than the agent's bound is waiting by now
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        after = await asyncio.wait_for(
            execute(target, ProgramSpec(probe="t", source="emit('result', ok=True)", fork=True), Sink(), runner=pool), 30)
        pid = int(pidfile.read_text())
        deadline = time.monotonic() + 10  # (checked before the pool closes: closing kills every child)
        while time.monotonic() < deadline and _running(pid):
            await asyncio.sleep(0.1)
        return pid, _running(pid), after

    pid, running, after = run(with_pool(body))
    assert after.classification == "completed", after.reason
    assert not running, f"the cancelled run's far end (pid {pid}) is still running"


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
