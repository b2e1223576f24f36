"""Imports only run down the layer table of docs/architecture.md ("The layers"), and the three packages of the
repository keep to their places ("The embedded Lean"). The table is the one source: this test parses it, walks every
import of every module (module level, inside functions, under `if TYPE_CHECKING:`; relative ones resolved) and fails
on an import of a higher layer.

Each layer is whole packages: a table entry is a folder of burnqed/ (`lean/`) or a module at its root (`layout.py`),
never a file inside a folder. No import circle anywhere, in burnqed, leankit or minilean (for `a.b.c`, the packages
`a.b` and `a`, whose `__init__` runs first, count as imported). Between the packages: burnqed and minilean import
leankit, leankit imports neither, and neither imports the other.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "burnqed"
DOC = ROOT / "docs" / "architecture.md"
# The repository's packages and which others each may import: the embedded Lean and its client share leankit only.
ALLOWED = {"burnqed": ("leankit",), "minilean": ("leankit",), "leankit": ()}


@dataclass(frozen=True)
class Layer:
    name: str
    rank: int  # 0 = the bottom row of the table
    entries: tuple[str, ...]


def parse_layers(markdown: str) -> list[Layer]:
    """The rows of the first table under `## The layers`, top row first (highest layer)."""
    section = markdown.split("\n## The layers", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    body = rows[2:]  # after the header and its separator
    parsed: list[tuple[str, tuple[str, ...]]] = []
    for row in body:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        parsed.append((cells[0], tuple(re.findall(r"`([^`]+)`", cells[1]))))
    return [Layer(name, len(parsed) - 1 - index, entries) for index, (name, entries) in enumerate(parsed)]


def module_files(package: Path = PACKAGE) -> dict[str, Path]:
    """Dotted name -> file, for every module of the package (burnqed unless told)."""
    found: dict[str, Path] = {}
    for path in sorted(package.rglob("*.py")):
        parts = [package.name, *path.relative_to(package).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def table_path(path: Path) -> str:
    """How the table names a file: relative to burnqed/ (a module of another package: relative to the repository)."""
    return (path.relative_to(PACKAGE) if path.is_relative_to(PACKAGE) else path.relative_to(ROOT)).as_posix()


def layer_of(path: str, layers: list[Layer]) -> Layer | None:
    best: tuple[int, Layer] | None = None
    for layer in layers:
        for entry in layer.entries:
            matches = path == entry or (entry.endswith("/") and path.startswith(entry))
            if matches and (best is None or len(entry) > best[0]):
                best = (len(entry), layer)
    return None if best is None else best[1]


@functools.cache
def _import_nodes(source: str) -> tuple[ast.Import | ast.ImportFrom, ...]:
    """The import statements anywhere in `source`, parsed once per process (the tests read each file several times)."""
    return tuple(node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Import | ast.ImportFrom))


def imports_of(name: str, path: Path, source: str, modules: dict[str, Path]) -> list[tuple[int, str]]:
    """(line, module) for every burnqed module `source` imports; `from pkg import sub` counts the submodule."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in _import_nodes(source):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            subs = [f"{target}.{alias.name}" for alias in node.names if f"{target}.{alias.name}" in modules]
            if subs:
                found.extend((node.lineno, sub) for sub in subs)
            if target in modules and len(subs) < len(node.names):
                found.append((node.lineno, target))
    return found


def upward_imports(layers: list[Layer], modules: dict[str, Path],
                   sources: dict[str, str] | None = None) -> tuple[list[str], list[str]]:
    """(violations, modules without a layer); `sources` replaces files' text (for the self-test)."""
    violations: list[str] = []
    unplaced: list[str] = []
    for name, path in modules.items():
        here = layer_of(table_path(path), layers)
        if here is None:
            unplaced.append(table_path(path))
            continue
        source = (sources or {}).get(name) or path.read_text(encoding="utf-8")
        for line, target in imports_of(name, path, source, modules):
            there = layer_of(table_path(modules[target]), layers)
            if there is not None and there.rank > here.rank:
                violations.append(f"{table_path(path)}:{line} imports {target}: {here.name} -> {there.name}")
    return violations, unplaced


def import_graph(modules: dict[str, Path], sources: dict[str, str] | None = None) -> dict[str, dict[str, int]]:
    """Module -> {module it runs on import: line}: every burnqed import anywhere in it (`imports_of`), and the
    packages above an imported module (their `__init__` runs first), never the module's own packages."""
    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        source = (sources or {}).get(name) or path.read_text(encoding="utf-8")
        edges: dict[str, int] = {}
        for line, target in imports_of(name, path, source, modules):
            parts = target.split(".")
            for end in range(2, len(parts) + 1):
                runs = ".".join(parts[:end])
                if runs in modules and runs != name and not name.startswith(runs + "."):
                    edges.setdefault(runs, line)
        graph[name] = edges
    return graph


