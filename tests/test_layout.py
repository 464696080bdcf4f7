"""The package layout is the architecture (DESIGN §7): the import graph, read with ``ast`` over
``streamctl/``, must point one way.

Forbidden directions: frontends (``client``) importing the catalog, the planner or Spark code;
workflows importing the catalog; the catalog importing workflows, frontends or the planner; the
planner importing workflows or Spark code. The shared vocabularies are leaves: they import
nothing of the project but other leaves, so every package may import them.

Every import counts, at module level or inside a function (a lazy import is still a
dependency), including ``TYPE_CHECKING`` blocks.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parent.parent / "streamctl"

SPARK_CODE = ("streamctl.spark", "pyspark", "py4j")
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "streamctl.client": ("streamctl.catalog", "streamctl.planner", *SPARK_CODE),
    "streamctl.workflows": ("streamctl.catalog",),
    "streamctl.catalog": ("streamctl.workflows", "streamctl.client", "streamctl.planner"),
    "streamctl.planner": ("streamctl.workflows", *SPARK_CODE),
}
"""Importer package -> the modules (and their submodules) it may not import."""

LEAVES = (
    "streamctl.limits",
    "streamctl.nes_types",
    "streamctl.error_codes",
    "streamctl.secret_options",
    "streamctl.compact_json",
    "streamctl.config",
    "streamctl.nes_text",
    "streamctl.sink_files",
)
"""Vocabulary modules every package may import; they import only each other."""

MAX_LINES = 650
ONE_CONCEPT_OVER_LIMIT: dict[str, str] = {
    "streamctl.planner.plan": "the logical plan: each node class with its JSON round trip and "
    "validation, and the plan's explanation",
    "streamctl.planner.parser": "NebulaStream text to the AST: the grammar's parser, its error "
    "messages and the tree-to-AST transformer",
    "streamctl.planner.binder": "the query visitor (selects, unions, windows, joins, sources); "
    "scopes, expressions, typing, folding and sink checks are modules of their own",
    "streamctl.planner.options": "the connector option table and how options are checked "
    "against it",
    "streamctl.workflows.coordinator": "the coordinator workflow class: its handlers, loop and "
    "passes (agent calls, request batches, state and configuration are modules beside it)",
}
"""Modules allowed past :data:`MAX_LINES` because they hold one concept, with the reason."""


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int


def _module_name(path: Path, root: Path = PACKAGE_ROOT) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path, root: Path = PACKAGE_ROOT) -> list[Import]:
    module = _module_name(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[Import] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [Import(module, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            # ``from package import module`` imports the module itself.
            found += [Import(module, f"{origin}.{alias.name}", node.lineno) for alias in node.names]
            found.append(Import(module, origin, node.lineno))
    return found


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _all_imports() -> list[Import]:
    return [found for path in sorted(PACKAGE_ROOT.rglob("*.py")) for found in _imports(path)]


def _violations(imports: list[Import]) -> list[str]:
    problems = []
    for found in imports:
        for importer, forbidden in FORBIDDEN.items():
            if not _within(found.importer, importer):
                continue
            for target in forbidden:
                if _within(found.imported, target):
                    problems.append(
                        f"{found.importer}:{found.line} imports {found.imported} "
                        f"({importer} -> {target} is forbidden)"
                    )
    return problems


def test_no_forbidden_import_direction() -> None:
    assert _violations(_all_imports()) == []


def test_vocabulary_modules_are_leaves() -> None:
    problems = [
        f"{found.importer}:{found.line} imports {found.imported}"
        for found in _all_imports()
        if found.importer in LEAVES
        and _within(found.imported, "streamctl")
        and not any(_within(found.imported, leaf) for leaf in LEAVES)
        and found.imported != "streamctl"
    ]
    assert problems == []


def test_every_forbidden_direction_is_detected() -> None:
    """The checker itself: one planted import per forbidden direction is reported."""
    planted = [
        Import(f"{importer}.x", f"{target}.y", 1)
        for importer, targets in FORBIDDEN.items()
        for target in targets
    ]
    assert len(_violations(planted)) == len(planted)
    allowed = [Import("streamctl.client.x", "streamctl.protocol.messages", 1)]
    assert _violations(allowed) == []


@pytest.mark.parametrize(
    ("source", "module", "expected"),
    [
        ("from ..catalog import view\n", "streamctl/client/m.py", "streamctl.catalog.view"),
        ("from . import wire\n", "streamctl/workflows/m.py", "streamctl.workflows.wire"),
        ("import pyspark.sql\n", "streamctl/planner/m.py", "pyspark.sql"),
        (
            "def f():\n    from streamctl.spark import x\n",
            "streamctl/client/m.py",
            "streamctl.spark.x",
        ),
    ],
)
def test_imports_are_resolved(source: str, module: str, expected: str, tmp_path: Path) -> None:
    """Relative, module-level and lazy imports all resolve to the module they name."""
    path = tmp_path / module
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    assert expected in {found.imported for found in _imports(path, tmp_path / "streamctl")}


def test_no_module_past_the_line_limit_unless_it_is_one_concept() -> None:
    long = {
        _module_name(path): len(path.read_text().splitlines())
        for path in PACKAGE_ROOT.rglob("*.py")
        if len(path.read_text().splitlines()) > MAX_LINES
    }
    assert {name: lines for name, lines in long.items() if name not in ONE_CONCEPT_OVER_LIMIT} == {}
