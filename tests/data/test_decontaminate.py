"""One decontamination for every route a benchmark takes: the same file, restating a bundled training theorem and a
world training theorem up to renaming, drops both from training when it is `pipeline.benchmark` (what `iterate`'s
evals evaluate) and when it is a `benchmark` source, and is named by an eval of a model whose training data was prepared
without it. A benchmark that is missing or holds no theorem stops `data prepare` and `iterate` before any work."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError

from burnqed.config import DataConfig, PipelineConfig
from burnqed.data.collect import collect
from burnqed.data.data_report import read_report, render_report
from burnqed.data.decontaminate import check_lines, check_training_data, training_data_of
from burnqed.data.index import embedded_index, load_theorem_index
from burnqed.data.prepare import assemble, write_prepared
from burnqed.data.theorems import load_theorems, pipeline_benchmark
from burnqed.errors import InputError
from burnqed.eval.result import load_eval_result
from burnqed.provenance import StageInputs
from burnqed.records.theorem import Theorem, TheoremIndex
from burnqed.runner.reuse import stamp
from burnqed.storage import Store
from leankit.corpus import load_corpus
from leankit.world.checked import embedded_world
from tests.processes import cli

# What the commands make of Lean's replies is the subject, not the worker's process: minilean answers in this
# process (tests/conftest.py `minilean_in_process`).
pytestmark = pytest.mark.usefixtures("minilean_in_process")

# The first train theorem of the bundled corpus and of the checked world of seed 0, restated with other names, a
# named hypothesis for the arrow and another spacing; and one that restates nothing.
BUNDLED = ("algebra_2x_plus_3_eq_11", "∀ (x : ℝ), 2 * x + 3 = 11 → x = 4")
WORLD = ("world_algebra_97f80d", "∀ (t : ℝ), 6 * t + 6 = 6 → t = 0")
RESTATING = """import Mathlib

theorem bench_world (u : ℝ) (h : 6 * u + 6 = 6) : u = 0 := by
  sorry

theorem bench_bundled (y : ℝ) (hy : 2*y + 3 = 11) : y = 4 := by
  sorry

theorem bench_other (z : ℝ) (h : 3 * z = 9) : z = 3 := by
  sorry
