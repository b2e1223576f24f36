"""scripts/mutation.py's tiers: each pytest argument list it runs against a mutant names the target's test files, so
that a mutant its own tests let live is not run against the whole suite and counted killed when that times out."""

from __future__ import annotations

from tests.scripts import load_script

mutation = load_script("mutation")


def test_every_tier_names_test_files_and_a_lone_file_has_no_empty_tier() -> None:
    assert mutation.tiers(["tests/a.py"]) == [["-m", "not slow", "tests/a.py"], ["-m", "slow", "tests/a.py"]]
    assert mutation.tiers(["tests/a.py", "tests/b.py"]) == [
        ["-m", "not slow", "tests/a.py"], ["-m", "not slow", "tests/b.py"], ["-m", "slow", "tests/a.py", "tests/b.py"]]
    for _, tests in mutation.TARGETS.values():
        assert all(any(arg.startswith("tests/") for arg in tier) for tier in mutation.tiers(tests))


def test_a_fork_swaps_the_code_of_a_decorated_function_not_of_its_decorators_wrapper() -> None:
    """`run_forked` gives the module's functions the mutated code in place; a `@contextmanager` function is its
    wrapper there, whose code is contextlib's: the mutant must reach the generator function behind it."""
    source = """
from contextlib import contextmanager

@contextmanager
def block(seen):
    seen.append({})
    yield
"""
    old: dict[str, object] = {}
    new: dict[str, object] = {}
    exec(compile(source, "<old>", "exec"), old)
    exec(compile(source.replace("seen.append({})", "seen.append([])"), "<new>", "exec"), new)
    mutation._swap_code(old, new)
    seen: list[object] = []
    with old["block"](seen):  # type: ignore[operator]
        pass
    assert seen == [[]]
