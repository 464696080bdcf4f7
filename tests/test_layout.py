"""The package layout is the architecture (DESIGN §7), checked over the whole import graph.

Every import of every module under ``streamctl/`` counts, read with ``ast``: at module level,
inside a function (a lazy import is still a dependency) and under ``TYPE_CHECKING``. The rules:

* **Ranks** (:data:`RANKS`): a package imports only packages of a lower rank or of its own
  rank; top-level modules (rank 0, the shared vocabularies) import only each other. A package
  missing from the table is a violation: a new package takes its place in the order first.
* **No circle between packages**, also among packages of one rank and among top-level modules.
* **No circle between modules**: two files that import each other are one concept or a
  missing third module.
* **Pure packages** (:data:`NO_TEMPORAL`) import no ``temporalio``; only the Spark compiler,
  the agent and the benchmarks import ``pyspark`` or ``py4j`` (:data:`SPARK_IMPORTERS`).
* **Names**: no two modules share a file name (``__init__``/``__main__`` aside), unless they
  are two sides of one concept and :data:`SAME_NAME_SIDES` says so.
* **Size**: no module past :data:`MAX_LINES` unless :data:`ONE_CONCEPT_OVER_LIMIT` says why;
  the coordinator workflow's module stays under :data:`COORDINATOR_MAX_LINES`.

Each rule's checker is itself checked: one planted violation per rule must be reported.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.quick

PACKAGE_ROOT = Path(__file__).resolve().parent.parent / "streamctl"

RANKS: dict[str, int] = {
    "protocol": 1,
    "catalog": 2,
    "planner": 2,
    "lifecycle": 2,
    "reference": 2,
    "domain": 3,
    "activities": 4,
    "workflows": 5,
    "spark": 6,
    "agent": 7,
    "client": 8,
    "cli": 9,
    "gateway": 9,
    "systest": 9,
    "bench": 9,
    "worker": 9,
}
"""Each package's rank (DESIGN §7): imports point from a higher rank to a lower one (or within
one rank, without a circle). Top-level modules are rank 0."""

TOP_LEVEL_RANK = 0

NO_TEMPORAL = ("domain", "planner", "catalog", "lifecycle", "protocol")
"""Packages of plain logic and data: the workflow and the activities give them Temporal."""

SPARK_IMPORTERS = ("spark", "agent", "bench")
"""The packages that may import ``pyspark``/``py4j``: the compiler, the agent, benchmarks."""

SAME_NAME_SIDES: dict[str, str] = {}
"""File name -> why the modules sharing it are two sides of one concept."""

NAMES_EVERY_PACKAGE_HAS = frozenset({"__init__.py", "__main__.py"})

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
}
"""Modules allowed past :data:`MAX_LINES` because they hold one concept, with the reason."""

COORDINATOR_MODULE = "streamctl.workflows.coordinator"
COORDINATOR_MAX_LINES = 500
"""The workflow class only: its collaborators are modules beside it."""


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int


# --- reading the graph ---------------------------------------------------------------------------


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


def _all_imports(root: Path = PACKAGE_ROOT) -> list[Import]:
    return [found for path in sorted(root.rglob("*.py")) for found in _imports(path, root)]


def _all_modules(root: Path = PACKAGE_ROOT) -> set[str]:
    return {_module_name(path, root) for path in root.rglob("*.py")}


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _unit(name: str, packages: Iterable[str]) -> str | None:
    """The layout unit a ``streamctl`` module belongs to: its package (``cli``) or, for a
    top-level module, the module itself (``limits``); None outside ``streamctl``."""
    parts = name.split(".")
    if parts[0] != "streamctl" or len(parts) < 2:
        return None
    return parts[1] if parts[1] in set(packages) else f".{parts[1]}"


def _rank(unit: str) -> int | None:
    return TOP_LEVEL_RANK if unit.startswith(".") else RANKS.get(unit)


def _packages(root: Path = PACKAGE_ROOT) -> set[str]:
    return {path.parent.name for path in root.glob("*/__init__.py")}


def _internal(imports: list[Import], modules: set[str]) -> list[tuple[str, str, Import]]:
    """The imports between streamctl modules, as (importer's module, imported module, import):
    ``from streamctl.x import name`` resolves to the module ``streamctl.x.name`` when there is
    one (not also to ``streamctl.x``, whose ``__init__`` any submodule import runs), else to
    ``streamctl.x``."""
    named_modules = {
        (found.importer, found.line, found.imported.rpartition(".")[0])
        for found in imports
        if found.imported in modules
    }
    edges = []
    for found in imports:
        if (found.importer, found.line, found.imported) in named_modules:
            continue  # ``from package import module``: the edge is to the module
        if not _within(found.imported, "streamctl") or found.imported == "streamctl":
            continue
        target = found.imported
        while target not in modules and "." in target:
            target = target.rpartition(".")[0]
        if target in modules and target != found.importer and target != "streamctl":
            edges.append((found.importer, target, found))
    return edges


# --- the rules -----------------------------------------------------------------------------------


def rank_violations(imports: list[Import], modules: set[str], packages: set[str]) -> list[str]:
    problems = []
    for importer, imported, found in _internal(imports, modules):
        source, target = _unit(importer, packages), _unit(imported, packages)
        if source is None or target is None or source == target:
            continue
        source_rank, target_rank = _rank(source), _rank(target)
        if source_rank is None or target_rank is None:
            continue  # reported by unranked_packages
        if source_rank < target_rank:
            problems.append(
                f"{importer}:{found.line} imports {imported}: rank {source_rank} ({source}) "
                f"may not import rank {target_rank} ({target})"
            )
    return problems


def unranked_packages(packages: set[str]) -> list[str]:
    return [f"package {name} has no rank in RANKS" for name in sorted(packages - set(RANKS))]


def _cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph.get(node, ())):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def package_circles(imports: list[Import], modules: set[str], packages: set[str]) -> list[str]:
    graph: dict[str, set[str]] = defaultdict(set)
    for importer, imported, _ in _internal(imports, modules):
        source, target = _unit(importer, packages), _unit(imported, packages)
        if source is not None and target is not None and source != target:
            graph[source].add(target)
    return [f"packages import each other: {' <-> '.join(c)}" for c in _cycles(graph)]


def module_circles(imports: list[Import], modules: set[str]) -> list[str]:
    graph: dict[str, set[str]] = defaultdict(set)
    for importer, imported, _ in _internal(imports, modules):
        graph[importer].add(imported)
    return [f"modules import each other: {' <-> '.join(c)}" for c in _cycles(graph)]


def third_party_violations(imports: list[Import], packages: set[str]) -> list[str]:
    problems = []
    for found in imports:
        unit = _unit(found.importer, packages)
        if unit is None:
            continue
        if unit in NO_TEMPORAL and _within(found.imported, "temporalio"):
            problems.append(f"{found.importer}:{found.line} imports {found.imported} (no Temporal)")
        spark = _within(found.imported, "pyspark") or _within(found.imported, "py4j")
        if spark and unit not in SPARK_IMPORTERS:
            problems.append(f"{found.importer}:{found.line} imports {found.imported} (no Spark)")
    return problems


def repeated_file_names(paths: Iterable[Path], root: Path = PACKAGE_ROOT) -> list[str]:
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in paths:
        if path.name not in NAMES_EVERY_PACKAGE_HAS:
            by_name[path.name].append(str(path.relative_to(root.parent)))
    return [
        f"{name} is the file name of {', '.join(sorted(places))}"
        for name, places in sorted(by_name.items())
        if len(places) > 1 and name not in SAME_NAME_SIDES
    ]


def _line_counts(root: Path = PACKAGE_ROOT) -> dict[str, int]:
    return {
        _module_name(path, root): len(path.read_text().splitlines()) for path in root.rglob("*.py")
    }


def oversized_modules(line_counts: Mapping[str, int]) -> list[str]:
    problems = [
        f"{name} has {lines} lines (at most {MAX_LINES} unless one concept)"
        for name, lines in sorted(line_counts.items())
        if lines > MAX_LINES and name not in ONE_CONCEPT_OVER_LIMIT
    ]
    coordinator = line_counts.get(COORDINATOR_MODULE, 0)
    if coordinator >= COORDINATOR_MAX_LINES:
        problems.append(f"{COORDINATOR_MODULE} has {coordinator} lines (under 500)")
    return problems


# --- the tree as it is ---------------------------------------------------------------------------


def test_every_package_has_a_rank() -> None:
    assert unranked_packages(_packages()) == []


def test_imports_follow_the_ranked_order() -> None:
    assert rank_violations(_all_imports(), _all_modules(), _packages()) == []


def test_no_circle_between_packages() -> None:
    assert package_circles(_all_imports(), _all_modules(), _packages()) == []


def test_no_circle_between_modules() -> None:
    assert module_circles(_all_imports(), _all_modules()) == []


def test_pure_packages_import_no_temporal_and_only_the_spark_side_imports_spark() -> None:
    assert third_party_violations(_all_imports(), _packages()) == []


def test_no_two_modules_share_a_file_name() -> None:
    assert repeated_file_names(PACKAGE_ROOT.rglob("*.py")) == []


def test_no_module_past_the_line_limit_unless_it_is_one_concept() -> None:
    assert oversized_modules(_line_counts()) == []


# --- the checkers, each shown a planted violation ------------------------------------------------


def _plant(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "streamctl"
    for name, source in {"__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(root).parents:
            (root / parent / "__init__.py").touch()
        path.write_text(source)
    return root


def _check(root: Path) -> dict[str, list[str]]:
    imports, modules, packages = _all_imports(root), _all_modules(root), _packages(root)
    return {
        "rank": rank_violations(imports, modules, packages),
        "unranked": unranked_packages(packages),
        "package circle": package_circles(imports, modules, packages),
        "module circle": module_circles(imports, modules),
        "third party": third_party_violations(imports, packages),
        "file name": repeated_file_names(root.rglob("*.py"), root),
        "size": oversized_modules(_line_counts(root)),
    }


CLEAN = {
    "limits.py": "X = 1\n",
    "protocol/messages.py": "from streamctl.limits import X\n",
    "domain/queries.py": "from streamctl.protocol import messages\n",
    "workflows/coordinator.py": (
        "from temporalio import workflow\nfrom streamctl.domain import queries\n"
    ),
    "cli/main.py": "def run():\n    from streamctl.workflows.coordinator import workflow\n",
}


@pytest.mark.parametrize(
    ("rule", "planted"),
    [
        # a lower rank importing a higher one, lazily inside a function
        (
            "rank",
            {
                "protocol/answers.py": "def f():\n    from streamctl.client import x\n",
                "client/x.py": "X = 1\n",
            },
        ),
        # a top-level vocabulary importing a package
        ("rank", {"error_codes.py": "from streamctl.domain.queries import x\n"}),
        # relative imports resolve too
        (
            "rank",
            {"domain/sinks.py": "from ..agent import runs\n", "agent/runs.py": "X = 1\n"},
        ),
        ("unranked", {"newthing/core.py": "X = 1\n"}),
        # equal ranks may import each other, but not in a circle
        (
            "package circle",
            {
                "gateway/app.py": "from streamctl.cli import main\n",
                "cli/more.py": "import streamctl.gateway.app\n",
            },
        ),
        (
            "module circle",
            {
                "domain/a.py": "from streamctl.domain import b\n",
                "domain/b.py": "if X:\n    from streamctl.domain.a import y\n",
            },
        ),
        ("third party", {"domain/x.py": "from temporalio.common import RetryPolicy\n"}),
        ("third party", {"protocol/x.py": "import temporalio\n"}),
        ("third party", {"planner/x.py": "from pyspark.sql import functions\n"}),
        ("file name", {"planner/queries.py": "X = 1\n"}),
        ("size", {"domain/long.py": "X = 1\n" * (MAX_LINES + 1)}),
        ("size", {"workflows/coordinator.py": "X = 1\n" * COORDINATOR_MAX_LINES}),
    ],
)
def test_each_rule_reports_a_planted_violation(
    rule: str, planted: dict[str, str], tmp_path: Path
) -> None:
    found = _check(_plant(tmp_path, {**CLEAN, **planted}))
    assert found[rule], f"{rule} not reported for {planted}"
    assert all(not problems for name, problems in found.items() if name != rule), found


def test_a_clean_tree_has_no_violation(tmp_path: Path) -> None:
    assert all(not problems for problems in _check(_plant(tmp_path, CLEAN)).values())


@pytest.mark.parametrize(
    ("source", "module", "expected"),
    [
        ("from ..catalog import view\n", "streamctl/client/m.py", "streamctl.catalog.view"),
        ("from . import wire\n", "streamctl/workflows/m.py", "streamctl.workflows.wire"),
        ("import pyspark.sql\n", "streamctl/planner/m.py", "pyspark.sql"),
        (
            "if TYPE_CHECKING:\n    from streamctl.cli import x\n",
            "streamctl/client/m.py",
            "streamctl.cli.x",
        ),
        (
            "def f():\n    from streamctl.spark import x\n",
            "streamctl/client/m.py",
            "streamctl.spark.x",
        ),
    ],
)
def test_imports_are_resolved(source: str, module: str, expected: str, tmp_path: Path) -> None:
    """Relative, module-level, ``TYPE_CHECKING`` and lazy imports all resolve to the module
    they name."""
    path = tmp_path / module
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    assert expected in {found.imported for found in _imports(path, tmp_path / "streamctl")}
