"""`sleuth probe …` and `sleuth target …` as a user runs them, against the real sshd."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sleuth.probes import ConfigError, load_config
from support.cli import sleuth


@pytest.fixture
def project(make_project, sshd) -> Path:
    return make_project(toml=sshd.toml("ct200") + "\n" + sshd.toml("ct999", container="999"))


def test_target_show_prints_what_each_hop_receives(project, sshd):
    out = sleuth(project, "target", "show", "ct200", "--probe", "env-fingerprint").stdout
    assert f"ssh 127.0.0.1:{sshd.servers['jump'].port} (jump)" in out
    assert f"one command string for its login shell: pct exec 200 -- {sshd.python} -" in out
    assert f"argv ['{sshd.python}', '-']" in out
    assert "prelude + probe env-fingerprint" in out and "never quoted" in out
    out = sleuth(project, "target", "show", "ct200", "--shell", "nvidia-smi | tail -20").stdout
    assert "['bash', '-c', 'nvidia-smi | tail -20']" in out


def test_target_check_round_trips_through_every_hop(project, sshd):
    out = sleuth(project, "target", "check", "ct200").stdout
    assert "parameters came back byte for byte" in out
    assert f"interpreter: {sshd.python}" in out and "venv: True" in out
    # what was configured and what the far end said of itself, each named as such
    assert f"hops: ssh 127.0.0.1:{sshd.servers['jump'].port} (jump), ssh " in out and "container pct 200 (configured)" in out
    assert "the far end runs inside a lxc container, detected" in out
    data = json.loads(sleuth(project, "target", "check", "ct200", "--json").stdout)
    assert data["ok"] and data["far_end"]["echo"] == ["it's", '"quoted"', "$HOME", "`id`", "a\\b", "ü"]


def test_target_check_says_which_hop_broke(project):
    proc = sleuth(project, "target", "check", "ct999", check=False)
    assert proc.returncode == 1
    assert "BROKEN at the container hop (pct 999)" in proc.stderr
    assert "nodes/pve/lxc/999.conf' does not exist" in proc.stderr


def test_probe_run_json_records_the_run_with_evidence(project):
    proc = sleuth(project, "probe", "run", "cache-inventory", "--target", "ct200", "--json")
    data = json.loads(proc.stdout)
    assert set(data) >= {"run_id", "classification", "reason", "records", "state_key", "lines", "output"}
    assert data["classification"] == "completed"
    assert [r["kind"] for r in data["records"]] == ["result", "done"]
    assert data["lines"] == {"stdout": 3, "stderr": 0}
    assert data["output"].endswith(f"#run/{data['run_id']}")
    assert data["evidence"] and data["evidence"][0]["hypothesis"] == "cache-invalidation"
    hyps = {h["id"]: h for h in json.loads(sleuth(project, "hypotheses", "--json").stdout)}
    ev = hyps["cache-invalidation"]["evidence"]
    # one verdict: supports or refutes where the far end has torch; this stand-in has none, and
    # caches with no torch to key them say nothing either way
    result = next(r for r in data["records"] if r["kind"] == "result")
    assert sum(ev.values()) == 1, ev
    if result["torch_installed"] is None:
        assert ev["inconclusive"] == 1 and result["keys_said"] == "torch is not installed here", (ev, result)
    # the same check again, nothing changed: refused without --force, exit 3, recorded
    again = sleuth(project, "probe", "run", "cache-inventory", "--target", "ct200", "--json", check=False)
    assert again.returncode == 3 and f"repeats #{data['run_id']}" in again.stderr
    forced = json.loads(sleuth(project, "probe", "run", "cache-inventory", "--target", "ct200", "--json", "--force",
                               "--reason", "the cache folder was remounted").stdout)
    assert forced["retest_of"] == data["run_id"]
    flags = [
        e for e in json.loads(sleuth(project, "events", "--json").stdout)
        if e["kind"] == "flag.raised" and e["data"]["flag"] == "circular-retest"
    ]
    assert [f["data"].get("declined", False) for f in flags] == [True, False]
    assert flags[1]["data"]["forced_because"] == "the cache folder was remounted" and flags[1]["author"] == "cli"
    assert "run anyway: the cache folder was remounted" in sleuth(project, "export", "--format", "markdown").stdout
    assert "--reason goes with --force" in sleuth(project, "probe", "run", "cache-inventory", "--target", "ct200",
                                                  "--reason", "x", check=2).stderr


def test_probe_run_script_and_params(project, tmp_path):
    script = tmp_path / "mine.py"
    script.write_text("import sys\nprint('x' * 10)\nemit('result', threads=params['threads'], name=params['name'], py=sys.version_info[0])\n")
    data = json.loads(
        sleuth(project, "probe", "run", "--script", str(script), "--target", "ct200", "--param", "threads=4",
               "--param", "name=it's $x", "--json").stdout
    )
    assert data["classification"] == "completed"
    assert data["records"][0] == {"kind": "result", "threads": 4, "name": "it's $x", "py": 3}
    assert data["probe"] == "script:mine.py"


def test_probe_run_bad_input_is_exit_2(project):
    for args, words in (
        (["probe", "run", "no-such"], "unknown probe 'no-such'"),
        (["probe", "run", "cache-inventory", "--target", "nowhere"], "no target 'nowhere'"),
        (["probe", "run", "cache-inventory", "--param", "oops"], "expected KEY=VALUE"),
        (["probe", "run", "--script", "/no/such.py"], "no such file"),
    ):
        proc = sleuth(project, *args, check=False)
        assert proc.returncode == 2 and words in proc.stderr, (args, proc.stderr)


@pytest.mark.parametrize(
    ("body", "line", "words"),
    [
        ('ssh = "gpu"\nport = "22"\n', 4, "targets.bad.port: must be a port number"),
        ('ssh = "gpu"\ncontainer = { kind = "docker" }\n', 4, "targets.bad.container.id: a docker container needs an id"),
        ('ssh = "gpu"\ncolour = "red"\n', 4, "targets.bad.colour: unknown key"),
        ('jump = ["bastion"]\n', 3, "a jump chain needs ssh"),
        ('ssh = "gpu"\nenv = { A = ["x"] }\n', 4, "targets.bad.env"),
        ('ssh = "gpu"\nconnect_timeout = 0\n', 4, "connect_timeout: must be more than 0"),
    ],
)
def test_bad_target_names_key_and_line(tmp_path, body, line, words):
    path = tmp_path / "sleuth.toml"
    path.write_text("# targets\n[targets.bad]\n" + body)
    config = load_config(path)  # a broken target blocks only what uses it
    with pytest.raises(ConfigError) as err:
        config.target("bad")
    assert err.value.line == line, str(err.value)
    assert words in str(err.value)
    assert str(err.value).startswith(f"{path}:{line}:")


def test_an_unknown_key_in_an_unused_target_warns_and_a_wrong_target_lists_the_targets(project):
    config = project / "sleuth.toml"
    config.write_text(config.read_text() + '\n[targets.old]\nssh = "gpu1"\npyhton = "/usr/bin/python3"\n')
    line = config.read_text().splitlines().index('pyhton = "/usr/bin/python3"') + 1
    proc = sleuth(project, "hypotheses", check=False)  # uses no target: works, with a warning
    assert proc.returncode == 0 and "compile-race" in proc.stdout
    assert f"sleuth: warning: {config}:{line}:1: targets.old.pyhton: unknown key" in proc.stderr
    # said once per change of the file: the next command is quiet, an edit says it again
    again = sleuth(project, "hypotheses", check=False)
    assert again.returncode == 0 and "warning" not in again.stderr, again.stderr
    config.write_text(config.read_text() + "\n# edited\n")
    edited = sleuth(project, "hypotheses", check=False)
    assert f"sleuth: warning: {config}:{line}:1: targets.old.pyhton: unknown key" in edited.stderr
    proc = sleuth(project, "probe", "run", "cache-inventory", "--target", "old", check=False)  # uses it: the error
    assert proc.returncode == 2 and f"sleuth: error: {config}:{line}:1: targets.old.pyhton: unknown key" in proc.stderr
    proc = sleuth(project, "probe", "run", "cache-inventory", "--target", "nowhere", check=False)
    assert proc.returncode == 2
    err = proc.stderr.splitlines()[-1]
    assert err.startswith("sleuth: error: no target 'nowhere'; targets: local") and ":1:1" not in err


def test_good_config_parses_every_key(tmp_path):
    path = tmp_path / "sleuth.toml"
    path.write_text(
        '[targets.ct200]\nssh = "root@10.1.2.6"\njump = ["bastion", "edge:2222"]\nport = 22\nuser = "root"\n'
        'identity = "~/.ssh/id_ed25519"\ncontainer = { kind = "pct", id = "200" }\npython = "/root/venv/bin/python3"\n'
        'env = { PYTORCH_CUDA_ALLOC_CONF = "expandable_segments:True" }\nworkdir = "/root/dflash"\n'
        'code = { local = "drafter/", remote = "/root/dflash" }\nconnect_timeout = 10\n'
    )
    t = load_config(path).target("ct200")
    assert t.jump == ("bastion", "edge:2222") and t.container.kind == "pct" and t.container.id == "200"
    assert t.code_remote == "/root/dflash" and t.env == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    from sleuth.probes import HopChain

    chain = HopChain.python(t)
    assert chain.far_argv == [
        "pct", "exec", "200", "--", "env", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
        "sh", "-c", 'cd -- "$1" && shift && exec "$@"', "sleuth-cd", "/root/dflash", "/root/venv/bin/python3", "-",
    ]
    assert chain.remote_command.count("'") == 2  # one shlex.join: only the sh script needed quotes


MODEL = (
    "import torch\n"
    "from torch.nn.attention.flex_attention import flex_attention\n\n"
    "# drafter kernel\n"
    "flex = torch.compile(flex_attention, dynamic=False)\n"
)


@pytest.mark.slow
@pytest.mark.parametrize("container", [None, "200"], ids=["sftp", "through-pct"])
def test_remedy_on_a_remote_target_keeps_the_original_and_reverts(tmp_path, sshd, container):
    remote = tmp_path / "remote-code"
    remote.mkdir()
    (remote / "model.py").write_bytes(MODEL.encode())
    d = tmp_path / "proj"
    d.mkdir()
    sleuth(d, "init")
    name = "gpu" if container is None else "ct"
    (d / "sleuth.toml").write_text(
        (d / "sleuth.toml").read_text() + "\n" + sshd.toml(name, jump=True, container=container)
        + f'code = {{ remote = "{remote}" }}\n'
    )
    out = sleuth(d, "remedy", "preview", "lock", "model.py", "--target", name).stdout
    assert "+flex = _sleuth_serialized(torch.compile(flex_attention, dynamic=False))" in out
    assert (remote / "model.py").read_bytes() == MODEL.encode()  # a preview writes nothing there
    sleuth(d, "remedy", "apply", "lock", "model.py", "--target", name)
    after = (remote / "model.py").read_text()
    assert "_sleuth_serialized(torch.compile(flex_attention" in after and "# drafter kernel" in after
    assert (remote / "model.py.sleuth-orig").read_bytes() == MODEL.encode()  # the original kept beside it
    assert not list(remote.glob("*.sleuth-tmp"))
    # changed behind sleuth's back: revert refuses
    (remote / "model.py").write_text(after + "# edited on the box\n")
    proc = sleuth(d, "remedy", "revert", "model.py", "--target", name, check=False)
    assert proc.returncode == 2 and "changed since lock was applied" in proc.stderr
    (remote / "model.py").write_text(after)
    sleuth(d, "remedy", "revert", "model.py", "--target", name)
    assert (remote / "model.py").read_bytes() == MODEL.encode()


TRACER = (
    "import torch\n"
    "from torch.fx.experimental.proxy_tensor import make_fx\n\n\n"
    "def features(target, x):\n"
    "    return make_fx(target)(x)(x)\n"
)


@pytest.mark.slow
@pytest.mark.parametrize("container", [None, "200"], ids=["sftp", "through-pct"])
def test_the_lock_on_a_remote_code_tree_is_one_application(tmp_path, sshd, container):
    remote = tmp_path / "remote-code"
    (remote / "pkg").mkdir(parents=True)
    (remote / ".venv" / "lib").mkdir(parents=True)
    files = {"model.py": MODEL, "pkg/features.py": TRACER, "pkg/util.py": "X = 1\n", ".venv/lib/skip.py": MODEL}
    for name, text in files.items():
        (remote / name).write_text(text)
    d = tmp_path / "proj"
    d.mkdir()
    sleuth(d, "init")
    name = "gpu" if container is None else "ct"
    (d / "sleuth.toml").write_text(
        (d / "sleuth.toml").read_text() + "\n" + sshd.toml(name, jump=True, container=container)
        + f'code = {{ remote = "{remote}" }}\n'
    )
    out = sleuth(d, "remedy", "apply", "lock", "--target", name).stdout  # PATH: the target's code tree
    assert "remote-code/model.py" in out and "remote-code/pkg/features.py" in out and "application #1" in out
    assert "_sleuth_serialized(torch.compile(flex_attention" in (remote / "model.py").read_text()
    assert "_sleuth_serialized(make_fx(target))(x)(x)" in (remote / "pkg" / "features.py").read_text()
    assert (remote / "pkg" / "util.py").read_text() == "X = 1\n" and (remote / ".venv/lib/skip.py").read_text() == MODEL
    apps = [e for e in json.loads(sleuth(d, "events", "--json").stdout) if e["kind"] == "remedy.applied"]
    assert len(apps) == 1 and len(apps[0]["data"]["files"]) == 2
    sleuth(d, "remedy", "revert", "--target", name)
    assert {n: (remote / n).read_text() for n in files} == files


def test_the_live_echo_shows_records_short_and_everything_else_as_it_comes(capfdbinary):
    """`probe run` echoes the output live: a record line (split across chunks, as a pipe
    delivers it) is shown as ⟨record⟩ and the start of its JSON, never the protocol's marker;
    other lines, a line that only starts like the marker, and a progress bar's \\r pass as they
    are, at once."""
    from sleuth.app.probe_cli import RECORD_SHOWN, _Echo

    echo = _Echo(set())
    big = '{"kind": "rank", "frames": "' + "x" * 1000 + '"}'
    for chunk in (b"step 1\n@@sle", b"uth:0123abcd " + big[:300].encode(), big[300:].encode() + b"\n@@",
                  b"slip not a record\nprogress 10%\r", b"progress 100%\n@@sleuth:0123abcd {\"kind\": \"done\"}\n"):
        echo("stdout", chunk)
    echo.finish(1)
    out = capfdbinary.readouterr().out.decode()
    assert "@@sleuth" not in out
    lines = out.split("\n")
    assert lines[0] == "step 1"
    assert lines[1] == f"⟨record⟩ {big[:RECORD_SHOWN]}… (+{len(big) - RECORD_SHOWN} chars: `sleuth output` has it whole)"
    assert lines[2:5] == ["@@slip not a record", "progress 10%\rprogress 100%", '⟨record⟩ {"kind": "done"}']


def test_a_target_that_cannot_be_reached_is_exit_1_and_bad_input_is_exit_2(tmp_path, sshd):
    """Issue 35: every layer's error was exit 2 ("bad input"), a transport fault included. A
    target whose sshd is down (a real port that nothing listens on) is now 1 wherever it is met —
    a run, a remedy's preview, apply and revert, the code tree — and records nothing as
    evidence; a malformed sleuth.toml, an unknown probe or target stay 2."""
    import socket

    with socket.socket() as s:  # a port that was free a moment ago: connection refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    d = tmp_path / "proj"
    d.mkdir()
    sleuth(d, "init")
    down = sshd.toml("down", jump=False, container=None).replace(f"port = {sshd.servers['gpu'].port}", f"port = {port}")
    assert f"port = {port}" in down
    (d / "sleuth.toml").write_text((d / "sleuth.toml").read_text() + "\n" + down + 'code = { remote = "/srv/code" }\n')
    before = json.loads(sleuth(d, "hypotheses", "--json").stdout)

    run = sleuth(d, "probe", "run", "env-fingerprint", "--target", "down", "--json", check=1)
    assert json.loads(run.stdout)["classification"] == "transport"
    for args in (("remedy", "preview", "lock", "model.py"), ("remedy", "apply", "lock", "model.py"),
                 ("remedy", "apply", "lock"), ("remedy", "preview", "lock")):
        proc = sleuth(d, *args, "--target", "down", check=1)
        assert "hop 1 (ssh root@127.0.0.1): connection refused" in proc.stderr and "Traceback" not in proc.stderr
        assert "no module here" not in proc.stderr  # not reached is not "nothing there"
    assert json.loads(sleuth(d, "hypotheses", "--json").stdout) == before  # nothing became evidence

    assert "unknown probe" in sleuth(d, "probe", "run", "no-such-probe", "--target", "down", check=2).stderr
    assert sleuth(d, "probe", "run", "env-fingerprint", "--target", "nowhere", check=2).stderr.startswith("sleuth: error")
    (d / "sleuth.toml").write_text((d / "sleuth.toml").read_text() + "\n[targets.down]\nport = 1\n")
    proc = sleuth(d, "probe", "run", "env-fingerprint", "--target", "down", check=2)
    assert "sleuth.toml:" in proc.stderr
