"""The figures the docs state about the code as it is (not dated measurements) are checked against the code: the
embedded benchmark's size and make-up (the generated world's splits, its held-out and trap theorems, the bundled
hand-written ones), as `burnqed world stats` and `burnqed eval` without --theorems see them, and the eval result's
schema version. A change to the world, the bundled corpus or the schema fails here until the pages say it. Dated
results (docs/results.md's measurements, CONTRIBUTING.md's test counts "on 2026-11-26") are history, not claims
about the code, and are not checked."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from burnqed.data.index import embedded_index
from leankit.world.checked import embedded_world

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def figures() -> dict[str, int]:
    """What the code says: the seed-0 world's splits and roles, the bundled test theorems, the benchmark."""
    world = embedded_world(0)
    splits = Counter(t.split for t in world.theorems)
    roles = Counter((t.split, t.role) for t in world.theorems)
    benchmark = Counter(t.source for t in embedded_index("test", 0).theorems)
    return {"world": len(world.theorems), "train": splits["train"], "pool": splits["pool"], "test": splits["test"],
            "held_out": roles["test", "held_out"], "test_traps": roles["test", "trap"],
            "pool_taught": roles["pool", "taught"], "pool_explored": roles["pool", "explored"],
            "pool_traps": roles["pool", "trap"], "bundled": benchmark["burnqed-bundled"],
            "benchmark": sum(benchmark.values()), "version": world.version}


def sentence(page: str, pattern: str) -> re.Match[str]:
    text = " ".join((REPO / page).read_text(encoding="utf-8").split())  # line breaks as spaces
    found = re.search(pattern, text)
    assert found is not None, f"{page} no longer says /{pattern}/: update the page, or this test to its new wording"
    return found


def numbers(match: re.Match[str]) -> list[int]:
    return [int(group) for group in match.groups()]


def test_the_readme_states_the_benchmark_the_default_run_evaluates(figures: dict[str, int]) -> None:
    found = sentence("README.md", r"on (\d+) test theorems: the generated world's (\d+) \((\d+) held-out combinations "
                                  r"no training proof shows, (\d+) false traps\) and (\d+) hand-written ones")
    assert numbers(found) == [figures[k] for k in ("benchmark", "test", "held_out", "test_traps", "bundled")]


def test_the_search_page_states_the_embedded_benchmark(figures: dict[str, int]) -> None:
    found = sentence("docs/search.md", r"the world's (\d+) test theorems and the (\d+) bundled ones")
    assert numbers(found) == [figures["test"], figures["bundled"]]


def test_the_results_page_states_the_embedded_benchmark(figures: dict[str, int]) -> None:
    found = sentence("docs/results.md", r"is (\d+) test theorems on world version (\d+): the checked world's (\d+) "
                                        r"\((\d+) from held-out templates, (\d+) traps;.*? and the (\d+) hand-written")
    assert numbers(found) == [figures[k] for k in ("benchmark", "version", "test", "held_out", "test_traps",
                                                   "bundled")]


def test_the_replay_corpus_page_states_what_world_stats_prints(figures: dict[str, int]) -> None:
    found = sentence("docs/replay-corpus.md",
                     r"Seed 0 \(`burnqed world stats`\): (\d+) theorems, train (\d+), pool (\d+) \((\d+) taught, "
                     r"(\d+) explored, (\d+) traps\), test (\d+) \((\d+) from held-out templates and (\d+) traps\)")
    assert numbers(found) == [figures[k] for k in ("world", "train", "pool", "pool_taught", "pool_explored",
                                                   "pool_traps", "test", "held_out", "test_traps")]


def test_the_search_page_states_the_eval_schema_version() -> None:
    from burnqed.eval.result import SCHEMA_VERSION

    found = sentence("docs/search.md", r"\(`burnqed/eval/result.py`, schema (\d+), `SCHEMA_VERSION`; files of "
                                       r"schemas 1 to (\d+) still load")
    assert numbers(found) == [SCHEMA_VERSION, SCHEMA_VERSION - 1]


def test_the_replay_corpus_page_states_the_sketch_family() -> None:
    with_sketches = embedded_world(0, sketches=True)
    family = Counter(t.split for t in with_sketches.theorems if t.role == "sketch")
    world = Counter(t.split for t in with_sketches.theorems)
    found = sentence("docs/replay-corpus.md",
                     r"(\d+) theorems, train (\d+), pool (\d+), test (\d+) \(seed 0\)\. It is \*\*off by default\*\*.*?"
                     r"On, the world has (\d+) theorems \(train (\d+), pool (\d+), test (\d+)\) and the embedded "
                     r"benchmark (\d+) test theorems")
    assert numbers(found) == [family.total(), family["train"], family["pool"], family["test"], world.total(),
                              world["train"], world["pool"], world["test"], family["test"]]
