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