"""
# The training sources, cut to the first two theorems of each (the restated one and one more).
SOURCES = [{"kind": "bundled", "limit": 2}, {"kind": "world", "limit": 2}]
KEPT = ["algebra_linear_system_sum_diff", "world_algebra_b03f99"]


def restating_file(folder: Path) -> Path:
    path = folder / "MyBench.lean"
    path.write_text(RESTATING, encoding="utf-8")
    return path


@pytest.mark.slow  # reads the bundled corpus and the checked world
def test_the_restated_theorems_are_the_first_of_their_sources() -> None:
    """What the file restates is what the sources read first (guards the fixture of every test here)."""
    bundled = Theorem.from_recorded(next(t for t in load_corpus().theorems if t.split == "train"))
    world = Theorem.from_recorded(next(t for t in embedded_world(0).theorems if t.split == "train"))
    assert [(bundled.name, bundled.statement), (world.name, world.statement)] == [BUNDLED, WORLD]


@pytest.mark.slow  # reads the bundled corpus and the checked world
@pytest.mark.parametrize("route", ["pipeline.benchmark", "sources"])
def test_the_restating_file_drops_both_training_theorems(route: str, tmp_path: Path, store: Store) -> None:
    bench = restating_file(tmp_path)
    if route == "pipeline.benchmark":
        config = DataConfig.model_validate({"sources": SOURCES, "replay": False})
        collection = collect(config, store=store, benchmarks=[pipeline_benchmark(str(bench), 0, store=store)])
        label, kept = "MyBench", KEPT
    else:
        config = DataConfig.model_validate({"sources": [*SOURCES, {"kind": "benchmark", "path": str(bench)}],
                                            "replay": False})
        collection = collect(config, store=store)
        label, kept = "benchmark", [*KEPT, "bench_world", "bench_bundled", "bench_other"]
    assert [(o.training, o.training_source, o.benchmark, o.benchmark_source, o.benchmark_split, o.statement, o.route)
            for o in collection.overlaps] == [
        (BUNDLED[0], "bundled", "bench_bundled", label, "test", BUNDLED[1], route),
        (WORLD[0], "world", "bench_world", label, "test", WORLD[1], route),
    ]
    assert [c.name for c in collection.candidates] == kept
    assert [r.rejected_theorems for r in collection.reports[:2]] == [{"benchmark_overlap": 1}] * 2
    assert [(b.route, b.name, b.theorems) for b in collection.benchmarks] == [(route, label, 3)]


@pytest.mark.slow  # reads the bundled corpus and the checked world
def test_prepare_counts_the_dropped_theorems_by_route(tmp_path: Path, store: Store) -> None:
    bench = restating_file(tmp_path)
    world_only = tmp_path / "WorldOnly.lean"
    world_only.write_text("theorem only_world (v : ℝ) (hv : 6 * v + 6 = 6) : v = 0 := by\n  sorry\n", encoding="utf-8")
    config = DataConfig.model_validate({"sources": [*SOURCES, {"kind": "benchmark", "path": str(world_only)}],
                                        "replay": False})
    # The world theorem restates a theorem of both: the source's benchmark names it, so it counts once.
    collection = collect(config, store=store, benchmarks=[pipeline_benchmark(str(bench), 0, store=store)])
    report = assemble(collection, {}, config, None, 0.0).report
    lines = render_report(report).splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith("decontamination:"))
    assert lines[start:start + 4] == [
        "decontamination: 2 training theorems dropped as restating a benchmark theorem (sources: 1, "
        "pipeline.benchmark: 1)",
        "  compared with: benchmark (sources, 1 theorems), MyBench (pipeline.benchmark, 3 theorems)",
        "  algebra_2x_plus_3_eq_11 (bundled) = bench_bundled (MyBench, test)",
        "  world_algebra_97f80d (world) = only_world (benchmark, test)",
    ]


@pytest.mark.slow  # 296 statements in normal form
def test_the_numerals_filter_keeps_every_pair_the_normal_form_joins() -> None:
    """`Twins` forms only the statements whose numerals a benchmark statement has: on renamings, and on every
    statement of the embedded corpus against every other, it finds exactly the pairs the normal form alone finds."""
    from burnqed.data.decontaminate import Benchmark, Twins, numerals
    from leankit.normal_form import statement_normal_form

    assert numerals("∀ (x1 : ℕ) (h₀ : x1 ^ 2 = 16), x1 = 4 ∨ h₀.1 = 2.5") == ("16", "2", "2.5", "4")
    theorems = [t for t in embedded_index(None, 0).theorems if t.statement]
    standalone_x = re.compile(r"(?<![\w.'])x(?![\w'])")
    renamed = [t.model_copy(update={"name": f"{t.name}_again", "statement": standalone_x.sub("x_fresh", t.statement)})
               for t in theorems if t.statement and standalone_x.search(t.statement)]
    twins = Twins([Benchmark("sources", "all", tuple(theorems))])
    forms = {statement_normal_form(t.statement or ""): t.name for t in reversed(theorems)}  # the first of each form
    for theorem in [*theorems, *renamed]:
        found = twins.overlap(theorem, "s")
        assert (found.benchmark if found else None) == forms.get(statement_normal_form(theorem.statement or ""))
    assert len(renamed) == 47 and all(twins.overlap(t, "s") is not None for t in renamed)


def test_pipeline_benchmark_unset_is_the_embedded_test_split(store: Store) -> None:
    benchmark = pipeline_benchmark(None, 0, store=store)
    assert (benchmark.route, benchmark.name, benchmark.uri) == ("pipeline.benchmark", "embedded-test", None)
    assert benchmark.theorems == tuple(embedded_index("test", 0).theorems)


def test_a_missing_or_empty_benchmark_is_refused_naming_pipeline_benchmark(tmp_path: Path, store: Store) -> None:
    empty_lean = tmp_path / "Empty.lean"
    empty_lean.write_text("import Mathlib\n\ndef two : ℕ := 2\n-- theorem none : True\n", encoding="utf-8")
    empty_index = tmp_path / "empty.json"
    empty_index.write_text('{"name": "empty", "theorems": []}', encoding="utf-8")
    with pytest.raises(InputError, match=r"^pipeline\.benchmark .*Missing\.lean does not exist \(the benchmark the "
                       r"evals evaluate"):
        pipeline_benchmark(str(tmp_path / "Missing.lean"), 0, store=store)
    with pytest.raises(InputError, match=r"^pipeline\.benchmark .*Empty\.lean: no theorem could be read from it"):
        pipeline_benchmark(str(empty_lean), 0, store=store)
    with pytest.raises(InputError, match=r"^pipeline\.benchmark: theorem index .*empty\.json lists no theorems$"):
        pipeline_benchmark(str(empty_index), 0, store=store)
    with pytest.raises(ValidationError, match="is empty: give a benchmark file"):
        PipelineConfig(benchmark=" ")
    # `--theorems` reads files the same way and keeps its own name in messages.
    with pytest.raises(InputError, match=r"^--theorems .*Empty\.lean: no theorem could be read from it"):
        load_theorems(str(empty_lean), store=store)


@pytest.mark.slow  # six command starts in-process
@pytest.mark.parametrize("bench", ["Missing.lean", "Empty.lean"])
@pytest.mark.parametrize("command", [["data", "prepare", "--output", "{out}"], ["iterate", "--root", "{out}"],
                                     ["run-all", "--iters", "0", "--root", "{out}"]])
def test_a_missing_or_empty_benchmark_stops_the_run_before_any_work(command: list[str], bench: str,
                                                                    tmp_path: Path) -> None:
    (tmp_path / "Empty.lean").write_text("import Mathlib\n", encoding="utf-8")
    out = tmp_path / "run"
    args = [part.replace("{out}", str(out)) for part in command]
    done = cli(*args, "--set", f"pipeline.benchmark={tmp_path / bench}")
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"error: pipeline.benchmark {tmp_path / bench}")
    assert len(done.stderr.strip().splitlines()) == 1  # no stage announced, no progress
    assert not out.exists()


def publish_chain(folder: Path, model: Path, store: Store) -> str:
    """An iteration's outputs as far as an eval reads them: prepared data without the benchmark (the two sources' first
    two theorems; no replay, it is the index that counts here), an SFT output made from it and an export of that SFT
    output holding `model`'s files; returns the export's path."""
    config = DataConfig.model_validate({"sources": SOURCES, "replay": False})
    prepared = assemble(collect(config, store=store), {}, config, None, 0.0)
    data, sft, export = (str(folder / name) for name in ("data", "sft", "export"))
    with store.staged_output(data, "prepare-data", made_from=StageInputs()) as staged:
        write_prepared(staged, prepared)
    with store.staged_output(sft, "sft", made_from=StageInputs(inputs={"--data": stamp(data, store)})) as staged:
        (staged / "adapter.txt").write_text("trained\n")
    with store.staged_output(export, "export", made_from=StageInputs(inputs={"--sft": stamp(sft, store)})) as staged:
        for path in model.iterdir():
            shutil.copy(path, staged / path.name)
    return export


@pytest.mark.slow  # reads the bundled corpus and the checked world
def test_the_eval_names_the_training_theorems_that_restate_its_theorems(tmp_path: Path, store: Store) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    export = publish_chain(tmp_path, model, store)
    data = f"file://{tmp_path / 'data'}"
    assert training_data_of(export, store=store) == data
    assert training_data_of(str(tmp_path / "sft"), store=store) == data
    assert training_data_of(str(tmp_path / "data"), store=store) == str(tmp_path / "data")
    assert [training_data_of(name, store=store) for name in (str(model), "org/hub-model", None)] == [None] * 3
    index = load_theorems(str(restating_file(tmp_path)), store=store)
    check = check_training_data(export, index, store=store)
    assert check is not None
    assert (check.data, check.training_theorems) == (data, 4)
    assert [(o.benchmark, o.benchmark_source, o.training, o.training_source, o.route) for o in check.overlaps] == [
        ("bench_bundled", "MyBench", BUNDLED[0], "bundled", "eval"),
        ("bench_world", "MyBench", WORLD[0], "world", "eval"),
    ]
    assert check_lines(check) == [
        f"warning: decontamination: 2 of the 4 training theorems of {data} (the model's training data) restate a "
        "theorem of this benchmark; prepare the data with the benchmark as pipeline.benchmark (or a benchmark source) "
        "to drop them:",
        f"  bench_bundled = {BUNDLED[0]} (bundled)",
        f"  bench_world = {WORLD[0]} (world)",
    ]
    # A benchmark that restates no training theorem: nothing to name, and it says what it compared.
    other = TheoremIndex(name="other", theorems=[t for t in index.theorems if t.name == "bench_other"])
    assert check_lines(check_training_data(export, other, store=store)) == [
        f"decontamination: none of the 4 training theorems of {data} (the model's training data) restates a theorem "
        "of this benchmark"]


@pytest.mark.slow  # reads the bundled corpus and the checked world
def test_held_out_theorems_of_the_training_data_are_not_training_theorems(tmp_path: Path, store: Store) -> None:
    bench = restating_file(tmp_path)
    config = DataConfig.model_validate({"sources": [*SOURCES, {"kind": "benchmark", "path": str(bench),
                                                               "split": "valid"}], "replay": False})
    prepared = assemble(collect(config, store=store), {}, config, None, 0.0)
    with store.staged_output(str(tmp_path / "data"), "prepare-data", made_from=StageInputs()) as staged:
        write_prepared(staged, prepared)
    # The data's own benchmark (valid, from a benchmark source) is held out: evaluating it again names nothing.
    check = check_training_data(str(tmp_path / "data"), load_theorems(str(bench), store=store), store=store)
    assert check is not None and (check.training_theorems, check.overlaps) == (2, [])


@pytest.mark.slow  # real processes: the iterate runner's prepare-data stage, minilean replaying four proofs
def test_iterate_with_pipeline_benchmark_drops_both_before_training(tmp_path: Path) -> None:
    """The README's route: `iterate --set pipeline.benchmark=MyBench.lean`; its prepare-data stage (run alone)."""
    bench = restating_file(tmp_path)
    root = tmp_path / "run"
    env = {"BURNQED_PIPELINE__BENCHMARK": str(bench), "BURNQED_DATA__SOURCES": json.dumps(SOURCES),
           "BURNQED_CONFIG": None}
    done = cli("iterate", "--root", str(root), "--only", "prepare-data", "--jobs", "1", env=env,  # the stage prints
               process=True)
    assert done.returncode == 0, done.stderr
    assert ("decontamination: 2 training theorems dropped as restating a benchmark theorem (pipeline.benchmark: 2)\n"
            "  compared with: MyBench (pipeline.benchmark, 3 theorems)\n"
            "  algebra_2x_plus_3_eq_11 (bundled) = bench_bundled (MyBench, test)\n"
            "  world_algebra_97f80d (world) = bench_world (MyBench, test)\n") in done.stdout
    data = root / "iter_0" / "data"
    store = Store(cache_dir=tmp_path / "cache")
    assert [t.name for t in load_theorem_index(data / "theorems.json", store=store).theorems] == KEPT
    assert [(o.training, o.route) for o in read_report(str(data), store=store).overlaps] == [
        (BUNDLED[0], "pipeline.benchmark"), (WORLD[0], "pipeline.benchmark")]