def import_cycles(graph: dict[str, dict[str, int]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root, edges in graph.items():
        if root in index:
            continue
        work = [(root, iter(edges))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(graph[target])))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def cycle_path(graph: dict[str, dict[str, int]], component: frozenset[str]) -> str:
    """One cycle through `component`, as `a.py:12 -> b.py:3 -> a.py`: where each import is."""
    start = min(component)
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        node = frontier.pop(0)
        for target in sorted(graph[node]):
            if target == start:
                hops = [node]
                while hops[-1] != start:
                    hops.append(previous[hops[-1]])
                hops.reverse()
                return " -> ".join(f"{table_path(EVERY_MODULE[m])}:{graph[m][n]}"
                                   for m, n in zip(hops, [*hops[1:], start], strict=True)) + f" -> {start}"
            if target in component and target not in previous and target != start:
                previous[target] = node
                frontier.append(target)
    raise AssertionError(f"no cycle through {sorted(component)}")

def foreign_imports(modules: dict[str, Path], sources: dict[str, str] | None = None) -> list[str]:
    """`file:line imports X` for every import of a repository package that `ALLOWED` does not give the importer."""
    found: list[str] = []
    for name, path in modules.items():
        own = name.split(".")[0]
        source = (sources or {}).get(name) or path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                targets = [node.module or ""]
            else:
                continue
            found.extend(f"{table_path(path)}:{node.lineno} imports {target}" for target in targets
                         if target.split(".")[0] in ALLOWED and target.split(".")[0] != own
                         and target.split(".")[0] not in ALLOWED[own])
    return found


LAYERS = parse_layers(DOC.read_text(encoding="utf-8"))
MODULES = module_files()
EVERY_MODULE = {name: path for package in ALLOWED for name, path in module_files(ROOT / package).items()}
# What the redesign of issue 56 removes next; delete an entry once it is gone (the tests then say so).
KNOWN_CROSSINGS: set[str] = set()


def test_the_table_names_every_layer_and_every_entry_exists() -> None:
    names = [layer.name for layer in LAYERS]
    assert len(names) >= 5 and len(set(names)) == len(names), f"the layer table did not parse: {names}"
    assert all(layer.entries for layer in LAYERS), "a layer row names no module"
    paths = [table_path(path) for path in MODULES.values()]
    stale = [entry for layer in LAYERS for entry in layer.entries
             if not any(path == entry or (entry.endswith("/") and path.startswith(entry)) for path in paths)]
    assert not stale, f"docs/architecture.md's layer table names what does not exist: {stale}"


def test_each_layer_is_whole_packages() -> None:
    inside = [entry for layer in LAYERS for entry in layer.entries if "/" in entry.rstrip("/")]
    assert not inside, f"the layer table places single files of a package apart from it: {inside}"


def test_every_module_has_a_layer_and_no_import_runs_up_the_table() -> None:
    violations, unplaced = upward_imports(LAYERS, MODULES)
    assert not unplaced, f"modules the layer table of docs/architecture.md does not place: {unplaced}"
    assert not violations, "imports that run up the layer table of docs/architecture.md:\n" + "\n".join(violations)


@pytest.mark.parametrize(("source", "expected"), [
    ("from burnqed.search.step import StepSearch\n", "burnqed.search.step: nouns -> engines"),
    ("def f() -> None:\n    from burnqed.runner import plan\n", "burnqed.runner.plan: nouns -> runners"),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import burnqed.cli\n", "burnqed.cli: nouns -> commands"),
])
def test_an_upward_import_anywhere_in_a_module_is_found(source: str, expected: str) -> None:
    violations, _ = upward_imports(LAYERS, MODULES, sources={"burnqed.records.enums": source})
    assert [v for v in violations if v.startswith("records/enums.py")] == [
        f"records/enums.py:{source.count(chr(10))} imports {expected}"]


@pytest.mark.parametrize(("module", "source", "expected"), [
    ("burnqed.data.index", "from burnqed.eval.result import EvalResult\n", "burnqed.eval.result: training -> evals"),
    ("burnqed.data.index", "from burnqed.report.document import Report\n",
     "burnqed.report.document: training -> reports"),
    ("burnqed.eval.joint_study", "from burnqed.report.section import ReportSection\n",
     "burnqed.report.section: evals -> reports"),
    ("burnqed.stages.judge_merge", "from burnqed.eval.judging import with_judges\n",
     "burnqed.eval.judging: stages -> evals"),
    ("burnqed.sft.joint", "from burnqed.stages.ebm_fit import load_dataset\n",
     "burnqed.stages.ebm_fit: training -> stages"),
])
def test_the_ties_that_ran_back_up_among_the_stages_are_upward_imports(module: str, source: str,
                                                                         expected: str) -> None:
    """The imports the stages' packages once made of each other both ways (data/ of eval/ and report/, eval/ of
    report/, sft/ of stages/, stages/ of eval/: the judged merge judges through search/judge.py, not eval/'s
    module) run up the table's rows now."""
    violations, _ = upward_imports(LAYERS, MODULES, sources={module: source})
    assert violations == [f"{table_path(MODULES[module])}:1 imports {expected}"]


def test_a_relative_import_resolves_against_its_package() -> None:
    path = MODULES["burnqed.lean.guard"]
    assert imports_of("burnqed.lean.guard", path, "from ..search import step\nfrom . import pool\n", MODULES) == [
        (1, "burnqed.search.step"), (2, "burnqed.lean.pool")]


def test_no_import_cycle_in_any_package() -> None:
    graph = import_graph(EVERY_MODULE)
    found = [cycle_path(graph, component) for component in import_cycles(graph)]
    assert not found, "import cycles (counting imports inside functions):\n" + "\n".join(found)


@pytest.mark.parametrize(("sources", "expected"), [
    ({"burnqed.records.enums": "def f() -> None:\n    from burnqed.text.prompt import X\n",
      "burnqed.text.prompt": "from burnqed.records import enums\n"},
     "records/enums.py:2 -> text/prompt.py:1 -> burnqed.records.enums"),
    ({"burnqed.base.cpu_kernels": "def f() -> None:\n    from burnqed.sft.launch import World\n",
      "burnqed.sft": '"""A package whose __init__ imports back."""\nfrom burnqed.base import cpu_kernels\n'},
     "base/cpu_kernels.py:2 -> sft/__init__.py:2 -> burnqed.base.cpu_kernels"),
    ({"minilean.arith": "def f() -> None:\n    from minilean import elab\n",
      "minilean.elab": "from minilean.arith import X\n"},
     "minilean/arith.py:2 -> minilean/elab.py:1 -> minilean.arith"),
])
def test_a_cycle_through_a_function_or_a_package_init_is_found(sources: dict[str, str], expected: str) -> None:
    modules = {name: EVERY_MODULE[name] for name in (*sources, "burnqed.sft.launch")}
    graph = import_graph(modules, sources)
    assert [cycle_path(graph, c) for c in import_cycles(graph)] == [expected]


def test_the_packages_import_only_what_their_place_allows() -> None:
    assert "minilean.replay.replay_server" in EVERY_MODULE and "leankit.corpus" in EVERY_MODULE
    crossings = foreign_imports(EVERY_MODULE)
    found = [line for line in crossings if re.sub(r":\d+ ", " ", line) not in KNOWN_CROSSINGS]
    gone = sorted(KNOWN_CROSSINGS - {re.sub(r":\d+ ", " ", line) for line in crossings})
    assert not gone, f"KNOWN_CROSSINGS lists imports that are gone; delete them: {gone}"
    assert not found, "the embedded Lean and its client share leankit only (docs/architecture.md, \"The embedded " \
                      "Lean\"):\n" + "\n".join(found)
    section = DOC.read_text(encoding="utf-8").split("\n## The embedded Lean", 1)[1].split("\n## ", 1)[0]
    assert all(f"`{package}/`" in section for package in ALLOWED), "docs/architecture.md does not state the rule"


@pytest.mark.parametrize(("module", "source", "expected"), [
    ("burnqed.lean.pool", "def f() -> None:\n    from minilean.replay import replay_server\n",
     ["lean/pool.py:2 imports minilean.replay"]),
    ("burnqed.lean.pool", "import minilean.schema\nimport minileanish\nfrom leankit import text\n",
     ["lean/pool.py:1 imports minilean.schema"]),
    ("minilean.replay.replay_server", "from burnqed.errors import InputError\nfrom leankit.corpus import Corpus\n",
     ["minilean/replay/replay_server.py:1 imports burnqed.errors"]),
    ("leankit.corpus", "from burnqed.records import Theorem\nimport minilean\n",
     ["leankit/corpus.py:1 imports burnqed.records", "leankit/corpus.py:2 imports minilean"]),
])
def test_an_import_across_the_packages_is_found(module: str, source: str, expected: list[str]) -> None:
    assert foreign_imports({module: EVERY_MODULE[module]}, sources={module: source}) == expected


def shared_names(modules: dict[str, Path]) -> dict[str, list[str]]:
    """Module file name -> the modules of one package that share it, where more than one does. `__init__` and
    `__main__` aside, and the modules of `config/` and `commands/`, each named after the configuration section or
    command group it holds (`config/search.py`, `commands/data.py`)."""
    by_name: dict[tuple[str, str], list[str]] = {}
    for name, path in modules.items():
        relative = table_path(path)
        if path.stem in ("__init__", "__main__") or relative.startswith(("config/", "commands/")):
            continue
        by_name.setdefault((name.split(".")[0], path.name), []).append(relative)
    return {name: paths for (_, name), paths in by_name.items() if len(paths) > 1}


def test_no_two_modules_of_a_package_share_a_name() -> None:
    shared = shared_names(EVERY_MODULE)
    assert not shared, f"modules that share a name (docs/architecture.md, \"The layers\"): {shared}"
    assert shared_names({"burnqed.lean.lease": MODULES["burnqed.lean.lease"],
                         "burnqed.storage.lease": PACKAGE / "storage" / "lease.py",
                         "burnqed.config.search": MODULES["burnqed.config.search"],
                         "burnqed.stages.search": MODULES["burnqed.stages.search"]}) == {
        "lease.py": ["lean/lease.py", "storage/lease.py"]}
