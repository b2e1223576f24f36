"""`burnqed data prepare | report | trace` as a user runs them: the embedded defaults end to end (the command line
app in this process, tests/processes.py `cli`; replay Lean workers), the idempotent re-run and --force, an s3://
output, a hub dataset that cannot be reached, and tracing without LeanDojo or a Lean toolchain."""

from __future__ import annotations

import json
import sys
import types
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from burnqed.config import SourceSpec
from burnqed.config.data import KindRenamed
from burnqed.data.data_report import read_report
from burnqed.data.index import load_theorem_index
from burnqed.data.pairs import read_contrastive, read_pairs
from burnqed.data.trace import require_tracing
from burnqed.errors import InputError
from burnqed.storage import StageMarker, Store
from tests.data.samples import write_all_sources
from tests.processes import cli

# What the commands make of Lean's replies is the subject, not the worker's process: minilean answers in this
# process (tests/conftest.py `minilean_in_process`).
pytestmark = pytest.mark.usefixtures("minilean_in_process")


@pytest.mark.slow
def test_prepare_on_the_embedded_defaults_then_the_idempotent_rerun(tmp_path: Path, store: Store) -> None:
    out = tmp_path / "iter_0" / "data"
    done = cli("data", "prepare", "--output", str(out))
    assert done.returncode == 0, done.stderr
    # The bundled corpus' 36 train theorems, the checked world's 140 train theorems (2 traps) and 49 pool statements,
    # replayed on minilean (the default Lean; the replay server is its fallback for statements outside its fragment).
    assert "prepared data · 225 theorems · 856 pairs" in done.stdout and f"wrote {out}" in done.stdout
    assert "replaying proofs: 174/174" in done.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        "_SUCCESS.json", "contrastive.json", "pairs.parquet", "report.json", "theorems.json"]
    pairs = read_pairs(out)
    assert len(pairs) == 856 and Counter(p.source for p in pairs) == {"bundled": 192, "world": 664}
    # Theorems start as written: `x` is in context, the first step introduces the hypothesis alone.
    assert pairs[0].state_before == "x : ℝ\n⊢ 2 * x + 3 = 11 → x = 4" and pairs[0].tactic == "intro h₀"
    index = load_theorem_index(out / "theorems.json", store=store)
    assert Counter(t.split for t in index.theorems) == {"train": 159, "pool": 49, "valid": 17}
    assert len(read_contrastive(out).theorems) == 119  # proofs of ≥ 3 tactics from the binder-form start
    report = read_report(str(out), store=store)
    assert report.lean_command is not None and report.lean_command[1:3] == ["-m", "minilean"]
    # 112 of the 116 bundled proofs replay (4 use what minilean lacks: field_simp, gcongr, Set.mem_setOf_eq); all
    # 192 world proofs do.
    assert [s.proofs_replayed for s in report.sources] == [112, 192] and report.depth_histogram[2] == 90
    marker = json.loads((out / "_SUCCESS.json").read_text(encoding="utf-8"))
    assert marker["stage"] == "prepare-data" and marker["extra"]["pairs"] == 856

    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    again = cli("data", "prepare", "--output", str(out))
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[0].startswith(f"reusing {out} (finished ")
    assert again.stdout.splitlines()[0].endswith(", same inputs); --force redoes it")
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before

    shown = cli("data", "report", str(out))
    assert shown.returncode == 0 and "0 bundled" in shown.stdout and "contrastive pool" in shown.stdout
    as_json = cli("data", "report", str(out), "--json")
    assert json.loads(as_json.stdout)["pairs"] == 856


@pytest.mark.slow
def test_force_redoes_and_the_sources_come_from_the_config(tmp_path: Path, store: Store) -> None:
    files = write_all_sources(tmp_path / "sources")
    config = tmp_path / "data.toml"
    config.write_text(
        "[data]\nvalid_fraction = 0.0\n"
        f"[[data.sources]]\nkind = \"lean-github\"\npath = \"{files['lean-github']}\"\n"
        f"[[data.sources]]\nkind = \"numina-lean\"\nname = \"numina\"\npath = \"{files['numina-lean']}\"\n",
        encoding="utf-8",
    )
    out = tmp_path / "data"
    out.mkdir()
    finished = StageMarker(stage="prepare-data", written_at=datetime(2026, 1, 1, tzinfo=UTC))  # a finished output
    (out / "_SUCCESS.json").write_text(finished.model_dump_json(), encoding="utf-8")
    result = cli("data", "prepare", "--output", str(out), "--config", str(config), "--force")
    assert result.returncode == 0, result.stderr
    report = read_report(str(out), store=store)
    # numina's statement is in minilean's fragment (the embedded default Lean): it starts, but `rw [h2, Nat.mul_mod,
    # h]` leaves `1 * 1 % 2 = 1` (minilean's rw closes only syntactically equal sides, stricter than Lean's rfl
    # after rw: docs/minilean.md), so its proof fails, loudly, and gives no pairs
    assert [(s.name, s.pairs, s.replay_failed) for s in report.sources] == [("lean-github", 2, 0), ("numina", 0, 1)]
    assert report.sources[1].replay_failures[0].error == "1 goal(s) remain after the last tactic"
    assert report.warnings == ["source 1 (numina): no pairs; 1 of 1 proofs failed to replay (first: number_theory_1: "
                               + report.sources[1].replay_failures[0].error + ")"]
    assert "warning: source 1 (numina): no pairs" in result.stdout
    assert {s.split for s in read_pairs(out)} == {"train"}


