"""The NebulaStream conformance folder has one home: :func:`conformance.conformance_dir`
(``STREAMCTL_CONFORMANCE``, else ``../shared/conformance`` beside the project root).

A test or module that builds the path itself (``Path(__file__).parents[2] / "shared" / ...``,
``"../shared/..."``) ties the suite to one checkout layout again: on a clone with no
``../shared`` beside it such a test fails with ``No such file or directory`` instead of
skipping. The check reads every file under ``tests/`` and ``streamctl/`` with ``ast`` (code
only: docstrings and comments may name the folder) and reports:

* a string holding ``../shared`` or ``shared/conformance``;
* a path joined from ``__file__`` (``/``, ``joinpath``, ``os.path.join``) that reaches a
  ``shared``, ``conformance``, ``nes-systests`` or ``nes-docs`` component.

The checker is itself checked: each planted form must be reported, and paths under a test's
own ``tmp_path`` named ``shared`` are not.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conformance import ENV_VAR, conformance_dir, missing_reason, project_root, suite_params

pytestmark = pytest.mark.quick

ROOT = project_root()
HOME = Path(__file__).resolve().parent / "conformance.py"
"""The one file allowed to name ``../shared`` (its default)."""
EXEMPT = frozenset({HOME, Path(__file__).resolve()})
"""The home, and this file (its planted examples)."""

FORBIDDEN_TEXT = ("../shared", "shared/conformance")
FOLDER_NAMES = frozenset({"shared", "conformance", "nes-systests", "nes-docs"})


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring constants (of the module, classes and functions) and of the
    bare strings that document an assignment."""
    found: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for statement in body:
            if (
                isinstance(statement, ast.Expr)
                and isinstance(statement.value, ast.Constant)
                and isinstance(statement.value.value, str)
            ):
                found.add(id(statement.value))
    return found


def _mentions_file(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Name) and n.id == "__file__" for n in ast.walk(node))


def _names_folder(node: ast.AST) -> bool:
    if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
        return False
    return bool(FOLDER_NAMES & set(node.value.replace("\\", "/").split("/")))


def _path_parts(node: ast.AST) -> tuple[ast.AST, list[ast.AST]]:
    """A ``/`` chain (``a / "b" / "c"``) as its base and the parts joined onto it."""
    parts: list[ast.AST] = []
    while isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        parts.insert(0, node.right)
        node = node.left
    return node, parts


def violations(source: str) -> list[tuple[int, str]]:
    """Where ``source`` builds a path to the conformance folder itself (line, what)."""
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
            and any(text in node.value.replace("\\", "/") for text in FORBIDDEN_TEXT)
        ):
            found.append((node.lineno, f"the string {node.value!r}"))
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            base, parts = _path_parts(node)
            if parts and _mentions_file(base) and any(_names_folder(p) for p in parts):
                found.append((node.lineno, "a path from __file__ to the conformance folder"))
        elif isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else None
            if (
                name in ("joinpath", "join")
                and any(_names_folder(a) for a in node.args)
                and (_mentions_file(node.func) or any(_mentions_file(a) for a in node.args))
            ):
                found.append((node.lineno, f"a {name}() from __file__ to the conformance folder"))
    return sorted(set(found))


def _checked_files() -> list[Path]:
    files = sorted((ROOT / "tests").rglob("*.py")) + sorted((ROOT / "streamctl").rglob("*.py"))
    return [path for path in files if path.resolve() not in EXEMPT]


def test_only_the_settings_function_locates_the_conformance_folder() -> None:
    problems = [
        f"{path.relative_to(ROOT)}:{line}: {what}"
        for path in _checked_files()
        for line, what in violations(path.read_text(encoding="utf-8"))
    ]
    assert problems == [], (
        "build the conformance folder's path with tests/conformance.py "
        f"(conformance_dir(), {ENV_VAR}), not by hand:\n" + "\n".join(problems)
    )


@pytest.mark.parametrize(
    "source",
    [
        'SUITE = Path(__file__).resolve().parents[2] / "shared" / "conformance" / "nes-systests"',
        'TESTDATA = Path(__file__).resolve().parents[3] / "shared/conformance/nes-systests/t"',
        'DOCS = Path(__file__).parent.parent.parent / "shared"',
        'DOCS = Path(__file__).parents[1].joinpath("nes-docs")',
        'DOCS = os.path.join(os.path.dirname(__file__), "..", "shared")',
        'SUITE = Path("../shared/conformance")',
        'def f():\n    return run(["x", "../shared/conformance/nes-systests"])',
    ],
)
def test_each_planted_form_is_reported(source: str) -> None:
    assert violations(source), source


@pytest.mark.parametrize(
    "source",
    [
        '"""Expected rows from ``../shared/conformance/nes-docs``."""',
        'def f(tmp_path):\n    """A ``shared`` root."""\n    return tmp_path / "shared"',
        'ROOTS = files.parent / "shared" / "b.csv"',
        "SUITE = systests_dir()",
        '# Path(__file__).parents[2] / "shared"\nX = 1',
    ],
)
def test_what_is_not_reported(source: str) -> None:
    assert violations(source) == [], source


def test_the_setting_moves_the_folder_and_its_absence_is_a_named_skip(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert conformance_dir() == (ROOT.parent / "shared" / "conformance").resolve()
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "nowhere"))
    assert conformance_dir() == tmp_path / "nowhere"
    reason = missing_reason()
    assert str(tmp_path / "nowhere" / "nes-systests") in reason and ENV_VAR in reason
    (case,) = suite_params(lambda root: sorted(root.rglob("*.test")))
    assert case.values == (None,) and case.id == "no-conformance-suite"
    (skip,) = case.marks
    assert skip.name == "skip" and ENV_VAR in skip.kwargs["reason"]
