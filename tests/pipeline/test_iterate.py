"""`burnqed iterate` end to end on the embedded defaults (replay Lean server, tiny model) with a small generated
world in place of the default one (the default takes minutes: benchmarks/learning.py runs it): iteration 0 killed
mid-search and re-run to the end, a re-run that does no work, iteration 1 with an EBM and the report of both
iterations; and the same iteration 0 with the run root on S3 (moto) giving the same artifacts."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from burnqed.storage import Store
from burnqed.world import generate_world, world_json
from burnqed.world.algebra import dvd_omega, nat_lin
from burnqed.world.catalog import Family

# Whole iterations as subprocesses: minutes on a shared 2-core machine, beyond the default per-test timeout.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

# Small but complete: one noise pass, 2 shards, checkpoints every 2 theorems, Lean slowed down a little so
# a kill lands mid-search; the bundled corpus and a small world (a taught and a search-only family).
WORLD = (Family("nat_lin", nat_lin, train=6, pool=3, test=3), Family("dvd_omega", dvd_omega, train=0, pool=4, test=2))
SETS = {
    "BURNQED_SEARCH__CHECKPOINT_EVERY": "2",
    "BURNQED_PIPELINE__EVAL_BUDGETS": "[10, 30]",
    "BURNQED_SFT__MAX_STEPS": "40",
}


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh BURNQED_HOME with the default tiny model built as a first `iterate` would build it (the shorter
    test model finds too few multi-step proofs to train an EBM on), and the small world's corpus and index."""
    from burnqed.lean.corpus import bundled_corpus_path, index_json, load_corpus, theorem_index
    from burnqed.policy.tiny import TINY_NAME, build_tiny_model

    folder = tmp_path_factory.mktemp("home")
    build_tiny_model(folder / "models" / TINY_NAME)
    corpus = folder / "corpus"
    corpus.mkdir()
    shutil.copy(bundled_corpus_path(), corpus / "competition.json")
    world = generate_world(families=WORLD, reserved=[t.statement for t in load_corpus().theorems])
    (corpus / "world.json").write_text(world_json(world), encoding="utf-8")
    (folder / "test.json").write_text(index_json(theorem_index(load_corpus(corpus), "test")), encoding="utf-8")
    return folder


def _env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    corpus = home / "corpus"
    world = {
        "BURNQED_LEAN__COMMAND": json.dumps(["{python}", "-m", "minilean.replay", "--latency-ms", "15",
                                             "--corpus", str(corpus)]),
        "BURNQED_DATA__SOURCES": json.dumps([{"kind": "bundled"},
                                             {"kind": "world", "path": str(corpus / "world.json")}]),
        "BURNQED_PIPELINE__BENCHMARK": str(home / "test.json"),
    }
    env = {**os.environ, "BURNQED_HOME": str(home), **SETS, **world, **(extra or {})}
    env.pop("BURNQED_CONFIG", None)
    return env


def _iterate(root: str, iteration: int, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "burnqed.cli", "iterate", "--iter", str(iteration), "--root", root],
                          env=env, capture_output=True, text=True, timeout=900, check=False)


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and "-cache" not in str(p)}