@pytest.mark.slow
def test_prepare_reads_from_and_writes_to_s3(s3_root: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             store: Store) -> None:
    monkeypatch.setenv("BURNQED_HOME", str(tmp_path / "home"))  # the download cache of s3:// inputs
    files = write_all_sources(tmp_path / "sources")
    source = f"{s3_root}/sources/pairs.jsonl"
    store.write_bytes(source, files["pairs"].read_bytes())
    uri = f"{s3_root}/iter_0/data"
    sources = json.dumps([{"kind": "bundled", "limit": 3}, {"kind": "pairs", "path": source}])
    first = cli("data", "prepare", "--output", uri, "--set", f"data.sources={sources}")
    assert first.returncode == 0, first.stderr
    report = read_report(uri, store=store)
    # 22 distinct (state, tactic) steps in the proofs of the first three bundled theorems from their binder-form
    # start, 2 recorded pairs
    assert (report.theorems, report.pairs) == (5, 24)
    assert report.sources[1].path == source
    assert len(list((tmp_path / "home" / "cache").glob("*/pairs.jsonl"))) == 1
    again = cli("data", "prepare", "--output", uri, "--set", f"data.sources={sources}")
    assert again.returncode == 0 and again.stdout.startswith(f"reusing {uri} (finished ")
    other = cli("data", "prepare", "--output", uri)  # the default sources: not what it was made from
    assert other.returncode == 2 and other.stderr == (
        f"error: {uri} is a finished prepared-data output made with other inputs: data.sources[1] was {source}, now "
        "not given; --force redoes it, or choose another --output\n")


@pytest.mark.slow
def test_prepare_writes_to_s3_the_bytes_it_writes_to_a_local_folder(s3_root: str, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     store: Store) -> None:
    monkeypatch.setenv("BURNQED_HOME", str(tmp_path / "home"))
    files = write_all_sources(tmp_path / "sources")
    sources = json.dumps([{"kind": "bundled", "limit": 3}, {"kind": "pairs", "path": str(files["pairs"])}])
    uri, local = f"{s3_root}/iter_0/data", tmp_path / "data"
    for output in (uri, str(local)):
        done = cli("data", "prepare", "--output", output, "--set", f"data.sources={sources}")
        assert done.returncode == 0, done.stderr
    names = sorted(path.name for path in local.iterdir())
    assert sorted(store.output_files(uri)) == names and "pairs.parquet" in names
    for name in set(names) - {"_SUCCESS.json", "report.json"}:  # those two record when (and how fast) it ran
        assert store.read_bytes(f"{uri}/{name}") == (local / name).read_bytes(), name
    when = {"created_at", "elapsed_s"}
    remote, here = (json.loads(text) for text in (store.read_bytes(f"{uri}/report.json"), (local / "report.json")
                                                  .read_bytes()))
    assert {k: v for k, v in remote.items() if k not in when} == {k: v for k, v in here.items() if k not in when}


@pytest.mark.slow
def test_a_hub_dataset_that_cannot_be_reached_is_one_clear_error(tmp_path: Path) -> None:
    out = tmp_path / "data"
    done = cli("data", "prepare", "--output", str(out), "--set",
               'data.sources=[{"kind": "lean-workbook", "path": "internlm/Lean-Workbook"}]',
               env={"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")},
               process=True)  # huggingface_hub reads HF_HUB_OFFLINE once, at import: a fresh process
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "error: data source internlm/Lean-Workbook could not be loaded from the Hugging Face hub (")
    assert "the hub may be unreachable from here: download its files" in lines[0]
    assert "set the source's `path` to the local file or folder" in lines[0]
    assert not out.exists()


def test_bad_input_exits_2_with_nothing_written(tmp_path: Path) -> None:
    out = tmp_path / "data"
    result = cli("data", "prepare", "--output", str(out), "--set",
                 f'data.sources=[{{"kind": "benchmark", "path": "{tmp_path / "missing.jsonl"}"}}]')
    assert result.returncode == 2
    assert f"error: data source {tmp_path / 'missing.jsonl'} does not exist" in result.stderr
    assert not out.exists()
    unknown = cli("data", "prepare", "--output", str(out), "--set",
                  'data.sources=[{"kind": "lean3"}]')
    assert unknown.returncode == 2 and "data.sources.0.kind" in unknown.stderr
    none = cli("data", "prepare", "--output", str(out), "--set", "data.sources=[]")
    assert (none.returncode, none.stderr) == (2, "error: data.sources is empty: give a source (--source KIND=PATH, or "
                                             "data.sources), or leave data.sources unset for its default (the bundled "
                                             "corpus and the generated world)\n")
    assert not out.exists()


