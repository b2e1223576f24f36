"""Imports only run down the layer table of docs/architecture.md ("The layers"): the table there is the one
source; this test parses it, walks every import of every module under burnqed/ (module level, inside functions,
under `if TYPE_CHECKING:`; relative ones resolved) and fails on any import of a module in a higher layer.

A table entry is a module path relative to burnqed/ (`records.py`, `lean/version.py`) or a folder (`lean/`); a
module takes the layer of its most specific entry, so `ebm/train.py` can be a stage while the rest of `ebm/` is
an engine. Imports within one layer are allowed. The workflows are modules of the package (`workflows/`).

No import cycle either, within a layer or across: the graph of every import (the same walk, and for `a.b.c` the
packages `a.b` and `a` whose `__init__` runs first) has no cycle but those `KNOWN_CYCLES` lists, each with the
change that removes it; an entry whose cycle is gone fails too, so that it is deleted.

The embedded Lean (`minilean/`, with its replay server in `minilean/replay/`) is a peer, not a layer (the section
"The embedded Lean" there): no module of burnqed imports it, and it imports of burnqed only the `nouns` and
`leaves` rows and the data it answers from (`PEER_DATA`), never the Lean client (the rest of `lean/`).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "burnqed"
PEER = ROOT / "minilean"
DOC = ROOT / "docs" / "architecture.md"
# What the embedded Lean may import of burnqed besides these rows: the corpus format and the generated world.
PEER_LAYERS = ("nouns", "leaves")
PEER_DATA = ("lean/corpus.py", "world/")


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
    """How the table names a file: relative to burnqed/."""
    return path.relative_to(PACKAGE).as_posix()


def layer_of(path: str, layers: list[Layer]) -> Layer | None:
    best: tuple[int, Layer] | None = None
    for layer in layers:
        for entry in layer.entries:
            matches = path == entry or (entry.endswith("/") and path.startswith(entry))
            if matches and (best is None or len(entry) > best[0]):
                best = (len(entry), layer)
    return None if best is None else best[1]


def imports_of(name: str, path: Path, source: str, modules: dict[str, Path]) -> list[tuple[int, str]]:
    """(line, module) for every burnqed module `source` imports; `from pkg import sub` counts the submodule."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
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
                return " -> ".join(f"{table_path(MODULES[m])}:{graph[m][n]}"
                                   for m, n in zip(hops, [*hops[1:], start], strict=True)) + f" -> {start}"
            if target in component and target not in previous and target != start:
                previous[target] = node
                frontier.append(target)
    raise AssertionError(f"no cycle through {sorted(component)}")

def peer_imports(modules: dict[str, Path], sources: dict[str, str] | None = None) -> list[str]:
    """`file:line imports minilean…` for every import of the embedded Lean by a module of `modules`."""
    found: list[str] = []
    for name, path in modules.items():
        source = (sources or {}).get(name) or path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                targets = [node.module or ""]
            else:
                continue
            found.extend(f"{table_path(path)}:{node.lineno} imports {target}" for target in targets
                         if target == PEER.name or target.startswith(f"{PEER.name}."))
    return found


def peer_violations(layers: list[Layer], modules: dict[str, Path], peer: dict[str, Path],
                    sources: dict[str, str] | None = None) -> list[str]:
    """Every import of burnqed by the embedded Lean outside `PEER_LAYERS` and `PEER_DATA`."""
    violations: list[str] = []
    for name, path in peer.items():
        source = (sources or {}).get(name) or path.read_text(encoding="utf-8")
        for line, target in imports_of(name, path, source, modules):
            there = table_path(modules[target])
            layer = layer_of(there, layers)
            allowed = (layer is not None and layer.name in PEER_LAYERS) or any(
                there == entry or (entry.endswith("/") and there.startswith(entry)) for entry in PEER_DATA)
            if not allowed:
                violations.append(f"{path.relative_to(ROOT).as_posix()}:{line} imports {target}")
    return violations


LAYERS = parse_layers(DOC.read_text(encoding="utf-8"))
MODULES = module_files()
# Cycles other changes of issue 46 remove; delete an entry once its cycle is gone (the test then says so).
KNOWN_CYCLES: dict[frozenset[str], str] = {}

PEER_MODULES = module_files(PEER)


def test_the_table_names_every_layer_and_every_entry_exists() -> None:
    names = [layer.name for layer in LAYERS]
    assert len(names) >= 5 and len(set(names)) == len(names), f"the layer table did not parse: {names}"
    assert all(layer.entries for layer in LAYERS), "a layer row names no module"
    paths = [table_path(path) for path in MODULES.values()]
    stale = [entry for layer in LAYERS for entry in layer.entries
             if not any(path == entry or (entry.endswith("/") and path.startswith(entry)) for path in paths)]
    assert not stale, f"docs/architecture.md's layer table names what does not exist: {stale}"


def test_every_module_has_a_layer_and_no_import_runs_up_the_table() -> None:
    violations, unplaced = upward_imports(LAYERS, MODULES)
    assert not unplaced, f"modules the layer table of docs/architecture.md does not place: {unplaced}"
    assert not violations, "imports that run up the layer table of docs/architecture.md:\n" + "\n".join(violations)