@pytest.mark.slow  # a real eval: the tiny model on minilean, three theorems at budget 1
def test_eval_of_a_model_trained_without_the_benchmark_names_both(tiny_model_dir: Path, tmp_path: Path,
                                                                  store: Store) -> None:
    export = publish_chain(tmp_path, tiny_model_dir, store)
    out = tmp_path / "eval.json"
    done = cli("eval", "--model", export, "--theorems", str(restating_file(tmp_path)), "--budgets", "1",
               "--set", "lean.workers=1", "--output", str(out))
    assert done.returncode == 0, done.stderr
    data = f"file://{tmp_path / 'data'}"
    assert (f"warning: decontamination: 2 of the 4 training theorems of {data} (the model's training data) restate "
            "a theorem of this benchmark; prepare the data with the benchmark as pipeline.benchmark (or a benchmark "
            f"source) to drop them:\n  bench_bundled = {BUNDLED[0]} (bundled)\n  bench_world = {WORLD[0]} (world)\n"
            ) in done.stderr
    check = load_eval_result(out, store=store).training_check
    assert check is not None and check.data == data
    assert [(o.benchmark, o.training, o.route) for o in check.overlaps] == [
        ("bench_bundled", BUNDLED[0], "eval"), ("bench_world", WORLD[0], "eval")]