def test_trace_without_lean_dojo_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "lean_dojo", None)  # `import lean_dojo` raises ImportError
    result = cli("data", "trace", "--repo", "https://github.com/x/y", "--commit", "abc",
                 "--output", str(tmp_path / "t"))
    assert result.returncode == 2
    assert "needs LeanDojo, which is not installed: pip install 'burnqed[trace]'" in result.stderr
    assert not (tmp_path / "t").exists()


def test_trace_without_a_lean_toolchain_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "lean_dojo", types.ModuleType("lean_dojo"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(InputError, match=r"needs a Lean toolchain: neither `lake` nor `elan` is on PATH"):
        require_tracing()
    (tmp_path / "lake").write_text("#!/bin/sh\n", encoding="utf-8")
    (tmp_path / "lake").chmod(0o755)
    assert require_tracing() is sys.modules["lean_dojo"]


@pytest.mark.slow
def test_lean_starts_only_when_proofs_need_replaying(tmp_path: Path) -> None:
    files = write_all_sources(tmp_path / "sources")
    broken = ["--set", 'lean.command=["/nonexistent/repl"]']
    traced = cli("data", "prepare", "--output", str(tmp_path / "traced"), *broken, "--set",
                 f'data.sources=[{{"kind": "lean-github", "path": "{files["lean-github"]}"}}]')
    assert traced.returncode == 0, traced.stderr
    assert "lean: not started" in traced.stdout
    replayed = cli("data", "prepare", "--output", str(tmp_path / "replayed"), *broken)
    assert replayed.returncode == 1
    assert replayed.stderr.splitlines()[-1] == (
        "error: cannot run `/nonexistent/repl --version` to learn the Pantograph version: [Errno 2] No such file "
        "or directory: '/nonexistent/repl'. Check lean.command and lean.cwd.")
    assert not (tmp_path / "replayed").exists()


def test_source_is_the_data_sources_it_equals() -> None:
    from burnqed.commands.data import source_kinds, sources_set

    assert sources_set(None, ["data.valid_fraction=0.1"]) == ["data.valid_fraction=0.1"]
    assert sources_set(["benchmark=MiniF2F/Test.lean", "bundled", "pairs=a=b.jsonl"], None) == [
        'data.sources=[{"kind": "benchmark", "path": "MiniF2F/Test.lean"}, {"kind": "bundled"}, '
        '{"kind": "pairs", "path": "a=b.jsonl"}]']
    assert source_kinds() == ("bundled", "world", "lean-workbook", "goedel-pset", "goedel-proofs", "lean-github",
                              "numina-lean", "benchmark", "pairs")
    with pytest.raises(InputError) as caught:
        sources_set(["benchmark="], None)
    assert str(caught.value) == ("--source 'benchmark=': the path after = is empty; give KIND=PATH, or KIND alone for "
                                 "the kinds that have a default (bundled, world)")


@pytest.mark.slow  # a preparation in this process
def test_source_prepares_a_benchmark_and_a_kind_that_is_none_is_one_line(tmp_path: Path) -> None:
    bench = Path(__file__).resolve().parents[1] / "fixtures" / "benchmark" / "MyBench.lean"
    out = tmp_path / "bench"
    done = cli("data", "prepare", "--source", f"benchmark={bench}", "--output", str(out))
    assert done.returncode == 0, done.stderr
    index = load_theorem_index(out / "theorems.json", store=Store(cache_dir=tmp_path / "cache"))
    assert [t.name for t in index.theorems] == ["my_2023_div_7", "my_gcd_12_18", "my_two_x_le_sq_plus_one",
                                                "my_demorgan_not_or"]
    refused = cli("data", "prepare", "--source", "minif2ff=x.lean", "--output", str(tmp_path / "b"))
    assert refused.returncode == 2
    assert refused.stderr.splitlines() == [
        "error: --source 'minif2ff=x.lean': 'minif2ff' is not a kind of source; give KIND=PATH with KIND one of "
        "bundled, world, lean-workbook, goedel-pset, goedel-proofs, lean-github, numina-lean, benchmark, pairs "
        "(`burnqed config describe data.sources` says what each reads)"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench"]


def test_the_old_kind_name_is_read_as_benchmark_with_the_rename_warning(tmp_path: Path) -> None:
    """`minif2f`, the benchmark kind's old name, still works: one deprecation line (as renamed options print it),
    then the same as `benchmark`. A refused output is enough to see it: the configuration is read first."""
    (tmp_path / "out").write_text("a file where the output folder goes", encoding="utf-8")
    done = cli("data", "prepare", "--source", "minif2f=x.lean", "--set",
               'data.sources=[{"kind": "minif2f", "path": "y.lean"}]', "--output",
               str(tmp_path / "out"))
    lines = done.stderr.splitlines()
    assert lines[0] == "warning: source kind minif2f is now benchmark; the old spelling goes in the next release"
    assert sum("minif2f" in line for line in lines) == 1 and done.returncode == 2
    with pytest.warns(KindRenamed):
        assert SourceSpec(kind="minif2f", path="x.lean").kind == "benchmark"
