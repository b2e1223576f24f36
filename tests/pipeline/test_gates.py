"""`burnqed run-all` when a go/no-go gate fails: it stops, says which gate, and exits 3 (not 0)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from burnqed import storage
from burnqed.config import Config, load_config
from burnqed.data.index import bundled_index_path
from burnqed.report.document import Report
from burnqed.report.tables import Gate
from burnqed.runner.plan import build_iteration
from burnqed.storage import Store
from tests.processes import cli


def finished_iteration(root: str, go: bool, *, store: Store, measured: bool = True) -> None:
    """Iteration 0 under `root` with every stage published (markers, a theorem index, and eval results that solve
    nothing, recording the inputs the evals would record) and a report whose gate says `go` (`measured`: whether it
    could be measured)."""
    from burnqed.eval.result import load_eval_result, write_eval_result
    from burnqed.runner.request_inputs import made_from
    from tests.eval.test_report import publish

    cfg = Config()
    iteration = build_iteration(cfg.pipeline, root, 0, base_model=cfg.sft.base_model)
    for stage in iteration.stages:
        for uri in stage.all_outputs():
            if uri.endswith(".json"):
                request = stage.request_for(0)
                [(_, made)] = made_from(request, load_config(sets=request.config_sets()), store) or []
                publish(uri, set(), store=store)
                result = load_eval_result(uri, store=store).model_copy(update={"made_from": made})
                write_eval_result(result, uri, store=store)
            else:
                store.write_bytes(storage.join(uri, storage.MARKER_NAME), b"{}")
    # what the search stages read their theorems from
    store.write_bytes(storage.join(iteration.stage("prepare-data").outputs[0], "theorems.json"),
                      bundled_index_path().read_bytes())
    report = Report(root=root, iteration=0, rows=[], iterations=[],
                    gates=[Gate(name="baseline", passed=go, blocking=True, detail="base solves 1.0%",
                                measured=measured)])
    store.write_bytes(storage.join(iteration.stage("report").outputs[0], "report.json"),
                        report.model_dump_json().encode())


def run_all(root: str, *args: str) -> subprocess.CompletedProcess[str]:
    return cli("run-all", "--root", root, *args)


@pytest.mark.slow
def test_run_all_exits_3_when_a_gate_stops_it(tmp_path: Path, store: Store) -> None:
    root = storage.normalize(str(tmp_path / "runs"))
    finished_iteration(root, go=False, store=store)
    done = run_all(root, "--iters", "0-1")
    assert done.returncode == 3, done.stderr
    assert "STOP baseline: base solves 1.0%" in done.stdout
    assert "stopping after iteration 0: a go/no-go gate of iteration 0 failed" in done.stderr
    assert not (tmp_path / "runs" / "iter_1").exists()  # iteration 1 never started


@pytest.mark.slow
def test_run_all_exits_0_when_the_gates_pass_and_ignores_them_with_no_gates(tmp_path: Path, store: Store) -> None:
    root = storage.normalize(str(tmp_path / "runs"))
    finished_iteration(root, go=True, store=store)
    done = run_all(root, "--iters", "0")
    assert done.returncode == 0, done.stderr
    assert "PASS baseline" in done.stdout and "nothing to do" in done.stdout
    finished_iteration(root, go=False, store=store)
    assert run_all(root, "--iters", "0", "--no-gates").returncode == 0
    assert run_all(root, "--iters", "0").returncode == 3  # the last iteration's failed gate is a no-go too


@pytest.mark.slow  # one in-process run-all, refused before any stage
def test_run_all_refuses_a_gap_in_its_iterations_before_running_any(tmp_path: Path, store: Store) -> None:
    """The audit's case: `run-all --iters 0,2` ran all of iteration 0 and only then failed on iteration 1, which
    neither was finished nor was to run."""
    root = storage.normalize(str(tmp_path / "runs"))
    finished_iteration(root, go=True, store=store)
    done = run_all(root, "--iters", "0,2")
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr.splitlines() == [f"error: iteration 1 has not finished under {root}: run `burnqed iterate "
                                        f"--iter 1 --root {root}` first"]
    assert not (tmp_path / "runs" / "iter_2").exists()


@pytest.mark.parametrize(("iters", "why"), [
    ("0-99999999999", "100,000,000,000 iterations; one run-all runs at most 1,000 (e.g. 0-4)"),
    ("0-1000", "1,001 iterations; one run-all runs at most 1,000"),
    ("2147483647-2147483648", "2147483648 is past the last iteration a trajectory can record, 2,147,483,647"),
    ("0,99999999999", "99999999999 is past the last iteration"),
])
def test_run_all_refuses_absurd_iterations_in_one_line(iters: str, why: str, tmp_path: Path) -> None:
    """`run-all --iters 0-99999999999` built the whole range first and died of a MemoryError traceback."""
    done = run_all(str(tmp_path / "runs"), "--iters", iters)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr.startswith(f"error: --iters {iters!r}: {why}") and done.stderr.count("\n") == 1, done.stderr
    assert not (tmp_path / "runs").exists()
