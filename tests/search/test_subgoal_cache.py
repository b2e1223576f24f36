"""The subgoal cache (burnqed/search/subgoal_cache.py): its keys, its in-memory store, its entries persisted on file://
and S3 (moto) and shared by writers at once, corrupt or foreign entries skipped, its environment, its stats."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from burnqed.config.lean import LeanConfig
from burnqed.errors import InputError
from burnqed.layout import Layout, subgoal_cache_beside
from burnqed.records.replies import Goal, Variable
from burnqed.records.results import SketchAttempt, SketchOutcome, SubgoalAttempt, SubgoalSource, TheoremResult
from burnqed.search.subgoal_cache import (
    CacheEntry,
    CacheEnvironment,
    CacheStats,
    SubgoalCache,
    SubgoalKey,
    cache_environment,
    clear_cache,
    command_shape,
    entry_name,
    lean_version,
    mathlib_revision,
    merged_stats,
    proof_digest,
    proof_order,
    record_stats,
    subgoal_key,
    subgoals_from_cache,
    toolchain_digest,
)
from burnqed.storage import Store

X = Variable(name="x", type="ℝ")
H = Variable(name="h₁", type="0 < x")


def test_a_key_is_the_context_and_target_up_to_spelling_without_a_drafts_metavariable_values() -> None:
    drafted = Goal(target="0 < x*y", variables=(X, Variable(name="h₁", type="0<x", value="?m.12")))
    written = Goal(target="0 < x * y", variables=(X, H))
    assert subgoal_key(drafted, "import Mathlib") == subgoal_key(written, "import  Mathlib")
    assert subgoal_key(written, "import Mathlib").text == "header import Mathlib\nx : ℝ\nh₁ : 0 < x\n⊢ 0 < x * y"


@pytest.mark.parametrize("other", [
    Goal(target="0 < x * y", variables=(X, Variable(name="h₂", type="0 < x"))),  # a hypothesis renamed
    Goal(target="0 < x * y", variables=(X,)),  # a hypothesis missing
    Goal(target="0 < x * y", variables=(X, Variable(name="h₁", type="0 < x", value="x"))),  # a let's value
    Goal(target="0 ≤ x * y", variables=(X, H)),  # another target
])
def test_a_different_context_or_target_is_a_different_key(other: Goal) -> None:
    assert subgoal_key(other, None) != subgoal_key(Goal(target="0 < x * y", variables=(X, H)), None)


def test_another_header_is_a_different_key() -> None:
    goal = Goal(target="0 < x * y", variables=(X, H))
    assert subgoal_key(goal, "import Mathlib") != subgoal_key(goal, "import Mathlib\nopen Real")


def test_store_then_lookup_counts_and_never_stores_a_proof_twice() -> None:
    cache = SubgoalCache()
    key = subgoal_key(Goal(target="0 < x", variables=(X, H)), None)
    assert cache.lookup(key) == [] and cache.stats.hit_rate == 0.0
    cache.store(key, ["exact h₁"], theorem="t")
    cache.store(key, ["exact h₁"], theorem="u")
    cache.store(key, ["positivity"], theorem="u")
    assert cache.lookup(key) == [["exact h₁"], ["positivity"]]
    cache.record_hit()
    assert (cache.stats.lookups, cache.stats.misses, cache.stats.hits, cache.stats.stored) == (2, 1, 1, 2)
    assert SubgoalCache().stats.hit_rate is None
    with pytest.raises(ValueError, match="empty proof"):
        cache.store(key, [], theorem="t")


def test_a_digest_never_serves_a_key_it_was_not_stored_under() -> None:
    cache = SubgoalCache()
    key = subgoal_key(Goal(target="0 < x", variables=(X, H)), None)
    cache.store(key, ["exact h₁"], theorem="t")
    impostor = SubgoalKey("header \n⊢ False", key.digest)
    assert cache.lookup(impostor) == []
    with pytest.raises(ValueError, match="names two keys"):
        cache.store(impostor, ["simp"], theorem="t")


# ------------------------------------------------------------------------------------------------ persisted

ENV = CacheEnvironment(lean={"command": ["repl"]}, pantograph_version="0.3.4", toolchain=None)
KEY = subgoal_key(Goal(target="0 < x", variables=(X, H)), "import Mathlib")
OTHER = subgoal_key(Goal(target="0 ≤ x", variables=(X, H)), "import Mathlib")


def entry_names(store: Store, uri: str) -> list[str]:
    return sorted(store.output_files(uri))


def test_a_stored_proof_is_one_entry_that_a_cache_opened_later_serves(store: Store, tmp_path: Path) -> None:
    uri = f"file://{tmp_path}/run/subgoal-cache"
    first = SubgoalCache.open(store, uri, ENV)
    first.store(KEY, ["exact h₁"], theorem="t1")
    first.store(KEY, ["exact h₁"], theorem="t2")  # the same proof: not written twice
    first.store(KEY, ["positivity"], theorem="t2")
    name = f"{ENV.digest[:16]}/{KEY.digest}.{proof_digest(['exact h₁'])}.json"
    other = f"{ENV.digest[:16]}/{entry_name(KEY, ['positivity'])}"
    assert entry_names(store, uri) == sorted([name, other])
    entry = CacheEntry.model_validate_json(store.read_bytes(f"{uri}/{name}"))
    assert (entry.key, entry.tactics, entry.theorem, entry.environment, entry.format) == (
        KEY.text, ["exact h₁"], "t1", ENV, 1)
    assert first.stats.stored == 2

    later = SubgoalCache.open(store, uri, ENV)
    assert later.lookup(OTHER) == []
    assert sorted(later.lookup(KEY)) == [["exact h₁"], ["positivity"]]
    assert (later.stats.lookups, later.stats.misses, later.stats.stored, later.stats.skipped) == (2, 1, 0, 0)
    later.store(KEY, ["positivity"], theorem="t3")  # read from the store already: neither counted nor written
    assert later.stats.stored == 0 and len(entry_names(store, uri)) == 2
    listed = SubgoalCache.open(store, uri, ENV)  # listed, not read: the entry another job wrote stands
    listed.store(KEY, ["exact h₁"], theorem="t4")
    assert CacheEntry.model_validate_json(store.read_bytes(f"{uri}/{name}")).theorem == "t1"


def test_a_miss_lists_again_only_when_the_last_listing_is_refresh_s_old(store: Store, tmp_path: Path) -> None:
    uri = str(tmp_path / "cache")
    patient = SubgoalCache.open(store, uri, ENV, refresh_s=3600)
    eager = SubgoalCache.open(store, uri, ENV, refresh_s=0)
    SubgoalCache.open(store, uri, ENV).store(KEY, ["exact h₁"], theorem="t")  # another shard, after both opened
    assert patient.lookup(KEY) == [] and patient.stats.listings == 1  # listed at open only: not seen yet
    assert eager.lookup(KEY) == [["exact h₁"]] and eager.stats.listings == 2
    assert eager.lookup(KEY) == [["exact h₁"]] and eager.stats.listings == 2  # known now: no listing
    assert SubgoalCache.open(store, uri, ENV, refresh_s=3600).lookup(KEY) == [["exact h₁"]]  # listed at open


def write_concurrently(store: Store, uri: str) -> None:
    """Two writers on one cache at once: each stores its own proof and the same one, started together."""
    start = threading.Barrier(2)

    def shard(proof: str, theorem: str) -> None:
        cache = SubgoalCache.open(store, uri, ENV)
        start.wait()
        for tactics in ([proof], ["exact h₁"], [proof, "done"]):
            cache.store(KEY, tactics, theorem=theorem)

    threads = [threading.Thread(target=shard, args=args) for args in (("simp", "a"), ("positivity", "b"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_two_writers_at_once_lose_nothing_and_share_one_entry_per_proof(store: Store, tmp_path: Path) -> None:
    uri = str(tmp_path / "cache")
    write_concurrently(store, uri)
    assert len(entry_names(store, uri)) == 5  # simp, positivity, exact h₁ (once), and the two longer ones
    reader = SubgoalCache.open(store, uri, ENV)
    assert reader.lookup(KEY, limit=5) == [["simp"], ["exact h₁"], ["simp", "done"], ["positivity"],
                                           ["positivity", "done"]]  # shortest first
    assert reader.stats.skipped == 0


@pytest.mark.slow  # a moto server
def test_on_s3_a_stored_proof_is_served_to_another_cache_and_two_writers_share_it(s3_root: str) -> None:
    store = Store(cache_dir=None)
    uri = f"{s3_root}/subgoal-cache"
    write_concurrently(store, uri)
    assert len(entry_names(store, uri)) == 5
    reader = SubgoalCache.open(store, uri, ENV, refresh_s=0)
    assert len(reader.lookup(KEY, limit=5)) == 5
    late = SubgoalCache.open(store, uri, ENV, refresh_s=0)
    assert late.lookup(OTHER) == []
    reader.store(OTHER, ["linarith"], theorem="c")
    assert late.lookup(OTHER) == [["linarith"]] and late.stats.listings == 3  # open, the miss, this lookup
    assert (late.stats.lookups, late.stats.misses, late.stats.skipped) == (2, 1, 0)


def test_a_corrupt_or_misnamed_entry_is_skipped_counted_once_and_never_served(store: Store, tmp_path: Path) -> None:
    uri = str(tmp_path / "cache")
    SubgoalCache.open(store, uri, ENV).store(KEY, ["exact h₁"], theorem="t")
    folder = f"{uri}/{ENV.digest[:16]}"
    good = CacheEntry.model_validate_json(store.read_bytes(f"{folder}/{entry_name(KEY, ['exact h₁'])}"))
    store.write_bytes(f"{folder}/{entry_name(KEY, ['simp'])}", b"{not json")
    # its content names another proof than its file does
    store.write_bytes(f"{folder}/{entry_name(KEY, ['nlinarith'])}",
                      good.model_copy(update={"tactics": ["sorry"]}).model_dump_json().encode())
    # another key's text under this key's digest
    store.write_bytes(f"{folder}/{entry_name(KEY, ['decide'])}",
                      good.model_copy(update={"key": OTHER.text, "tactics": ["decide"]}).model_dump_json().encode())
    store.write_bytes(f"{folder}/notes.txt", b"hello")  # not an entry
    store.write_bytes(f"{folder}/.{entry_name(KEY, ['x'])}.1234.tmp", b"")  # a write in flight
    cache = SubgoalCache.open(store, uri, ENV, refresh_s=0)
    assert cache.stats.skipped == 1  # notes.txt
    assert cache.lookup(KEY) == [["exact h₁"]]
    assert cache.lookup(KEY) == [["exact h₁"]]
    assert cache.lookup(OTHER) == [] and cache.stats.listings == 2  # listed again: nothing counted twice
    assert cache.stats.skipped == 4  # each bad entry counted once


def test_an_entry_deleted_after_the_listing_is_neither_served_nor_skipped_and_found_again(store: Store,
                                                                                          tmp_path: Path) -> None:
    uri = str(tmp_path / "cache")
    writer = SubgoalCache.open(store, uri, ENV)
    writer.store(KEY, ["exact h₁"], theorem="t")
    reader = SubgoalCache.open(store, uri, ENV, refresh_s=0)
    (name,) = entry_names(store, uri)
    entry = store.read_bytes(f"{uri}/{name}")
    store.remove(f"{uri}/{name}")
    assert reader.lookup(KEY) == [] and reader.stats.skipped == 0
    store.write_bytes(f"{uri}/{name}", entry)
    assert reader.lookup(KEY) == [["exact h₁"]] and reader.stats.skipped == 0


def test_an_entry_of_another_environment_is_never_served(store: Store, tmp_path: Path) -> None:
    uri = str(tmp_path / "cache")
    newer = ENV.model_copy(update={"pantograph_version": "0.3.16"})
    SubgoalCache.open(store, uri, newer).store(KEY, ["exact h₁"], theorem="t")
    assert SubgoalCache.open(store, uri, ENV).lookup(KEY) == []  # another folder
    # copied into this environment's folder, it is still the other environment's entry
    (name,) = entry_names(store, uri)
    store.write_bytes(f"{uri}/{ENV.digest[:16]}/{name.split('/', 1)[1]}", store.read_bytes(f"{uri}/{name}"))
    cache = SubgoalCache.open(store, uri, ENV)
    assert cache.lookup(KEY) == [] and cache.stats.skipped == 1
    assert SubgoalCache.open(store, uri, newer).lookup(KEY) == [["exact h₁"]]


def test_the_environment_is_the_lean_settings_that_enter_an_identity_the_version_and_the_toolchain(
        tmp_path: Path) -> None:
    lean = LeanConfig()
    env = cache_environment(lean, "0.3.4")
    assert sorted(env.lean) == ["automatic_mode", "command", "compile_timeout_s", "deny", "max_tactic_chars",
                                "max_text_chars", "tactic_timeout_s"]
    assert env.lean["command"][0] == "{python}"  # as configured: the same on every machine
    assert (env.pantograph_version, env.toolchain) == ("0.3.4", None)
    # result-neutral settings (worker counts, recycling) leave it as it is; what changes Lean's answer does not
    assert cache_environment(lean.model_copy(update={"workers": 7, "recycle_requests": 5}), "0.3.4") == env
    for other in (cache_environment(lean.model_copy(update={"deny": [r"\bsorry\b"]}), "0.3.4"),
                  cache_environment(lean.model_copy(update={"tactic_timeout_s": 5.0}), "0.3.4"),
                  cache_environment(lean, "0.3.16"), cache_environment(lean, None)):
        assert other.digest != env.digest
    project = tmp_path / "project"
    project.mkdir()
    assert cache_environment(lean.model_copy(update={"cwd": str(project)}), "0.3.4") == env  # no Lake files
    (project / "lean-toolchain").write_text("leanprover/lean4:v4.19.0\n")
    with_toolchain = cache_environment(lean.model_copy(update={"cwd": str(project)}), "0.3.4")
    assert with_toolchain.toolchain is not None and with_toolchain.digest != env.digest
    (project / "lake-manifest.json").write_text('{"packages": [{"name": "mathlib", "rev": "abc"}]}')
    with_mathlib = cache_environment(lean.model_copy(update={"cwd": str(project)}), "0.3.4")
    assert with_mathlib.toolchain not in (None, with_toolchain.toolchain)
    assert toolchain_digest(str(project)) == with_mathlib.toolchain


def test_clear_cache_deletes_every_entry(store: Store, tmp_path: Path) -> None:
    uri = str(tmp_path / "cache")
    SubgoalCache.open(store, uri, ENV).store(KEY, ["exact h₁"], theorem="t")
    SubgoalCache.open(store, uri, ENV.model_copy(update={"toolchain": "x"})).store(KEY, ["simp"], theorem="t")
    assert clear_cache(store, uri) == 2
    assert entry_names(store, uri) == [] and SubgoalCache.open(store, uri, ENV).lookup(KEY) == []


def test_the_run_and_an_eval_each_have_their_cache() -> None:
    assert Layout("s3://b/run/").subgoal_cache() == "s3://b/run/subgoal-cache"
    assert subgoal_cache_beside("s3://b/run/iter_1/eval/eval-sketch.json") == (
        "s3://b/run/iter_1/eval/eval-sketch.subgoal-cache")


# ------------------------------------------------------------------------------------------------ stats


def test_stats_are_recorded_summed_and_read_back_with_no_hit_rate_before_a_lookup() -> None:
    assert CacheStats().as_dict() == {"lookups": 0, "hits": 0, "misses": 0, "rejected": 0, "stored": 0,
                                      "skipped": 0, "listings": 0, "hit_rate": None}
    record: dict[str, object] = {"mode": "sketch"}
    record_stats(record, CacheStats(lookups=4, hits=1, misses=2, rejected=1, stored=2, listings=1))
    record_stats(record, CacheStats(lookups=4, hits=2, misses=2, stored=1, skipped=1, listings=2))
    assert record == {"mode": "sketch", "subgoal_cache": {
        "lookups": 8, "hits": 3, "misses": 4, "rejected": 1, "stored": 3, "skipped": 1, "listings": 3,
        "hit_rate": 0.375}}
    shard = {"subgoal_cache": CacheStats(lookups=2, hits=1).as_dict()}
    assert merged_stats([record, shard, {"mode": "step"}]) == CacheStats(
        lookups=10, hits=4, misses=4, rejected=1, stored=3, skipped=1, listings=3)
    assert merged_stats([{"mode": "step"}]) is None  # not measured, never a 0 % hit rate
    assert CacheStats.from_dict({"lookups": 3, "hits": 3}).hit_rate == 1.0
    with pytest.raises(InputError, match="hits is -1, not a count"):
        CacheStats.from_dict({"lookups": 3, "hits": -1})


def test_hits_are_the_subgoals_the_results_took_from_the_cache() -> None:
    def subgoal(source: SubgoalSource | None) -> SubgoalAttempt:
        return SubgoalAttempt(name="h", statement="0 < x", goal="x : ℝ\n⊢ 0 < x", proved=source is not None,
                              tactics=["positivity"] if source else [], source=source)

    sketch = SketchAttempt(round=0, body="have h : 0 < x := by sorry\nexact h", outcome=SketchOutcome.ELABORATED,
                           subgoals=[subgoal(SubgoalSource.CACHE), subgoal(SubgoalSource.SEARCH), subgoal(None)])
    replan = sketch.model_copy(update={"round": 1, "subgoals": [subgoal(SubgoalSource.KEPT),
                                                                subgoal(SubgoalSource.CACHE)]})
    results = [TheoremResult(name="a", proved=False, sketches=[sketch, replan]),
               TheoremResult(name="b", proved=False)]
    assert subgoals_from_cache(results) == 2


def test_one_cache_shared_by_threads_counts_every_call_and_writes_every_proof(store: Store, tmp_path: Path) -> None:
    uri = str(tmp_path / "cache")
    cache = SubgoalCache.open(store, uri, ENV, refresh_s=0)
    keys = [subgoal_key(Goal(target=f"{i} < x", variables=(X, H)), None) for i in range(12)]

    def worker(k: int) -> None:
        for key in keys:
            cache.lookup(key)
            cache.store(key, [f"linarith [h₁, k{k}]"], theorem=f"t{k}")

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert (cache.stats.lookups, cache.stats.stored, cache.stats.skipped) == (36, 36, 0)
    assert len(entry_names(store, uri)) == 36
    assert all(len(SubgoalCache.open(store, uri, ENV).lookup(key)) == 3 for key in keys)


# ------------------------------------------------------------------------------------ planted entries


def plant(store: Store, uri: str, proofs: list[list[str]], *, written_at: datetime) -> None:
    """Entries under KEY as anyone who can write the run root would write them: valid, named right, any date."""
    folder = f"{uri}/{ENV.digest[:16]}"
    for tactics in proofs:
        entry = CacheEntry(key=KEY.text, tactics=tactics, theorem="planted", environment=ENV, burnqed_version="0",
                           written_at=written_at)
        store.write_bytes(f"{folder}/{entry_name(KEY, tactics)}", entry.model_dump_json().encode())


def test_100_planted_entries_cost_at_most_the_cap_a_lookup_and_each_one_replay_a_job(store: Store,
                                                                                     tmp_path: Path) -> None:
    uri = str(tmp_path / "cache")
    planted = [[f"exact h{i}"] for i in range(100)]
    plant(store, uri, planted, written_at=datetime(2020, 1, 1, tzinfo=UTC))
    plant(store, uri, [["exact h₁ -- the oldest entry of all, and the longest"]],
          written_at=datetime(1970, 1, 1, tzinfo=UTC))
    cache = SubgoalCache.open(store, uri, ENV)
    served: list[list[str]] = []
    for _ in range(25):
        found = cache.lookup(KEY, limit=4)
        assert len(found) == 4  # the cap, however many are stored
        for tactics in found:
            cache.record_rejected(KEY, tactics)
        served += found
    # shortest first, then by digest: h0-h9 (7 characters) before h10-h99; the oldest entry, the longest, comes last
    assert sorted(map(tuple, served[:10])) == sorted((f"exact h{i}",) for i in range(10))
    assert sorted(map(tuple, served)) == sorted(map(tuple, planted))  # each rejected one served exactly once
    assert cache.lookup(KEY, limit=4) == [["exact h₁ -- the oldest entry of all, and the longest"]]
    cache.record_rejected(KEY, ["exact h₁ -- the oldest entry of all, and the longest"])
    assert cache.lookup(KEY, limit=4) == [] and cache.lookup(OTHER) == []
    assert (cache.stats.lookups, cache.stats.rejected, cache.stats.misses, cache.stats.skipped) == (28, 101, 2, 0)
    # another job (another shard, the next iteration) has its own memory of what was rejected
    assert len(SubgoalCache.open(store, uri, ENV).lookup(KEY, limit=4)) == 4
    with pytest.raises(ValueError, match="at least one proof"):
        cache.lookup(KEY, limit=0)


def test_the_order_is_the_proofs_length_then_digest_never_the_writers_date() -> None:
    cache = SubgoalCache()
    for tactics in (["nlinarith [h₁, sq_nonneg x]"], ["positivity"], ["exact h₁"], ["simp", "linarith"]):
        cache.store(KEY, tactics, theorem="t")
    assert cache.lookup(KEY, limit=3) == [["exact h₁"], ["positivity"], ["simp", "linarith"]]
    assert proof_order(["simp", "linarith"]) == (len("simp\nlinarith"), proof_digest(["simp", "linarith"]))
    cache.record_rejected(KEY, ["positivity"])  # under KEY only: another key still serves it
    cache.store(OTHER, ["positivity"], theorem="t")
    assert cache.lookup(KEY, limit=3) == [["exact h₁"], ["simp", "linarith"], ["nlinarith [h₁, sq_nonneg x]"]]
    assert cache.lookup(OTHER) == [["positivity"]]


# ------------------------------------------------------------------------------------------ moved, or not


def lean_at(root: str, cwd: Path | None = None) -> LeanConfig:
    """The same Lean installed under `root`: its interpreter, its project folder."""
    return LeanConfig(command=[f"{root}/.venv/bin/python", "-m", "minilean", f"--project={root}/lean"],
                      cwd=None if cwd is None else str(cwd))


def test_a_moved_venv_still_hits_and_another_program_or_argument_misses(store: Store, tmp_path: Path) -> None:
    uri = str(tmp_path / "cache")
    here, moved = cache_environment(lean_at("/home/a/run"), "0.3.4"), cache_environment(lean_at("/srv/b"), "0.3.4")
    assert here.lean["command"] == ["python", "-m", "minilean", "--project=lean"] and here == moved
    assert command_shape(["/opt/x/repl", "Mathlib", "{python}", "a/b:c/d"]) == ["repl", "Mathlib", "{python}", "b:d"]
    SubgoalCache.open(store, uri, here).store(KEY, ["exact h₁"], theorem="t")
    assert SubgoalCache.open(store, uri, moved).lookup(KEY) == [["exact h₁"]]
    for other in (["/srv/b/.venv/bin/python3.12", "-m", "minilean"], ["/srv/b/.venv/bin/python", "-m", "other"]):
        env = cache_environment(LeanConfig(command=other), "0.3.4")
        assert env != here and SubgoalCache.open(store, uri, env).lookup(KEY) == []


def test_another_lean_pantograph_or_mathlib_misses_and_a_moved_project_hits(store: Store, tmp_path: Path) -> None:
    uri = str(tmp_path / "cache")

    def project(folder: str, lean: str, mathlib: str) -> Path:
        path = tmp_path / folder
        path.mkdir()
        (path / "lean-toolchain").write_text(f"leanprover/lean4:{lean}\n")
        (path / "lake-manifest.json").write_text(json.dumps({"packages": [{"name": "mathlib", "rev": mathlib}]}))
        return path

    here = cache_environment(lean_at("/a", project("a", "v4.19.0", "abc")), "0.3.4")
    assert (here.lean_version, here.mathlib) == ("leanprover/lean4:v4.19.0", "abc")
    SubgoalCache.open(store, uri, here).store(KEY, ["exact h₁"], theorem="t")
    moved = cache_environment(lean_at("/b", project("b", "v4.19.0", "abc")), "0.3.4")
    assert moved == here and SubgoalCache.open(store, uri, moved).lookup(KEY) == [["exact h₁"]]
    others = [cache_environment(lean_at("/a", project("c", "v4.22.0", "abc")), "0.3.4"),  # another Lean
              cache_environment(lean_at("/a", project("d", "v4.19.0", "def")), "0.3.4"),  # another Mathlib
              cache_environment(lean_at("/a", project("e", "v4.19.0", "abc")), "0.3.16")]  # another Pantograph
    assert [(env.lean_version, env.mathlib) for env in others] == [
        ("leanprover/lean4:v4.22.0", "abc"), ("leanprover/lean4:v4.19.0", "def"), ("leanprover/lean4:v4.19.0", "abc")]
    for env in others:
        assert env.digest != here.digest and SubgoalCache.open(store, uri, env).lookup(KEY) == []
    # without a Lake project, a Pantograph build names its Lean: another one misses
    built = [cache_environment(LeanConfig(command=["/opt/p/repl"]), version)
             for version in ("0.3.7/v4.21.0", "0.3.7/v4.22.0")]
    assert [env.lean_version for env in built] == ["v4.21.0", "v4.22.0"] and built[0].digest != built[1].digest
    assert mathlib_revision(str(tmp_path)) is None and lean_version(None, "0.3.4") is None
