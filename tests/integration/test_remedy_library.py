"""Remedies on a drafter built on a library (HuggingFace transformers): the compile is inside
the installed package, not in the user's script. sleuth says where it is (the compile sites
of the latest fx-trace-state run), never writes into an installed package unless asked, and
answers one line — never a traceback — for a path it cannot use. No torch needed: the
library's module is a stand-in in a folder named site-packages."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from sleuth.probes.remedies import InstalledPackageError, LocalFile, RemedyError, apply_plan, preview
from sleuth.probes.remedies.installed import installed_package
from sleuth.sessions import Workspace
from sleuth.sessions.remedies import compile_sites
from support.cli import sleuth
from support.sessions import record_run

HF_DRAFTER = Path(__file__).resolve().parents[1] / "fixtures" / "hf_drafter" / "train.py"
LIBRARY_SITE = "transformers.integrations.flex_attention:89"
SITES = [
    {"site": LIBRARY_SITE, "file": "/venv/lib/python3.11/site-packages/transformers/integrations/flex_attention.py",
     "line": 89, "target": "flex_attention", "kind": "compile", "reached_from": "transformers.masking_utils:713",
     "library": "transformers", "compiles": 1, "compiled_calls": 40, "uncompiled_calls": 0},
]
TENSOR = {"shape": [1, 4, 64, 16], "stride": [4096, 16, 64, 1], "dtype": "float32", "device": "cpu", "requires_grad": False}
SHAPE = {"q": TENSOR, "k": TENSOR, "v": TENSOR, "grad": False, "compiled": LIBRARY_SITE,
         "block_mask": {"q_len": 64, "kv_len": 64, "B": 1, "H": 1, "block_size": [128, 128], "mask_mod": "causal_mask",
                        "mask_module": "transformers.masking_utils"}}
LIBRARY_MODULE = (
    "import torch\nfrom torch.nn.attention.flex_attention import flex_attention\n\n"
    "class WrappedFlexAttention:\n    def __init__(self):\n        self.compiled = torch.compile(flex_attention)\n"
)
INSTALLED_SAID = ("fakeflex/attn.py is inside the installed package fakeflex (site-packages): a change there is lost on "
                  "reinstall and affects every program of that environment")


MODEL_ONLY = (
    "from transformers import LlamaConfig, LlamaForCausalLM\n\n"
    "config = LlamaConfig(vocab_size=256, hidden_size=64, num_hidden_layers=1, num_attention_heads=4)\n"
    "config._attn_implementation = 'flex_attention'\nmodel = LlamaForCausalLM(config)\n"
)


@pytest.fixture
def project(make_project, tmp_path: Path) -> Path:
    """A project with the user's HF drafter (train.py) and a stand-in installed package."""
    root = tmp_path / "proj"
    root.mkdir()
    shutil.copy(HF_DRAFTER, root / "train.py")
    # the model half of such a drafter, no threads: nothing in it for the lock (its compile is the library's)
    (root / "model_only.py").write_text(MODEL_ONLY)
    lib = root / "venv" / "lib" / "python3.11" / "site-packages" / "fakeflex"
    lib.mkdir(parents=True)
    (lib / "attn.py").write_bytes(LIBRARY_MODULE.encode())
    return make_project()


def record_fx_trace(root: Path, result: dict[str, Any]) -> int:
    with Workspace(root).open(None) as inv:
        return record_run(inv, "fx-trace-state", result, None)


def one_line_error(proc) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sleuth: error: "), proc.stderr
    return lines[0]


# ------------------------------------------------------------ no traceback for any path


def test_a_library_compile_site_in_the_shapes_is_no_traceback(project):
    """The regression: precompile with shapes compiled inside transformers looked the module
    up with Path.with_name('transformers/integrations/flex_attention.py') — ValueError."""
    (project / "shapes.json").write_text(json.dumps([SHAPE]))
    proc = sleuth(project, "remedy", "preview", "precompile", "train.py", "--shapes", "shapes.json", check=2)
    assert "Traceback" not in proc.stderr and "Invalid name" not in proc.stderr
    assert f"cannot find the module-level torch.compile(flex_attention) the recorded calls used (they were compiled at {LIBRARY_SITE})" \
        in proc.stdout
    plan = preview("precompile", project / "train.py", shapes=[SHAPE])  # the library API too
    assert plan.blocked and plan.nothing and not plan.changes


