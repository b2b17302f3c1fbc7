"""Benchmark: a probe's round trip through a jump host, and output capture throughput.

Everything runs in one go on loopback against real OpenSSH servers (tests/support/sshd_harness.py:
a jump host and a gpu host behind it, a pct hop, a venv python). Each way of running sends
the same bytes — sleuth's program for a trivial probe — to the same ``pct exec 200 --
python -`` at the far end, so only the transport differs:

  * sleuth: asyncssh, one connection per target reused for every probe;
  * a fresh ``ssh -J jump gpu`` per command (what people type);
  * OpenSSH with ControlMaster (a warm master connection, the best plain-ssh practice).

Capture: 200 MB of output lines from the far end into a real session store (chunks and
line index), vs ``ssh -J jump gpu … > file`` with OpenSSH — the same path, the jump host
included — in interleaved pairs (--pairs); and the same without the jump host (sleuth's
target without its jump vs ``ssh gpu … > file``). Through a jump sleuth decrypts both
connections in its one process, where OpenSSH runs a second ``ssh`` for the jump.

The resident agent (issue 7): the same trivial probe through one agent kept up at the far
end (forked from it, and as a fresh interpreter), eight at once, and ``env-fingerprint``
warm (forked from an agent that has imported torch) vs cold (a fresh interpreter that
imports it) — with the target's python set to this interpreter, which has torch.

    python bench/probe_latency.py [--runs 15] [--megabytes 200] [--json]
Goals (issue 3): ≥ 4× faster than a fresh ssh -J; within 1.1× of ControlMaster; capture ≥ 0.7× raw.
Goals (issue 7): agent round trip ≤ 0.1× ControlMaster's; eight in parallel ≤ 2× one;
warm fingerprint ≤ 0.1× cold.
Goals (issue 13): the state read before a run ≤ 20 ms through the agent; through a fresh
session no more than one extra round trip (≈ one trivial probe).
Goals (issue 16): the CLI's second and later ``probe run`` through the jump host — its run
through the broker's resident agent — ≤ 0.1× ControlMaster (the whole command, Python's
start included, is printed beside it); a fleet of 16 members ≤ 3× one member; capture ≥
0.7× raw.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from fleet_scale import busy_cpu  # noqa: E402
from sleuth.probes import (  # noqa: E402
    AgentPool,
    HopChain,
    ProgramSpec,
    SessionRunner,
    SshPool,
    build_program,
    builtin_probes,
    execute,
    new_nonce,
    run_chain,
)
from sleuth.sessions import Redactor, Store, measure_state  # noqa: E402
from support.sshd_harness import SshHarness  # noqa: E402

TRIVIAL = "emit('result', ok=True)\n"


def timed(fn, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def compile_bytecode() -> None:
    """Byte-compile sleuth and what it imports, as a wheel install does (pip compiles at
    install): an editable checkout under PYTHONDONTWRITEBYTECODE=1 (this VM sets it) would
    otherwise compile every module from source on every command and time that instead."""
    import compileall
    import sysconfig

    import sleuth

    for where in (Path(sleuth.__file__).parent, Path(sysconfig.get_paths()["purelib"])):
        compileall.compile_dir(str(where), quiet=2, workers=0)


def measure_start(runs: int) -> dict:
    """`sleuth --version` (the console script, as a user types it) against `python -c pass`
    of the same interpreter: what the CLI costs before it does anything. Medians of *runs*."""
    import shutil

    script = shutil.which("sleuth") or str(Path(sys.executable).with_name("sleuth"))
    version = [script, "--version"] if Path(script).exists() else [sys.executable, "-m", "sleuth", "--version"]
    nothing = [sys.executable, "-c", "pass"]
    compile_bytecode()
    subprocess.run(version, capture_output=True, check=True)  # warm the file cache for both
    subprocess.run(nothing, capture_output=True, check=True)
    t_version, t_python = [], []
    for _ in range(runs):  # interleaved: the machine's moods fall on both alike
        t_python += timed(lambda: subprocess.run(nothing, capture_output=True, check=True), 1)
        t_version += timed(lambda: subprocess.run(version, capture_output=True, check=True), 1)
    v, py = statistics.median(t_version), statistics.median(t_python)
    return {"version_s": round(v, 4), "python_pass_s": round(py, 4), "version_vs_python": round(v / py, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--megabytes", type=int, default=200)
    ap.add_argument("--pairs", type=int, default=5, help="interleaved raw/capture runs of --megabytes each")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--start-only", action="store_true", help="only the CLI's start (no sshd needed)")
    args = ap.parse_args()
    if args.start_only:
        start = measure_start(max(args.runs, 15))
        print(json.dumps(start) if args.json else
              f"sleuth --version {start['version_s']:.4f} s, python -c pass {start['python_pass_s']:.4f} s: "
              f"version_vs_python {start['version_vs_python']:.2f}×  (goal ≤ 3)")
        return

    with tempfile.TemporaryDirectory() as tmp:
        h = SshHarness(Path(tmp) / "sshd").setup().start()
        try:
            results = measure(h, Path(tmp), args)
        finally:
            h.stop()
    if args.json:
        print(json.dumps(results))
        return
    r = results
    print(f"{'round trip of a trivial probe (median)':<52} {'seconds':>8}")
    print(f"{'  fresh ssh -J per command':<52} {r['fresh_ssh_s']:>8.3f}")
    print(f"{'  OpenSSH ControlMaster (warm)':<52} {r['controlmaster_s']:>8.3f}")
    print(f"{'  sleuth (asyncssh, reused connection)':<52} {r['sleuth_s']:>8.3f}")
    print(f"{'  vs_fresh_ssh = fresh / sleuth':<52} {r['vs_fresh_ssh']:>8.2f}×  (goal ≥ 4)")
    print(f"{'  vs_controlmaster = sleuth / ControlMaster':<52} {r['vs_controlmaster']:>8.2f}×  (goal ≤ 1.1)")
    print(f"{'  the state read before a run, its own session':<52} {r['state_read_session_s']:>8.3f}")
    print(f"{'  state_read_session_vs_probe = read / trivial probe':<52} {r['state_read_session_vs_probe']:>8.2f}×  (goal ≤ ~1: one round trip)")
    print(f"{'the transport alone (pct exec 200 -- true), median':<52}")
    print(f"{'  fresh ssh -J / ControlMaster / sleuth':<52} {r['fresh_ssh_true_s']:.3f} / {r['controlmaster_true_s']:.3f} / {r['sleuth_true_s']:.3f}"
          f"  ({r['fresh_ssh_true_s'] / r['sleuth_true_s']:.2f}× fresh, {r['sleuth_true_s'] / r['controlmaster_true_s']:.2f}× CM)")
    print(f"{'capture of ' + str(r['megabytes']) + ' MB':<52} {'MB/s':>8}")
    print(f"{'  ssh -J jump gpu … > file (OpenSSH, raw)':<52} {r['raw_mb_s']:>8.1f}")
    print(f"{'  sleuth through the jump, output discarded':<52} {r['asyncssh_discard_mb_s']:>8.1f}")
    print(f"{'  sleuth through the jump into the session store':<52} {r['sleuth_mb_s']:>8.1f}")
    print(f"{'  capture_vs_raw = sleuth / raw (median of pairs)':<52} {r['capture_vs_raw']:>8.2f}×  (goal ≥ 0.7)")
    print(f"{'  without the jump: ssh gpu … > file / sleuth':<52} {r['raw_direct_mb_s']:>8.1f} / {r['sleuth_direct_mb_s']:.1f}"
          f"  ({r['capture_direct_vs_raw_direct']:.2f}×)")
    print(f"{'  (then the deferred WAL checkpoint, seconds)':<52} {r['checkpoint_after_s']:>8.2f}")
    print(f"{'the resident agent (median)':<52} {'seconds':>8}")
    print(f"{'  trivial probe, forked from the agent':<52} {r['agent_s']:>8.4f}")
    print(f"{'  trivial probe, fresh interpreter under the agent':<52} {r['agent_fresh_s']:>8.4f}")
    print(f"{'  agent_vs_controlmaster = agent / ControlMaster':<52} {r['agent_vs_controlmaster']:>8.3f}×  (goal ≤ 0.1)")
    print(f"{'  the state read before a run, through the agent':<52} {r['state_read_agent_s']:>8.4f}  (goal ≤ 0.020)")
    print(f"{'  eight trivial probes at once':<52} {r['agent_parallel8_s']:>8.4f}")
    print(f"{'  agent_parallel8_vs_one':<52} {r['agent_parallel8_vs_one']:>8.2f}×  (goal ≤ 2)")
    print(f"{'  env-fingerprint cold (fresh python imports torch)':<52} {r['fingerprint_cold_s']:>8.3f}")
    print(f"{'  env-fingerprint warm (forked, torch imported)':<52} {r['fingerprint_warm_s']:>8.3f}")
    print(f"{'  warm_vs_cold_fingerprint':<52} {r['warm_vs_cold_fingerprint']:>8.3f}×  (goal ≤ 0.1)")
    print(f"{'  (the agent start, then importing torch in it)':<52} {r['agent_start_s']:.3f} / {r['agent_warm_torch_s']:.3f}")
    print(f"{'the CLI, sleuth probe run again (median)':<52} {'seconds':>8}")
    print(f"{'  its run, through the broker agent':<52} {r['cli_second_run_s']:>8.4f}")
    print(f"{'  cli_second_vs_controlmaster = run / ControlMaster':<52} {r['cli_second_vs_controlmaster']:>8.3f}×  (goal ≤ 0.1)")
    print(f"{'  the whole command (Python start included)':<52} {r['cli_second_command_s']:>8.3f}  "
          f"({r['cli_whole_second_vs_controlmaster']:.2f}× ControlMaster; goal ≤ 1.0)")
    print(f"{'  sleuth --version / python -c pass':<52} {r['version_s']:.4f} / {r['python_pass_s']:.4f}  "
          f"version_vs_python {r['version_vs_python']:.2f}×  (goal ≤ 3)")
    print(f"{'  the first command (starts broker and agent)':<52} {r['cli_first_command_s']:>8.3f}")
    print(f"{'a fleet, one probe on every member (median)':<52} {'seconds':>8}")
    print(f"{'  one member / sixteen members':<52} {r['fleet_one_s']:.4f} / {r['fleet16_s']:.4f}")
    print(f"{'  fleet16_vs_one':<52} {r['fleet16_vs_one']:>8.2f}×  (goal ≤ 3)")
    print(f"{'  (sixteen, the first time: sixteen agents start)':<52} {r['fleet16_first_s']:>8.3f}")
    print(f"{'  the CPU floor here (their CPU seconds / cores)':<52} {r['fleet16_cpu_floor_s']:>8.4f}  ({r['fleet16_vs_cpu_floor']:.2f}× the floor)")


def measure(h: SshHarness, tmp: Path, args: argparse.Namespace) -> dict:
    target = h.target()
    cfg = h.ssh_config()
    program = build_program(ProgramSpec(probe="trivial", source=TRIVIAL), new_nonce())
    remote = shlex.join(HopChain.python(target).far_argv)
    ssh = ["ssh", "-F", str(cfg)]
    control = tmp / "cm-%C"
    cm_opts = ["-o", "ControlMaster=auto", "-o", f"ControlPath={control}", "-o", "ControlPersist=120"]

    def fresh() -> None:
        subprocess.run([*ssh, "-J", "jump", "gpu", remote], input=program, capture_output=True, check=True)

    def master() -> None:
        subprocess.run([*ssh, *cm_opts, "-J", "jump", "gpu", remote], input=program, capture_output=True, check=True)

    class Null:
        def write(self, stream: str, data: bytes) -> None:
            pass

        def flush(self) -> None:
            pass

    loop = asyncio.new_event_loop()
    pool = SshPool()

    def sleuth() -> None:
        out = loop.run_until_complete(execute(target, ProgramSpec(probe="trivial", source=TRIVIAL), Null(), pool=pool))
        assert out.classification == "completed", out.reason

    fresh()
    master()  # starts the master
    sleuth()  # opens the connection
    t_fresh = statistics.median(timed(fresh, args.runs))
    t_cm = statistics.median(timed(master, args.runs))
    t_sleuth = statistics.median(timed(sleuth, args.runs))

    def state_read() -> None:
        got = loop.run_until_complete(measure_state(target, runner=SessionRunner(pool)))
        assert got.state is not None, got.unknown

    t_state_session = statistics.median(timed(state_read, args.runs))

    # the transport alone: `pct exec 200 -- true`, no python at the far end
    true_remote = shlex.join(["pct", "exec", "200", "--", "true"])
    true_chain = HopChain(target, ["pct", "exec", "200", "--", "true"])
    t_fresh_true = statistics.median(timed(lambda: subprocess.run([*ssh, "-J", "jump", "gpu", true_remote], capture_output=True, check=True), args.runs))
    t_cm_true = statistics.median(timed(lambda: subprocess.run([*ssh, *cm_opts, "-J", "jump", "gpu", true_remote], capture_output=True, check=True), args.runs))
    t_sleuth_true = statistics.median(timed(lambda: loop.run_until_complete(run_chain(true_chain, b"", lambda s, d: None, pool=pool)), args.runs))
    subprocess.run([*ssh, *cm_opts, "-O", "exit", "gpu"], capture_output=True)

    # capture: the same generator, 1 MiB blocks of training-log lines (JSON metrics,
    # warnings, a config dump line), written as fast as the far end can
    mb = args.megabytes
    gen = (
        "import sys, json\n"
        "lines = []\n"
        "for i in range(20000):\n"
        "    if i % 50 == 0:\n"
        "        lines.append('/usr/lib/python3/site-packages/torch/_inductor/utils.py:1250: UserWarning: flex_attention called without torch.compile()')\n"
        "    elif i % 97 == 0:\n"
        "        lines.append(json.dumps({'vision_config': {'depth': 27, 'hidden_act': 'gelu_pytorch_tanh', 'hidden_size': 1152}}))\n"
        "    else:\n"
        "        lines.append(json.dumps({'step': i, 'loss': 2.5 / (1 + i), 'lr': 3e-4, 'tokens_per_s': 12345.6 + i, 'grad_norm': 0.91}))\n"
        "block = ('\\n'.join(lines) + '\\n').encode()[: 1 << 20]\n"
        "block = block[: block.rfind(b'\\n') + 1]\n"
        f"for _ in range({mb} * (1 << 20) // len(block)):\n    sys.stdout.buffer.write(block)\nsys.stdout.flush()\n"
    )
    raw_file = tmp / "raw.out"
    gen_remote = shlex.join(HopChain(target, HopChain.python(target).far_argv).far_argv)

    direct = h.target(jump=False)

    def raw(jump: bool = True) -> tuple[float, int]:
        t0 = time.perf_counter()
        with raw_file.open("wb") as fh:
            subprocess.run([*ssh, *(["-J", "jump"] if jump else []), "gpu", gen_remote], input=gen.encode(),
                           stdout=fh, check=True)
        return time.perf_counter() - t0, raw_file.stat().st_size

    store = Store.create(tmp / "cap.sleuth", Redactor.from_environ())

    def capture(run: int, jump: bool = True) -> tuple[float, int]:
        cap = store.capture(run)
        t0 = time.perf_counter()
        out = loop.run_until_complete(execute(target if jump else direct, ProgramSpec(probe="gen", source=gen), cap,
                                              pool=pool))
        cap.close()
        seconds = time.perf_counter() - t0
        assert out.classification == "completed", out.reason
        return seconds, store.output_summary(run)["bytes"]

    def discard() -> tuple[float, int]:
        t0 = time.perf_counter()
        out = loop.run_until_complete(execute(target, ProgramSpec(probe="gen", source=gen), Null(), pool=pool))
        return time.perf_counter() - t0, out.bytes

    # Interleaved pairs (raw, then sleuth, then the transport alone), each figure the median:
    # on a shared 2-core VM one 200 MB run of either varies by ±30 % from one second to the
    # next, so a single pair says more about the neighbours than about sleuth. The ratio is
    # the median of the pairs' ratios. Each capture goes into the same store, as a session's
    # runs do; the deferred WAL checkpoint runs between pairs (timed apart, not on the path).
    pairs, direct_pairs, checkpoints = [], [], []
    for i in range(args.pairs):
        t_raw, raw_bytes = raw()
        t_cap, stored = capture(2 * i + 1)
        t_null, null_bytes = discard()
        pairs.append((raw_bytes / t_raw / 1e6, stored / t_cap / 1e6, null_bytes / t_null / 1e6))
        t_raw_d, raw_d_bytes = raw(jump=False)
        t_cap_d, stored_d = capture(2 * i + 2, jump=False)
        direct_pairs.append((raw_d_bytes / t_raw_d / 1e6, stored_d / t_cap_d / 1e6))
        t0 = time.perf_counter()
        store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        checkpoints.append(time.perf_counter() - t0)
    store.close()
    raw_mb_s = statistics.median(p[0] for p in pairs)
    cap_mb_s = statistics.median(p[1] for p in pairs)
    agent_figures = loop.run_until_complete(measure_agent(h, args.runs))
    cli_figures = measure_cli(h, tmp, args.runs)
    fleet_figures = loop.run_until_complete(measure_fleet(h, tmp, args.runs))
    loop.run_until_complete(pool.close())
    loop.close()
    return {
        "fresh_ssh_s": round(t_fresh, 4),
        "controlmaster_s": round(t_cm, 4),
        "sleuth_s": round(t_sleuth, 4),
        "state_read_session_s": round(t_state_session, 4),
        "state_read_session_vs_probe": round(t_state_session / t_sleuth, 3),
        "vs_fresh_ssh": round(t_fresh / t_sleuth, 3),
        "vs_controlmaster": round(t_sleuth / t_cm, 3),
        "megabytes": mb,
        "raw_mb_s": round(raw_mb_s, 1),
        "sleuth_mb_s": round(cap_mb_s, 1),
        "capture_vs_raw": round(statistics.median(c / r for r, c, _ in pairs), 3),
        "capture_pairs": [[round(x, 1) for x in p] for p in pairs],
        "raw_direct_mb_s": round(statistics.median(p[0] for p in direct_pairs), 1),
        "sleuth_direct_mb_s": round(statistics.median(p[1] for p in direct_pairs), 1),
        "capture_direct_vs_raw_direct": round(statistics.median(c / r for r, c in direct_pairs), 3),
        "capture_direct_pairs": [[round(x, 1) for x in p] for p in direct_pairs],
        "checkpoint_after_s": round(statistics.median(checkpoints), 3),
        "asyncssh_discard_mb_s": round(statistics.median(p[2] for p in pairs), 1),
        "fresh_ssh_true_s": round(t_fresh_true, 4),
        "controlmaster_true_s": round(t_cm_true, 4),
        "sleuth_true_s": round(t_sleuth_true, 4),
        "stored_bytes": stored,
        "raw_bytes": raw_bytes,
        **agent_figures,
        "agent_vs_controlmaster": round(agent_figures["agent_s"] / t_cm, 4),
        **cli_figures,
        "cli_second_vs_controlmaster": round(cli_figures["cli_second_run_s"] / t_cm, 4),
        "cli_whole_second_vs_controlmaster": round(cli_figures["cli_second_command_s"] / t_cm, 3),
        **measure_start(args.runs),
        **fleet_figures,
    }


def measure_cli(h: SshHarness, tmp: Path, runs: int) -> dict:
    """`sleuth probe run --script trivial.py --target ct200` as a user types it, again and
    again: the first starts the broker and the agent; the later ones reuse them. The run's own
    seconds (from --json) and the whole command's wall time. (A trivial Python probe, as the
    ControlMaster baseline sends: `--shell` would time the target's ~/.bashrc too, which bash
    reads when it runs under sshd — 0.15 s on this machine's pyenv setup.)"""
    import os

    project = tmp / "cli"
    project.mkdir(exist_ok=True)
    (project / "sleuth.toml").write_text(h.toml("ct200"))
    sleuth = [sys.executable, "-m", "sleuth"]
    env = {**os.environ, "SLEUTH_AGENT_IDLE": "120"}
    compile_bytecode()
    subprocess.run([*sleuth, "init"], cwd=project, capture_output=True, check=True, env=env)

    script = project / "trivial.py"
    script.write_text('PROBE = {"id": "trivial", "title": "trivial", "fork": True}\nemit("result", ok=True)\n')

    def once() -> tuple[float, float]:
        t0 = time.perf_counter()
        proc = subprocess.run([*sleuth, "probe", "run", "--script", str(script), "--target", "ct200", "--json", "--force"],
                              cwd=project, capture_output=True, text=True, env=env)
        wall = time.perf_counter() - t0
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)["seconds"], wall

    first_run, first_wall = once()
    # the broker's agent imports torch once it is idle (for warm fingerprints): a user's next
    # command comes seconds later; the figures are for an agent that is ready
    end = time.monotonic() + 60
    while time.monotonic() < end:
        st = json.loads(subprocess.run([*sleuth, "agent", "status", "--json"], cwd=project, capture_output=True,
                                       text=True, env=env).stdout)
        if st.get("agents") and not any(a["busy"] for a in st["agents"]):
            break
        time.sleep(0.2)
    later = [once() for _ in range(runs)]
    t0 = time.perf_counter()
    subprocess.run([*sleuth, "--version"], capture_output=True, check=True)
    startup = time.perf_counter() - t0
    subprocess.run([*sleuth, "agent", "stop"], cwd=project, capture_output=True, env=env)
    return {
        "cli_first_run_s": round(first_run, 4),
        "cli_first_command_s": round(first_wall, 3),
        "cli_second_run_s": round(statistics.median(r for r, _ in later), 4),
        "cli_second_command_s": round(statistics.median(w for _, w in later), 3),
        "cli_python_start_s": round(startup, 3),
    }


