"""The far end as one family (probes/far/): one loader gives every program sent as text, each
parses with Python 3.8's grammar and needs nothing newer (vermin reads the standard library's
modules and members too), the helper part is the prelude's head, and the secret-name rule of the
far end is the store's (sessions/redact.py)."""

from __future__ import annotations

import ast
import json
import re

import pytest
import vermin
from sleuth.probes import build_program
from sleuth.probes.catalog import SCRIPTS_DIR, builtin_probes
from sleuth.probes.far import FOLDER, PROGRAMS, program
from sleuth.probes.far import common as far_common
from sleuth.probes.protocol import ProgramSpec
from sleuth.sessions import redact


def newer_than_38(text: str) -> list[str]:
    """What in a text needs a Python newer than 3.8, line by line, as vermin reads it: the grammar and
    the standard library's modules, functions and members (str.removeprefix, functools.cache, zoneinfo…),
    which ast's feature_version does not see. Annotations are not evaluated (the far end's files
    use `from __future__ import annotations`)."""
    config = vermin.Config()
    config.set_verbose(3)
    visited = vermin.visit(text, config)
    need = visited.minimum_versions()[1]
    if need is None or need <= (3, 8):
        return []
    return [line for line in visited.output_text().splitlines() if re.search(r"3\.(9|[1-9]\d)\b", line)]


def far_texts() -> dict[str, str]:
    """Every text sleuth sends to a far end: the programs as sent, the helper part, the probe scripts."""
    texts = {f"program {name}": program(name) for name in PROGRAMS}
    texts["common.py"] = (FOLDER / "common.py").read_text(encoding="utf-8")
    for path in sorted(SCRIPTS_DIR.glob("*.py")):
        texts[f"scripts/{path.name}"] = path.read_text(encoding="utf-8")
    return texts


def test_the_loader_gives_every_program_and_only_those() -> None:
    on_disk = {p.stem for p in FOLDER.glob("*.py")} - {"__init__", "common"}
    assert set(PROGRAMS) == on_disk
    for name in PROGRAMS:
        assert program(name).strip()
    with pytest.raises(ValueError, match="no far-end program 'nope'"):
        program("nope")


def test_the_prelude_starts_with_the_helper_part_and_the_others_do_not() -> None:
    common = (FOLDER / "common.py").read_text(encoding="utf-8")
    assert program("prelude").startswith(common)
    assert "def _sleuth_main(config)" in program("prelude")
    for name in ("agent", "hook", "overlay"):
        assert program(name) == (FOLDER / f"{name}.py").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(far_texts()))
def test_every_far_text_is_python_38(name: str) -> None:
    text = far_texts()[name]
    ast.parse(text, name, feature_version=(3, 8))
    assert newer_than_38(text) == []


def test_the_version_check_sees_what_a_38_far_end_lacks() -> None:
    # the check above can fail: each of these runs on 3.9+ only, and ast's 3.8 grammar accepts them all
    for text in ("x = 'a'.removeprefix('b')", "import functools\n@functools.cache\ndef f(): pass",
                 "import zoneinfo", "merged = {} | {'a': 1}", "import asyncio\nasyncio.to_thread(print)"):
        ast.parse(text, feature_version=(3, 8))
        assert newer_than_38(text), text
    assert newer_than_38("from __future__ import annotations\ndef f(x: list[int]) -> dict[str, int]: ...") == []


def test_a_built_program_is_the_prelude_and_one_call() -> None:
    built = build_program(ProgramSpec(probe="p", source="emit('result')"), "abc").decode()
    assert built.startswith(program("prelude"))
    tail = built[len(program("prelude")):]
    assert tail.startswith("\n_sleuth_main(_json.loads(") and tail.count("\n") == 2
    ast.parse(built, "<program>", feature_version=(3, 8))


def test_no_long_closures_are_left_at_the_far_end() -> None:
    for name in PROGRAMS:
        tree = ast.parse(program(name))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.end_lineno is not None:
                assert node.end_lineno - node.lineno < 120, f"{name}: {node.name} is {node.end_lineno - node.lineno} lines"


NAMES = ["HF_TOKEN", "WANDB_API_KEY", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "GITHUBTOKEN", "hfToken", "oauth",
         "MY_SECRETS", "SESSION_KEY", "COOKIES", "TOKENIZERS_PARALLELISM", "author", "AUTHOR", "CUDA_VISIBLE_DEVICES",
         "TORCHINDUCTOR_CACHE_DIR", "PATH", "tokenizers", "google-auth", "X_AUTH", "PRIVATE_KEY_PATH", "API-KEY"]


def test_the_far_end_and_the_store_redact_by_one_rule() -> None:
    # the rule sleuth redacts its store by is the helper part's, and the text sent says the same
    assert redact.SECRET_NAME is far_common.SECRET_NAME
    sent: dict[str, object] = {}
    exec(compile(program("prelude"), "<prelude>", "exec"), sent)
    far_rule = sent["secret_name"]
    assert callable(far_rule)
    for name in NAMES:
        assert far_rule(name) == redact.is_secret_name(name) == far_common.secret_name(name), name
    assert [n for n in NAMES if redact.is_secret_name(n)] == [
        "HF_TOKEN", "WANDB_API_KEY", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "GITHUBTOKEN", "hfToken", "oauth",
        "MY_SECRETS", "SESSION_KEY", "COOKIES", "google-auth", "X_AUTH", "PRIVATE_KEY_PATH", "API-KEY"]


def test_no_probe_script_carries_a_rule_or_a_cache_folder_of_its_own() -> None:
    for path in sorted(SCRIPTS_DIR.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert "XDG_CACHE_HOME" not in text, path.name
        assert "SECRET = re.compile" not in text, path.name
        assert "def emit(kind" not in text, path.name


def test_a_probe_script_runs_standalone_with_the_helper_part(capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLEUTH_TEST_API_KEY", "not-a-real-key-123")
    probe = builtin_probes()["target-check"]
    exec(compile(probe.source, str(probe.path), "exec"), {"__file__": str(probe.path), "__name__": "__main__"})
    (line,) = capsys.readouterr().out.splitlines()
    record = json.loads(line)
    assert record["kind"] == "result"
    assert record["env"]["SLEUTH_TEST_API_KEY"] == "<redacted>"