def test_a_module_in_a_subfolder_is_found_beside_the_file(tmp_path):
    assert LocalFile(tmp_path / "train.py").sibling("pkg/model.py").path == tmp_path / "pkg" / "model.py"
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "model.py").write_text("import torch\nfrom torch.nn.attention.flex_attention import flex_attention\n"
                                  "flex = torch.compile(flex_attention)\ndef causal_mask(b, h, q, kv):\n    return q >= kv\n")
    (tmp_path / "train.py").write_text("import threading\nt = threading.Thread(target=print)\nt.start()\n")
    spec = {**SHAPE, "compiled": "pkg.model:3", "block_mask": {**SHAPE["block_mask"], "mask_module": "pkg.model"}}
    plan = preview("precompile", tmp_path / "train.py", shapes=[spec])
    assert not plan.blocked and "from pkg.model import flex as _sleuth_flex" in plan.after.decode()


def test_bad_paths_are_one_line_and_exit_2(project):
    (project / "notes.txt").write_text("print('hi')\n")
    (project / "bad.py").write_bytes(b"\xff\xfe not utf-8\n")
    for args, said in (
        (("preview", "lock", "nowhere.py"), "nowhere.py: no such file"),
        (("apply", "lock", "nowhere.py"), "nowhere.py: no such file"),
        (("preview", "lock", "notes.txt"), "notes.txt: not a Python file"),
        (("preview", "lock", "sleuth.toml"), "sleuth.toml: not a Python file"),
        (("preview", "lock", "bad.py"), "bad.py: not UTF-8 text"),
        (("revert", "train.py"), "no active remedy"),
        (("revert", "nowhere.py"), "no active remedy"),
    ):
        line = one_line_error(sleuth(project, "remedy", *args, check=False))
        assert said in line, (args, line)


def test_a_path_no_file_can_have_is_a_remedy_error(tmp_path):
    with pytest.raises(RemedyError, match="not a usable path"):
        preview("lock", "a\x00b.py")


# ------------------------------------------------------------ installed packages


def test_installed_package_is_told_by_its_folder():
    found = installed_package(Path("/x/.venv/lib/python3.11/site-packages/transformers/integrations/flex_attention.py"), False)
    assert found is not None and (found.package, found.folder, found.relative) == \
        ("transformers", "site-packages", "transformers/integrations/flex_attention.py")
    assert found.said == ("transformers/integrations/flex_attention.py is inside the installed package transformers "
                          "(site-packages): a change there is lost on reinstall and affects every program of that environment")
    deb = installed_package(Path("/usr/lib/python3/dist-packages/six.py"), False)
    assert deb is not None and (deb.package, deb.folder) == ("six", "dist-packages")
    std = installed_package(Path("/usr/lib/python3.12/json/decoder.py"), False)
    assert std is not None and (std.package, std.folder) == ("json", "lib/python3.12")
    here = installed_package(Path(json.__file__), True)  # this interpreter's own standard library
    assert here is not None and here.package == "json"
    assert installed_package(Path("/home/me/drafter/train.py"), False) is None
    assert installed_package(HF_DRAFTER, True) is None


