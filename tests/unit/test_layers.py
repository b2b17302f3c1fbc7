"""The house from the outside: each layer imports only the layers below it, read from the
package's own import statements (no module is imported to check this).

    app  ->  sessions  ->  hypotheses, probes  ->  ipc

app may use every layer below it; hypotheses and probes do not know each other; ipc (the
broker's sockets) is the standard library only, because app/quick.py decides with it before
the rest of sleuth is imported. The package's root holds no module but its face."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import sleuth

ROOT = Path(sleuth.__file__).parent
LAYERS = ("app", "sessions", "hypotheses", "probes", "ipc")
MAY_IMPORT = {
    "app": {"sessions", "hypotheses", "probes", "ipc", "__init__"},  # __init__: sleuth.__version__
    "sessions": {"hypotheses", "probes"},
    "hypotheses": set(),
    "probes": {"ipc"},
    "ipc": set(),
}


def modules(layer: str) -> list[Path]:
    return sorted(p for p in (ROOT / layer).rglob("*.py") if "__pycache__" not in p.parts)


def sleuth_imports(path: Path, text: str | None = None) -> set[str]:
    """The top-level folders of sleuth (or "__init__" for the package's face) that the module at
    *path* imports (its own text, or *text* read as if it were that module)."""
    here = path.relative_to(ROOT).parts[:-1]
    found: set[str] = set()
    source = path.read_text(encoding="utf-8") if text is None else text
    for node in ast.walk(ast.parse(source, str(path))):
        if isinstance(node, ast.ImportFrom) and node.level:
            parts = [*here[: len(here) - (node.level - 1)], *(node.module.split(".") if node.module else [])]
            found.add(parts[0] if parts else "__init__")  # from .. import __version__
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "sleuth":
            found.add(node.module.split(".")[1] if "." in node.module else "__init__")
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("sleuth.")}
    return found


def test_every_layer_imports_only_the_layers_below_it() -> None:
    wrong = []
    for layer in LAYERS:
        for path in modules(layer):
            for other in sleuth_imports(path) - {layer} - MAY_IMPORT[layer]:
                wrong.append(f"{path.relative_to(ROOT)} imports {other}")
    assert wrong == []


def test_the_root_holds_no_loose_module() -> None:
    loose = sorted(p.name for p in ROOT.glob("*.py"))
    assert loose == ["__init__.py", "__main__.py"]
    folders = sorted(p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert set(LAYERS) <= set(folders)


def third_party(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n != "__future__"}


def test_what_decides_before_sleuth_is_imported_is_the_standard_library_only() -> None:
    quick = [ROOT / "app" / "quick.py", *modules("ipc")]
    assert {str(p.relative_to(ROOT)): third_party(p) for p in quick} == {str(p.relative_to(ROOT)): set() for p in quick}
    assert sleuth_imports(ROOT / "app" / "quick.py") <= {"ipc"}


def test_the_check_sees_an_import_running_back_up() -> None:
    # the check above can fail: a probes module importing from sessions, app or hypotheses is seen,
    # relative or absolute
    as_if = ROOT / "probes" / "scripts" / "x.py"
    for text in ("from ...sessions import Store\n", "from sleuth.app.cli import main\n", "import sleuth.hypotheses.model\n"):
        assert sleuth_imports(as_if, text) - MAY_IMPORT["probes"] - {"probes"}, text
