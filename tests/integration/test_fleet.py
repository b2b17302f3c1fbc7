"""Fleets against real parts: four members behind the real sshd, each with a venv of its own
(one has another version of a package) and a fifth whose sshd is down; the four nodes of a
job on a real Slurm cluster (one node's venv differs); members from an OpenSSH client config.
The odd one is named, the unreachable one is `transport` and no evidence, who the members
were is in the session, and a second run in the same state reuses the answers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import SLEUTH, sleuth
from support.sshd_harness import free_port
from support.wheels import pip, wheel

FP = ("probe", "run", "env-fingerprint", "--param", "import_torch=false", "--json")


@pytest.fixture(scope="module")
def member_venvs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """node1..node4: sleuth-demo-pkg 1.0, except the odd one (node3): 2.0."""
    root = tmp_path_factory.mktemp("member-venvs")
    wheels = root / "wheels"
    wheels.mkdir()
    one, two = wheel(wheels, "sleuth-demo-pkg", "1.0"), wheel(wheels, "sleuth-demo-pkg", "2.0")
    out = {}
    for name in ("node1", "node2", "node3", "node4"):
        venv = root / name
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        pip(venv, "install", "--no-index", "--no-deps", str(two if name == "node3" else one))
        out[name] = venv
    return out


def _comparison(out: str) -> dict:
    data = json.loads(out)
    return data


@pytest.mark.slow
def test_four_members_over_ssh_the_odd_one_named_and_a_dead_one_is_transport(tmp_path, sshd, member_venvs):
    d = tmp_path / "proj"
    d.mkdir()
    gpu = sshd.servers["gpu"]
    common = (f'ssh = "{sshd.user}@127.0.0.1"\nidentity = "{sshd.client_key}"\nknown_hosts = "{sshd.known_hosts}"\n'
              "connect_timeout = 5\n")
    toml = "".join(f'[targets.{n}]\n{common}port = {gpu.port}\npython = "{v}/bin/python"\n\n' for n, v in member_venvs.items())
    toml += f'[targets.node5]\n{common}port = {free_port()}\npython = "python3"\n\n'  # its sshd is down
    toml += '[targets.nodes]\nmembers = ["node1", "node2", "node3", "node4", "node5"]\n'
    (d / "sleuth.toml").write_text(toml)
    sleuth(d, "init")
    proc = sleuth(d, *FP, "--target", "nodes", check=1)  # exit 1: not every member answered
    data = _comparison(proc.stdout)
    comp = data["comparison"]
    assert data["members"] == ["node1", "node2", "node3", "node4", "node5"]
    assert set(comp["runs"]) == {"node1", "node2", "node3", "node4"} and list(comp["unreachable"]) == ["node5"]
    assert "connection refused" in comp["unreachable"]["node5"]
    pkg = next(s for s in comp["spreads"] if s["name"] == "sleuth-demo-pkg")
    assert pkg["majority"] == "1.0" and pkg["holders"] == ["node1", "node2", "node4"] and pkg["odd"] == {"node3": "2.0"}
    assert pkg["drift"] and "sleuth-demo-pkg: 3 of 4 members 1.0; node3: 2.0" in data["sentences"]
    assert data["headline"].startswith("1 field differs among 4 members; the odd one out: node3"), data["headline"]
    # the same venvs otherwise: nothing else differs but what the package brings
    assert {s["name"] for s in comp["spreads"]} == {"sleuth-demo-pkg"}, [s["name"] for s in comp["spreads"]]
    assert data["evidence"] == [{"member": "node3", "run": comp["runs"]["node3"], "verdict": "supports",
                                 "hypothesis": "version-drift"}]
    events = json.loads(sleuth(d, "events", "--json").stdout)
    expanded = [e["data"] for e in events if e["kind"] == "fleet.expanded"]
    assert [m["name"] for m in expanded[0]["members"]] == ["node1", "node2", "node3", "node4", "node5"]
    runs = {e["data"]["run"]: e["data"] for e in events if e["kind"] == "run.finished"}
    dead = comp["runs"].get("node5") or next(r for r, f in runs.items() if f["classification"] == "transport")
    assert runs[dead]["classification"] == "transport"
    evidence = [e["data"] for e in events if e["kind"] == "evidence.recorded" and e["data"]["rule"] == "fleet: members disagree"]
    assert len(evidence) == 1 and evidence[0]["run"] == comp["runs"]["node3"] and evidence[0]["fields"]["member"] == "node3"
    assert "sleuth-demo-pkg 2.0 (3 of 4: 1.0)" in evidence[0]["fields"]["differs"]
    assert not any(e["data"]["run"] == dead for e in events if e["kind"] == "evidence.recorded"), events
    # in words, for a person
    text = sleuth(d, "events").stdout
    assert "fleet nodes: 5 members" in text and "node3 differs" in text
    # again, nothing changed: the four answers stand (not run again); the dead one is tried again
    again = _comparison(sleuth(d, *FP, "--target", "nodes", check=1).stdout)
    assert set(again["reused"]) == {"node1", "node2", "node3", "node4"} and list(again["runs"]) == ["node5"]
    assert next(s for s in again["comparison"]["spreads"] if s["name"] == "sleuth-demo-pkg")["odd"] == {"node3": "2.0"}
    human = sleuth(d, "probe", "run", "env-fingerprint", "--param", "import_torch=false", "--target", "nodes", check=1).stdout
    assert "sleuth-demo-pkg: 3 of 4 members 1.0; node3: 2.0" in human and "not run again" in human
    assert "supports version-drift: node3" in human
    # the postmortem's fleet section: who the members were, the matrix, who was not reached
    sleuth(d, "export", "-o", "postmortem.md")
    md = (d / "postmortem.md").read_text()
    assert "## Fleets" in md and "Members (targets node1, node2, node3, node4, node5)" in md
    assert "| sleuth-demo-pkg ⚠ | 1.0 | 1.0 | **2.0** | 1.0 |" in md
    assert "- node5: not reached — hop 1" in md and "(no evidence)" in md


@pytest.mark.slow
def test_the_nodes_of_a_real_slurm_job_the_odd_node_named(tmp_path, slurm, member_venvs):
    d = tmp_path / "proj"
    d.mkdir()
    wrapper = tmp_path / "python"  # each node has its own venv at the same path, as on a cluster
    venvs = member_venvs["node1"].parent
    wrapper.write_text(f'#!/bin/sh\nexec "{venvs}/$SLURMD_NODENAME/bin/python" "$@"\n')
    wrapper.chmod(0o755)
    (d / "sleuth.toml").write_text(f'[targets.job]\npython = "{wrapper}"\nmembers = {{ slurm_job = "{slurm.job}" }}\n')
    env = slurm.env
    subprocess.run([SLEUTH, "init"], cwd=d, env=env, check=True, capture_output=True)
    proc = subprocess.run([SLEUTH, *FP, "--target", "job"], cwd=d, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["members"] == ["job/node1", "job/node2", "job/node3", "job/node4"]
    comp = data["comparison"]
    pkg = next(s for s in comp["spreads"] if s["name"] == "sleuth-demo-pkg")
    assert pkg["odd"] == {"job/node3": "2.0"} and pkg["majority"] == "1.0"
    assert [e["member"] for e in data["evidence"]] == ["job/node3"]
    # each member ran on its node, through srun into the job
    events = json.loads(subprocess.run([SLEUTH, "events", "--json"], cwd=d, env=env, capture_output=True, text=True,
                                       check=True).stdout)
    expanded = next(e["data"] for e in events if e["kind"] == "fleet.expanded")
    assert expanded["how"] == f"the nodes of Slurm job {slurm.job}"
    assert [m["definition"]["container"]["node"] for m in expanded["members"]] == ["node1", "node2", "node3", "node4"]
    out = subprocess.run([SLEUTH, "output", str(comp["runs"]["job/node3"])], cwd=d, env=env, capture_output=True,
                         text=True, check=True).stdout
    assert f"{venvs}/node3" in out  # the interpreter of node3's venv answered


@pytest.mark.slow
def test_a_slurm_job_that_is_gone_is_a_clear_error(tmp_path, slurm):
    d = tmp_path / "proj"
    d.mkdir()
    (d / "sleuth.toml").write_text('[targets.job]\nmembers = { slurm_job = "999999" }\n')
    subprocess.run([SLEUTH, "init"], cwd=d, env=slurm.env, check=True, capture_output=True)
    proc = subprocess.run([SLEUTH, *FP, "--target", "job"], cwd=d, env=slurm.env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Slurm job 999999" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_members_from_an_ssh_client_config(tmp_path, sshd, member_venvs):
    import asyncio

    from sleuth.probes import load_config
    from sleuth.sessions import expand_fleet

    gpu = sshd.servers["gpu"]
    cfg = tmp_path / "ssh_config"
    cfg.write_text(
        "# the cluster\n"
        + "".join(f"Host gpu-{i}\n  HostName 127.0.0.1\n  Port {gpu.port}\n" for i in (1, 2, 3))
        + f"Host login\n  HostName 127.0.0.1\n\nHost gpu-*\n  User {sshd.user}\n  IdentityFile {sshd.client_key}\n"
        f"  UserKnownHostsFile {sshd.known_hosts}\n"
    )
    d = tmp_path / "proj"
    d.mkdir()
    (d / "sleuth.toml").write_text(
        f'[targets.gpus]\npython = "{member_venvs["node1"]}/bin/python"\n'
        f'members = {{ ssh_config = "gpu-*", file = "{cfg}" }}\n')
    config = load_config(d / "sleuth.toml")
    members = asyncio.run(expand_fleet(config, config.target("gpus")))
    assert [m.name for m in members] == ["gpus/gpu-1", "gpus/gpu-2", "gpus/gpu-3"]
    assert {(m.ssh, m.port, m.user, m.identity) for m in members} == {("127.0.0.1", gpu.port, sshd.user, str(sshd.client_key))}
    sleuth(d, "init")
    data = json.loads(sleuth(d, *FP, "--target", "gpus").stdout)
    assert set(data["comparison"]["runs"]) == {"gpus/gpu-1", "gpus/gpu-2", "gpus/gpu-3"}
    assert data["comparison"]["spreads"] == [] and data["evidence"] == []
    assert "all 3 members agree" in data["headline"]


KUBECTL = r"""#!/usr/bin/env python3
# A kubectl stand-in (no cluster on this machine): the pods of a small JSON "cluster", and
# `exec` runs the command here with POD_NAME set; every call's argv is logged for the test.
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "calls.log"), "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\n")
pods = json.load(open(os.path.join(here, "pods.json")))
args = sys.argv[1:]
ns = args[args.index("-n") + 1] if "-n" in args else "default"
if args[:2] == ["get", "pods"]:
    key, _, value = args[args.index("-l") + 1].partition("=")
    if "--field-selector=status.phase=Running" not in args:
        sys.exit("stand-in: expected a Running field selector")
    for pod in pods:
        if pod["namespace"] == ns and pod["labels"].get(key) == value and pod["phase"] == "Running":
            print(pod["name"])
    sys.exit(0)