def test_preview_says_installed_package_and_apply_refuses_without_the_flag(project):
    lib = project / "venv" / "lib" / "python3.11" / "site-packages" / "fakeflex" / "attn.py"
    rel = str(lib.relative_to(project))
    out = sleuth(project, "remedy", "preview", "lock", rel).stdout
    assert INSTALLED_SAID in out and "_sleuth_serialized(torch.compile(flex_attention))" in out
    data = json.loads(sleuth(project, "remedy", "preview", "lock", rel, "--json").stdout)
    assert data["installed_package"]["package"] == "fakeflex" and data["installed_package"]["said"] == INSTALLED_SAID
    line = one_line_error(sleuth(project, "remedy", "apply", "lock", rel, check=False))
    assert INSTALLED_SAID in line and "--into-installed-package" in line
    assert lib.read_bytes() == LIBRARY_MODULE.encode()  # nothing written
    # the library API refuses too
    with pytest.raises(InstalledPackageError):
        apply_plan(preview("lock", lib))
    assert lib.read_bytes() == LIBRARY_MODULE.encode()
    # a folder of it: refused as a whole
    line = one_line_error(sleuth(project, "remedy", "apply", "lock", str(lib.parent.relative_to(project)), check=False))
    assert "installed package fakeflex" in line and lib.read_bytes() == LIBRARY_MODULE.encode()


def test_apply_with_the_flag_says_so_and_revert_is_byte_exact(project, monkeypatch, capsys):
    from sleuth.app.remedy_cli import cmd_apply

    lib = project / "venv" / "lib" / "python3.11" / "site-packages" / "fakeflex" / "attn.py"
    rel = str(lib.relative_to(project))
    monkeypatch.chdir(project)
    args = argparse.Namespace(name="lock", path=rel, target="local", shapes=None, hypothesis=None, session=None,
                              into_installed_package=True)
    assert cmd_apply(args) == 0
    out = capsys.readouterr().out
    assert "_sleuth_serialized" in lib.read_text()
    assert "changed the installed package fakeflex (site-packages): fakeflex/attn.py" in out
    assert f"sleuth remedy revert {rel}" in out
    proc = sleuth(project, "remedy", "revert", rel)
    assert "the installed package fakeflex (site-packages) is as it was installed again" in proc.stdout
    assert lib.read_bytes() == LIBRARY_MODULE.encode()


def test_the_flag_on_the_command_line(project):
    assert "--into-installed-package" in sleuth(project, "remedy", "apply", "--help").stdout
    lib = project / "venv" / "lib" / "python3.11" / "site-packages" / "fakeflex" / "attn.py"
    rel = str(lib.relative_to(project))
    out = sleuth(project, "remedy", "apply", "lock", rel, "--into-installed-package").stdout
    assert "changed the installed package fakeflex" in out
    sleuth(project, "remedy", "revert", rel)
    assert lib.read_bytes() == LIBRARY_MODULE.encode()


# ------------------------------------------------------------ where the compile is


def test_lock_on_the_hf_drafter_says_where_the_compile_is(project):
    proc = sleuth(project, "remedy", "preview", "lock", "model_only.py", check=2)
    assert ("nothing in model_only.py that lock would change (no compiled flex_attention, block mask or tracing site); "
            "run fx-trace-state to find where the compile happens") in proc.stdout
    run = record_fx_trace(project, {"calls": 40, "shapes": [SHAPE], "sites": SITES})
    with Workspace(project).open(None) as inv:
        assert compile_sites(inv.state, "local") == (SITES, run)
        assert compile_sites(inv.state, "elsewhere") == ([], None)
    proc = sleuth(project, "remedy", "preview", "lock", "model_only.py", check=2)
    said = (f"nothing in model_only.py that lock would change: the compile it would guard is in the library transformers "
            f"({LIBRARY_SITE}, seen by fx-trace-state run #{run}); sleuth does not change installed packages unless "
            "asked (--into-installed-package)")
    assert said in proc.stdout, proc.stdout
    assert "Traceback" not in proc.stderr
    # the user's script that starts the workers: there the lock gates each worker's first pass
    gated = sleuth(project, "remedy", "preview", "lock", "train.py").stdout
    assert "drafter() runs in worker threads" in gated and "_SLEUTH_FIRST_PASS" in gated
    # precompile says the same of its compile, and the shapes that run recorded no longer crash it
    proc = sleuth(project, "remedy", "preview", "precompile", "train.py", check=2)
    assert (f"nothing in train.py that precompile would change: the compile it would run before the workers start is in "
            f"the library transformers ({LIBRARY_SITE}, seen by fx-trace-state run #{run})") in proc.stdout
    # a folder: the same sentence, as the error
    (project / "code").mkdir()
    shutil.copy(project / "model_only.py", project / "code" / "model_only.py")
    line = one_line_error(sleuth(project, "remedy", "preview", "lock", "code", check=False))
    assert "nothing in code/ that lock would change: the compile it would guard is in the library transformers" in line