@pytest.mark.parametrize(("source", "expected"), [
    ("from burnqed.search.step import StepSearch\n", "burnqed.search.step: nouns -> engines"),
    ("def f() -> None:\n    from burnqed import pipeline\n", "burnqed.pipeline: nouns -> runners"),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import burnqed.cli\n", "burnqed.cli: nouns -> commands"),
])
def test_an_upward_import_anywhere_in_a_module_is_found(source: str, expected: str) -> None:
    violations, _ = upward_imports(LAYERS, {"burnqed.records": MODULES["burnqed.records"], **MODULES},
                                   sources={"burnqed.records": source})
    assert [v for v in violations if v.startswith("records.py")] == [f"records.py:{source.count(chr(10))} imports "
                                                                       f"{expected}"]


def test_a_relative_import_resolves_against_its_package() -> None:
    path = MODULES["burnqed.lean.guard"]
    assert imports_of("burnqed.lean.guard", path, "from ..search import step\nfrom . import pool\n", MODULES) == [
        (1, "burnqed.search.step"), (2, "burnqed.lean.pool")]


def test_no_import_cycle_among_the_modules() -> None:
    graph = import_graph(MODULES)
    found = import_cycles(graph)
    new = [cycle_path(graph, component) for component in found if component not in KNOWN_CYCLES]
    assert not new, "import cycles among burnqed's modules (counting imports inside functions):\n" + "\n".join(new)
    gone = [why for component, why in KNOWN_CYCLES.items() if component not in found]
    assert not gone, f"KNOWN_CYCLES lists cycles that are gone; delete them: {gone}"


@pytest.mark.parametrize(("sources", "expected"), [
    ({"burnqed.records": "def f() -> None:\n    from burnqed.prompt import X\n",
      "burnqed.prompt": "from burnqed import records\n"},
     "prompt.py:1 -> records.py:2 -> burnqed.prompt"),
    ({"burnqed.cpu_kernels": "def f() -> None:\n    from burnqed.sft.launch import World\n",
      "burnqed.sft": '"""A package whose __init__ imports back."""\nfrom burnqed import cpu_kernels\n'},
     "cpu_kernels.py:2 -> sft/__init__.py:2 -> burnqed.cpu_kernels"),
])
def test_a_cycle_through_a_function_or_a_package_init_is_found(sources: dict[str, str], expected: str) -> None:
    graph = import_graph(MODULES, sources)
    paths = [cycle_path(graph, c) for c in import_cycles(graph) if c not in KNOWN_CYCLES]
    assert paths == [expected]

def test_nothing_in_burnqed_imports_the_embedded_lean() -> None:
    assert PEER_MODULES and "minilean.replay.server" in PEER_MODULES
    found = peer_imports(MODULES)
    assert not found, "burnqed reaches the embedded Lean only through the protocol:\n" + "\n".join(found)


def test_the_embedded_lean_imports_of_burnqed_only_nouns_leaves_and_the_data_it_answers_from() -> None:
    violations = peer_violations(LAYERS, MODULES, PEER_MODULES)
    assert not violations, "the embedded Lean imports the Lean client (docs/architecture.md, \"The embedded " \
                           "Lean\"):\n" + "\n".join(violations)
    section = DOC.read_text(encoding="utf-8").split("\n## The embedded Lean", 1)[1].split("\n## ", 1)[0]
    assert all(f"`{entry}`" in section for entry in (*PEER_LAYERS, *PEER_DATA)), "the rule above is not the one " \
                                                                                  "docs/architecture.md states"


@pytest.mark.parametrize(("module", "source", "expected"), [
    ("burnqed.lean.pool", "def f() -> None:\n    from minilean.replay import server\n",
     ["lean/pool.py:2 imports minilean.replay"]),
    ("burnqed.lean.pool", "import minilean.schema\n", ["lean/pool.py:1 imports minilean.schema"]),
    ("burnqed.lean.pool", "import minileanish\n", []),
])
def test_an_import_of_the_embedded_lean_anywhere_in_burnqed_is_found(module: str, source: str,
                                                                      expected: list[str]) -> None:
    assert peer_imports({module: MODULES[module]}, sources={module: source}) == expected


@pytest.mark.parametrize(("source", "expected"), [
    ("from burnqed.lean.client import LeanWorker\n", ["minilean/replay/server.py:1 imports burnqed.lean.client"]),
    ("def f() -> None:\n    from burnqed.lean import soundness\n",
     ["minilean/replay/server.py:2 imports burnqed.lean.soundness"]),
    ("from burnqed.lean.corpus import Corpus\nfrom burnqed.world import messages\nimport burnqed.lean_text\n"
     "from burnqed.lean.version import PantographVersion\n", []),
])
def test_an_import_of_the_lean_client_by_the_embedded_lean_is_found(source: str, expected: list[str]) -> None:
    peer = {"minilean.replay.server": PEER_MODULES["minilean.replay.server"]}
    assert peer_violations(LAYERS, MODULES, peer, sources={"minilean.replay.server": source}) == expected