if args[0] == "exec":
    head, rest = args[1:args.index("--")], args[args.index("--") + 1:]
    flags_with_value = {"-n", "-c"}
    words = [a for i, a in enumerate(head) if not a.startswith("-") and (i == 0 or head[i - 1] not in flags_with_value)]
    name = words[0]
    if not any(p["name"] == name and p["namespace"] == ns for p in pods):
        sys.exit(f'Error from server (NotFound): pods "{name}" not found')
    os.environ["POD_NAME"] = name
    os.execvp(rest[0], rest)
sys.exit("stand-in: unsupported " + " ".join(args))
"""


@pytest.mark.slow
def test_the_pods_of_a_label_selector_through_kubectl_exec(tmp_path, member_venvs):
    """kubernetes members: `kubectl get pods -l …` finds the running pods (a pending one and
    another label's are left out), each member runs through `kubectl exec -i -n NS POD -c CTR
    --` (the agent's frames go over its stdin), the odd pod is named. kubectl here is a
    stand-in — there is no cluster on this machine — so what is checked is sleuth's side: the
    calls it makes and what it does with their answers."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    kubectl = bin_dir / "kubectl"
    kubectl.write_text(KUBECTL)
    kubectl.chmod(0o755)
    names = {"drafter-0": "node1", "drafter-1": "node2", "drafter-2": "node3"}
    pods = [{"name": p, "namespace": "ml", "labels": {"app": "drafter"}, "phase": "Running"} for p in names]
    pods.append({"name": "drafter-3", "namespace": "ml", "labels": {"app": "drafter"}, "phase": "Pending"})
    pods.append({"name": "other-0", "namespace": "ml", "labels": {"app": "other"}, "phase": "Running"})
    (bin_dir / "pods.json").write_text(json.dumps(pods))
    venvs = member_venvs["node1"].parent
    wrapper = tmp_path / "python"  # each pod's image has its python at the same path
    cases = " ".join(f'{pod}) exec "{venvs}/{node}/bin/python" "$@";;' for pod, node in names.items())
    wrapper.write_text(f'#!/bin/sh\ncase "$POD_NAME" in {cases} esac\nexit 97\n')
    wrapper.chmod(0o755)
    d = tmp_path / "proj"
    d.mkdir()
    toml = f'[targets.pods]\npython = "{wrapper}"\ncontainer = {{ kind = "none", user = "drafter" }}\n'
    (d / "sleuth.toml").write_text(toml + 'members = { kubernetes = "app=drafter", namespace = "ml" }\n')
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    subprocess.run([SLEUTH, "init"], cwd=d, env=env, check=True, capture_output=True)
    proc = subprocess.run([SLEUTH, *FP, "--target", "pods"], cwd=d, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["members"] == ["pods/drafter-0", "pods/drafter-1", "pods/drafter-2"]
    pkg = next(s for s in data["comparison"]["spreads"] if s["name"] == "sleuth-demo-pkg")
    assert pkg["odd"] == {"pods/drafter-2": "2.0"} and pkg["majority"] == "1.0"
    calls = [json.loads(line) for line in (bin_dir / "calls.log").read_text().splitlines()]
    assert calls[0][:6] == ["get", "pods", "-l", "app=drafter", "-n", "ml"]
    execs = [c for c in calls if c[0] == "exec"]
    assert {tuple(c[:7]) for c in execs} == {("exec", "-i", "-n", "ml", p, "-c", "drafter") for p in names}
    subprocess.run([SLEUTH, "agent", "stop"], cwd=d, env=env, capture_output=True)

    # a namespace with no running pod of that label is a clear error, exit 2
    (d / "sleuth.toml").write_text(toml + 'members = { kubernetes = "app=drafter", namespace = "staging" }\n')
    proc = subprocess.run([SLEUTH, *FP, "--target", "pods"], cwd=d, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "no running pod matches -l app=drafter" in proc.stderr, proc.stderr



@pytest.mark.parametrize(("members", "words"), [
    ('["node1", 3]', "a list of target names"),
    ('{ slurm_job = "1", gpus = "all" }', "exactly one of"),
    ('{ gpus = [-1] }', "a list of device indices"),
    ('{ colour = "red" }', "members.colour: unknown key"),
    ('["self"]', "cannot be its own member"),
])
def test_a_bad_members_table_names_the_line(tmp_path, members, words):
    from sleuth.probes import ConfigError, load_config

    path = tmp_path / "sleuth.toml"
    path.write_text(f"# fleets\n[targets.self]\nmembers = {members}\n")
    with pytest.raises(ConfigError) as err:
        load_config(path).target("self")
    assert words in str(err.value) and str(err.value).startswith(f"{path}:3:")


def test_gpus_of_a_host_without_nvidia_smi_is_a_clear_error(tmp_path):
    if os.path.exists("/usr/bin/nvidia-smi"):
        pytest.skip("this machine has GPUs: the device tests cover them")
    d = tmp_path / "proj"
    d.mkdir()
    (d / "sleuth.toml").write_text('[targets.box]\nmembers = { gpus = "all" }\n')
    sleuth(d, "init")
    proc = sleuth(d, *FP, "--target", "box", check=2)
    assert "nvidia-smi" in proc.stderr and "box" in proc.stderr


async def until(pilot, condition, timeout: float = 120.0) -> None:
    """Until *condition()* holds (a dialog a worker waits on: settle() would wait forever)."""
    import time

    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "the condition never held"
        await pilot.pause(0.05)
    await pilot.pause()


@pytest.mark.slow
async def test_the_ui_runs_a_probe_on_a_fleet_and_shows_the_matrix(tmp_path, member_venvs):
    from sleuth.app.tui import SleuthApp
    from sleuth.app.tui.dialogs import FleetMatrix, RetestDialog, TargetDialog
    from sleuth.sessions import Workspace
    from support.pilot import select, settle
    from textual.widgets import DataTable, OptionList

    d = tmp_path / "proj"
    d.mkdir()
    toml = "".join(f'[targets.{n}]\npython = "{v}/bin/python"\n\n' for n, v in member_venvs.items())
    (d / "sleuth.toml").write_text(toml + '[targets.nodes]\nmembers = ["node1", "node2", "node3", "node4"]\n'
                                   '[probes.env-fingerprint]\nimport_torch = false\n')
    ws = Workspace(d)
    ws.create("fleet").close()
    app = SleuthApp.live(ws)
    async with app.run_test(size=(140, 48)) as pilot:
        await pilot.press("t")
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, TargetDialog)
        options = dialog.query_one(OptionList)
        names = [options.get_option_at_index(i).id for i in range(options.option_count)]
        assert "nodes" in names and "fleet of targets node1, node2, node3, node4" in str(
            options.get_option_at_index(names.index("nodes")).prompt)
        options.highlighted = names.index("nodes")
        await pilot.press("enter")
        await pilot.pause()
        assert app.target.name == "nodes"
        await select(pilot, "probe", "env-fingerprint", "version-drift")
        await pilot.press("r")
        await settle(pilot, timeout=180)
        matrix = app.screen
        assert isinstance(matrix, FleetMatrix)
        table = matrix.query_one(DataTable)
        header = [str(c.label) for c in table.columns.values()]
        assert header[0] == "field" and [h.split(" #")[0] for h in header[1:]] == ["node1", "node2", "node3", "node4"]
        rows = [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]
        assert ["sleuth-demo-pkg ⚠", "1.0", "1.0", "2.0", "1.0"] in rows
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, FleetMatrix)
        st = app.inv.state
        assert len(st.runs) == 4 and {r.target for r in st.runs.values()} == {"node1", "node2", "node3", "node4"}
        timeline = app.screen.query_one("#timeline", OptionList)
        lines = [str(timeline.get_option_at_index(i).prompt) for i in range(timeline.option_count)]
        assert any("⊞ fleet nodes · env-fingerprint" in line and "node3" in line for line in lines), lines
        await pilot.press("m")  # the matrix again, from anywhere
        await pilot.pause()
        assert isinstance(app.screen, FleetMatrix)
        await pilot.press("escape")
        await pilot.pause()

        # again, nothing changed: sleuth asks once for the fleet; "Don't run" keeps the answers
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, RetestDialog))
        dialog = app.screen
        body = str(dialog.query_one("#dialog-body").render())
        assert "4 of 4 members are in the same state as at their last env-fingerprint" in body
        assert all(f"node{i}: as #" in body for i in range(1, 5)), body
        await pilot.press("n")
        await settle(pilot, timeout=120)
        assert isinstance(app.screen, FleetMatrix)
        assert len(app.inv.state.runs) == 4  # nothing ran again
        await pilot.press("escape")
        await pilot.pause()

        # and "Run anyway" runs every member again
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, RetestDialog))
        await pilot.press("y")
        await settle(pilot, timeout=180)
        assert isinstance(app.screen, FleetMatrix)
        st = app.inv.state
        assert len(st.runs) == 8 and sorted(r.target for r in st.runs.values() if r.id > 4) == ["node1", "node2", "node3", "node4"]