def test_a_search_index_that_restates_the_benchmark_stops_the_run_before_any_work(tmp_path: Path,
                                                                                  store: Store) -> None:
    """pipeline.search_theorems is searched as it is and SFT trains on what search proves there: a statement of the
    benchmark in it (up to renaming) is refused before any stage runs, naming the pair; a clean index passes."""
    from burnqed.config import load_config
    from burnqed.runner.checks import check_before_work

    bench = restating_file(tmp_path)
    searched = tmp_path / "Search.lean"
    searched.write_text("theorem mine_a (w : ℝ) (hw : 3 * w = 9) : w = 3 := by\n  sorry\n\n"
                        "theorem mine_b (n : ℕ) (h : n + 1 = 2) : n = 1 := by\n  sorry\n", encoding="utf-8")

    def check(*sets: str) -> None:
        check_before_work(load_config(sets=[f"pipeline.benchmark={bench}", *sets]), store)

    with pytest.raises(InputError) as caught:
        check(f"pipeline.search_theorems={searched}")
    assert str(caught.value) == (
        f"pipeline.search_theorems {searched}: 1 of its 2 theorems restate a theorem of the benchmark MyBench "
        "(mine_a restates bench_other); search would find their proofs and SFT train on them: remove them from the "
        "index, or leave pipeline.search_theorems unset (the prepared data, decontaminated)")
    searched.write_text("theorem mine_b (n : ℕ) (h : n + 1 = 2) : n = 1 := by\n  sorry\n", encoding="utf-8")
    check(f"pipeline.search_theorems={searched}")  # nothing restated: the run goes on
    with pytest.raises(InputError) as caught:
        check(f"pipeline.search_theorems={tmp_path / 'missing.json'}")
    assert str(caught.value) == f"pipeline.search_theorems: theorem index {tmp_path / 'missing.json'} does not exist"