async def measure_fleet(h: SshHarness, tmp: Path, runs: int) -> dict:
    """One probe on a fleet of 16 members (16 targets through the jump host, one agent each)
    vs a fleet of one, with the agents up (the first fan-out starts them: timed apart)."""
    from sleuth.hypotheses import load_catalog
    from sleuth.probes import Config, Fleet, Target, probe_from_file
    from sleuth.sessions import Investigation, run_fleet

    script = tmp / "trivial_probe.py"
    script.write_text('PROBE = {"id": "trivial", "title": "trivial", "timeout": 60}\nemit("result", ok=True)\n')
    probe = probe_from_file(script)
    members = {f"m{i:02d}": h.target(f"m{i:02d}") for i in range(16)}
    config = Config(None, {**members, "one": Target("one", fleet=Fleet("list", names=("m00",))),
                           "sixteen": Target("sixteen", fleet=Fleet("list", names=tuple(members)))})
    inv = Investigation.create(tmp / "fleet.sleuth", "bench", load_catalog())
    agents = AgentPool()

    cpu: list[float] = []

    async def fan(fleet: str) -> float:
        c0 = busy_cpu()
        t0 = time.perf_counter()
        report = await run_fleet(inv, config, config.target(fleet), probe, {}, runner=agents, force=True)
        assert report.comparison is not None and not report.comparison.unreachable, report.comparison.unreachable
        cpu.append(busy_cpu() - c0)
        return time.perf_counter() - t0

    try:
        cold16 = await fan("sixteen")
        one = statistics.median([await fan("one") for _ in range(runs)])
        cpu.clear()
        sixteen = statistics.median([await fan("sixteen") for _ in range(max(runs // 3, 3))])
    finally:
        await agents.close()
        inv.close()
    # every member's far end, both sshds and sleuth share this machine's cores: the sixteen
    # cannot end before their CPU seconds / cores (bench/fleet_scale.py says more)
    floor = statistics.median(cpu) / len(os.sched_getaffinity(0))
    return {
        "fleet_one_s": round(one, 4),
        "fleet16_s": round(sixteen, 4),
        "fleet16_first_s": round(cold16, 3),
        "fleet16_vs_one": round(sixteen / one, 3),
        "fleet16_cpu_floor_s": round(floor, 4),
        "fleet16_vs_cpu_floor": round(sixteen / floor, 2),
    }


async def measure_agent(h: SshHarness, runs: int) -> dict:
    class Null:
        def write(self, stream: str, data: bytes) -> None:
            pass

        def flush(self) -> None:
            pass

    async def median(make, n: int) -> float:
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            await make()
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    target = h.target(python=sys.executable)  # this interpreter has torch, for the fingerprint
    agents = AgentPool()
    try:
        t0 = time.perf_counter()
        agent = await agents.get(target)
        start_s = time.perf_counter() - t0
        trivial = ProgramSpec(probe="trivial", source=TRIVIAL, fork=True)
        fresh = ProgramSpec(probe="trivial", source=TRIVIAL)

        async def one(spec=trivial) -> None:
            out = await execute(target, spec, Null(), runner=agents)
            assert out.classification == "completed", out.reason

        await one()
        t_one = await median(one, runs)

        async def state_read() -> None:
            got = await measure_state(target, runner=agents)
            assert got.state is not None, got.unknown

        t_state = await median(state_read, runs)
        t_fresh = await median(lambda: one(fresh), runs)
        t_eight = await median(lambda: asyncio.gather(*(one() for _ in range(8))), max(runs // 2, 3))

        fp = builtin_probes()["env-fingerprint"]
        cold_spec = ProgramSpec(probe=fp.id, source=fp.source, filename=fp.path.name, params=dict(fp.params))
        warm_spec = ProgramSpec(**{**cold_spec.__dict__, "fork": True})
        t0 = time.perf_counter()
        warmed = await agent.warm(["torch"])
        warm_torch_s = time.perf_counter() - t0
        assert "torch" in warmed["warm"], warmed
        t_cold = await median(lambda: one(cold_spec), max(runs // 3, 3))
        t_warm = await median(lambda: one(warm_spec), max(runs // 3, 3))
    finally:
        await agents.close()
    return {
        "agent_start_s": round(start_s, 4),
        "agent_s": round(t_one, 4),
        "state_read_agent_s": round(t_state, 4),
        "agent_fresh_s": round(t_fresh, 4),
        "agent_parallel8_s": round(t_eight, 4),
        "agent_parallel8_vs_one": round(t_eight / t_one, 3),
        "agent_warm_torch_s": round(warm_torch_s, 3),
        "fingerprint_cold_s": round(t_cold, 4),
        "fingerprint_warm_s": round(t_warm, 4),
        "warm_vs_cold_fingerprint": round(t_warm / t_cold, 4),
    }


if __name__ == "__main__":
    main()