def test_a_run_that_saw_only_eager_calls_or_no_sites(project):
    run = record_fx_trace(project, {"calls": 3, "shapes": []})  # a probe from before compile sites
    out = sleuth(project, "remedy", "preview", "lock", "model_only.py", check=2).stdout
    assert f"run fx-trace-state again to find where the compile happens (run #{run} recorded no compile sites)" in out
    eager = [{**SITES[0], "kind": "eager", "compiles": 0, "compiled_calls": 0, "uncompiled_calls": 3}]
    run = record_fx_trace(project, {"calls": 3, "shapes": [], "sites": eager})
    out = sleuth(project, "remedy", "preview", "lock", "model_only.py", check=2).stdout
    assert f"fx-trace-state run #{run} saw flex_attention run uncompiled (eager) at {LIBRARY_SITE}" in out
    own = [{**SITES[0], "site": "model:20", "file": "/p/model.py", "line": 20, "library": None}]
    run = record_fx_trace(project, {"calls": 3, "shapes": [], "sites": own})
    out = sleuth(project, "remedy", "preview", "lock", "model_only.py", check=2).stdout
    assert f"the compile it would guard is at model:20: /p/model.py:20 (seen by fx-trace-state run #{run}): preview lock" in out


# ------------------------------------------------------------ the MCP tools say the same


async def test_mcp_tools_answer_the_same_line(project):
    from mcp import Client
    from sleuth.app.mcp_server import build_server
    from support.mcp import AGENT, answer, error_of

    run = record_fx_trace(project, {"calls": 40, "shapes": [SHAPE], "sites": SITES})
    lib = project / "venv" / "lib" / "python3.11" / "site-packages" / "fakeflex" / "attn.py"
    rel = str(lib.relative_to(project))
    server = build_server(Workspace(project), no_agent=True)
    async with Client(server, client_info=AGENT) as client:
        # the ValueError of a library compile site, through the recorded run's shapes
        data = answer(await client.call_tool("remedy_preview", {"remedy": "precompile", "path": "train.py"}))
        assert not data["applicable"] and f"seen by fx-trace-state run #{run}" in data["blocked"][0]
        assert "into_installed_package=true" in data["blocked"][0]
        text = error_of(await client.call_tool("remedy_preview", {"remedy": "lock", "path": "a\x00b.py"}))
        assert "not a usable path" in text and "\n" not in text
        assert "no such file" in error_of(await client.call_tool("remedy_preview", {"remedy": "lock", "path": "nowhere.py"}))
        data = answer(await client.call_tool("remedy_preview", {"remedy": "lock", "path": rel}))
        assert data["installed"] == [INSTALLED_SAID] and data["applicable"]
        text = error_of(await client.call_tool("remedy_apply", {"remedy": "lock", "path": rel}))
        assert INSTALLED_SAID in text and "into_installed_package=true" in text
        assert lib.read_bytes() == LIBRARY_MODULE.encode()
        data = answer(await client.call_tool("remedy_apply", {"remedy": "lock", "path": rel, "into_installed_package": True}))
        assert data["applied"] and "changed the installed package fakeflex" in data["said"]
        assert data["installed_packages"][0]["package"] == "fakeflex"
        data = answer(await client.call_tool("remedy_revert", {"path": rel}))
        assert data["files"] == 1 and "fakeflex" in data["said"]
        assert lib.read_bytes() == LIBRARY_MODULE.encode()