@pytest.fixture(scope="module")
def local_run(home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Iteration 0, SIGKILLed (the runner and its stage) once the first search shard committed a part, then
    re-run to the end."""
    store = Store(cache_dir=tmp_path_factory.mktemp("cache"))  # module-scoped: its own store
    root = tmp_path_factory.mktemp("run")
    env = _env(home)
    proc = subprocess.Popen([sys.executable, "-m", "burnqed.cli", "iterate", "--iter", "0", "--root", str(root)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    first_part = root / "iter_0" / "search" / "shard-0" / "part-000000.json"
    deadline = time.monotonic() + 600
    while not first_part.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    import psutil

    stages = psutil.Process(proc.pid).children(recursive=True) if proc.poll() is None else []
    os.killpg(proc.pid, signal.SIGKILL)  # the runner; its stage has a process group of its own and follows it
    proc.wait()
    _, alive = psutil.wait_procs(stages, timeout=10)  # the stage stops on its parent's death (PDEATHSIG)
    assert not alive, f"left behind by a SIGKILLed iterate: {alive}"
    assert first_part.exists(), "the search never committed a part"
    assert not store.is_done(f"file://{root}/iter_0/search/shard-0")  # killed mid-search
    done = _iterate(str(root), 0, env)
    assert done.returncode == 0, done.stderr[-3000:]
    # the killed search was resumed, not taken for done (stages run side by side, their lines prefixed)
    assert "search: done already, skipped" not in done.stderr and "search: finished in" in done.stderr
    return root


def test_iteration_0_killed_mid_search_finishes_on_rerun(local_run: Path, store: Store) -> None:
    it0 = local_run / "iter_0"
    names = [m.name for m in it0.glob("search/shard-0/part-*.json")]
    assert len(names) >= 2
    from burnqed.trajectory.reader import read_marker, read_results

    shard0 = read_results(f"file://{it0}/search/shard-0", store=store)
    assert len({r.name for r in shard0}) == len(shard0)  # resumed: nothing searched twice
    index = json.loads((it0 / "data" / "theorems.json").read_text())
    searched = [t["name"] for t in index["theorems"] if t["split"] in ("train", "pool")]
    assert sum(1 for t in index["theorems"] if t["split"] == "pool") == 7  # the world's pool statements
    merged = read_marker(f"file://{it0}/trajectories", store=store)
    assert merged is not None and merged.theorems == 2 * len(searched)  # search + noise pass, each theorem once
    for stage in ("data", "sft", "export", "trajectories", "report"):
        assert (it0 / stage / "_SUCCESS.json").exists(), stage
    result = json.loads((it0 / "eval" / "eval.json").read_text())
    assert result["ebm"] is None and [b["budget"] for b in result["budgets"]] == [10, 30]
    assert {g["group"] for g in result["groups"]} == {"burnqed-world", "burnqed-bundled"}
    assert result["seed"] == 0 and result["settings"]["num_candidates"] == 8
    base = json.loads((it0 / "eval-base" / "eval.json").read_text())
    assert base["model"].endswith("tiny-v3") and base["total"] == result["total"] == 15 + 5


def test_rerunning_a_finished_iteration_does_no_work(local_run: Path, home: Path) -> None:
    before = {p: p.stat().st_mtime_ns for p in local_run.rglob("*") if p.is_file()}
    again = _iterate(str(local_run), 0, _env(home))
    assert again.returncode == 0, again.stderr[-2000:]
    assert "nothing to do, all stages finished" in again.stdout
    assert again.stderr.count("done already, skipped") == 9
    assert {p: p.stat().st_mtime_ns for p in local_run.rglob("*") if p.is_file()} == before


def test_iteration_1_trains_and_uses_an_ebm_and_reports_both_iterations(local_run: Path, home: Path,
                                                                        store: Store) -> None:
    done = _iterate(str(local_run), 1, _env(home))
    assert done.returncode == 0, done.stderr[-3000:]
    it1 = local_run / "iter_1"
    assert (it1 / "ebm" / "_SUCCESS.json").exists()
    with_ebm = json.loads((it1 / "eval" / "eval.json").read_text())
    without = json.loads((it1 / "eval" / "eval-noebm.json").read_text())
    assert with_ebm["ebm"] == f"file://{it1}/ebm" and without["ebm"] is None
    from burnqed.trajectory.reader import read_edges

    energies = read_edges(f"file://{it1}/trajectories", columns=["energy"], store=store).column("energy").to_pylist()
    assert any(e is not None for e in energies)  # the search scored children with the EBM
    report = json.loads((it1 / "report" / "report.json").read_text())
    assert {(r["iteration"], r["arm"]) for r in report["rows"]} == {(0, "base"), (0, "llm"), (1, "llm"),
                                                                   (1, "llm+ebm")}
    learning = [(row["step"], row["group"]) for row in report["learning"]]
    assert learning == [(step, group) for step in ("base", "iteration 0", "iteration 1")
                        for group in ("all", "burnqed-bundled", "burnqed-world")]
    assert [g["name"] for g in report["gates"]] == ["baseline", "gain", "ebm-helps"]
    markdown = (it1 / "report" / "report.md").read_text()
    assert "| 1 | llm+ebm |" in markdown and "| 0 | llm |" in markdown and "| 0 | base |" in markdown
    assert "## Learning" in markdown and "| burnqed-world |" in markdown
    assert "burnqed-world: base " in done.stdout  # the learning line after the iteration
    assert (it1 / "report" / "solve_rate.png").stat().st_size > 1000


def test_the_same_iteration_on_s3_produces_the_same_artifacts(local_run: Path, home: Path, s3_root: str,
                                                             tmp_path: Path, store: Store) -> None:
    # Without eval-base: the stage is the same eval command as `eval`, covered by the local run.
    done = _iterate(s3_root, 0, _env(home, {"BURNQED_PIPELINE__EVAL_BASE": "false"}))
    assert done.returncode == 0, done.stderr[-3000:]
    fs, path = store.resolve(s3_root)
    mirror = tmp_path / "mirror"
    fs.get(path + "/", str(mirror) + "/", recursive=True)
    local_files = {name for name in _tree(local_run) if name.startswith("iter_0/") and "/eval-base/" not in name}
    remote_files = _tree(mirror)
    # the killed local run committed its search in more (smaller) parts; everything else is the same
    def without_parts(names: set[str]) -> set[str]:
        return {n for n in names if "/search" not in n and "/trajectories/part-" not in n}
    assert without_parts(remote_files) == without_parts(local_files)
    for stage in ("data", "sft", "export", "search/shard-0", "search/shard-1", "trajectories", "report"):
        assert f"iter_0/{stage}/_SUCCESS.json" in remote_files, stage
    local_pairs = (local_run / "iter_0" / "data" / "pairs.parquet").read_bytes()
    assert (mirror / "iter_0" / "data" / "pairs.parquet").read_bytes() == local_pairs
