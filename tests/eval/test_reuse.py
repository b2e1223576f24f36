"""`burnqed eval` and `burnqed report` run again into a finished output, by the command line app in this process
(tests/processes.py `burnqed_in_process`: the exit code, stdout and stderr a process gives): made with the same
inputs it is reused, saying so on the first line; made with other inputs (theorems, budgets, model,
settings, an eval redone since) it is refused in one line naming the difference and --force, exit 2, the output
untouched; --force redoes it (docs/pipeline.md, "Reused or refused")."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from burnqed.data.index import bundled_index_path, load_local_theorem_index
from burnqed.eval.result import load_eval_result
from burnqed.layout import Layout
from burnqed.provenance import when
from burnqed.records.theorem import TheoremIndex
from burnqed.storage import Store
from tests.eval.test_report import publish
from tests.processes import burnqed_in_process as burnqed

# Every test runs `burnqed` a few times, the first eval loads torch and the model; what the commands decide is the
# subject, not the Lean worker's process: minilean answers in this process (tests/conftest.py `minilean_in_process`).
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("minilean_in_process")]


def _index(path: Path, count: int) -> Path:
    full = load_local_theorem_index(bundled_index_path("test"))
    path.write_text(TheoremIndex(name="bench", theorems=full.theorems[:count]).model_dump_json(), encoding="utf-8")
    return path


def test_eval_reuses_the_same_eval_refuses_another_and_force_redoes_it(tiny_model_dir: Path, tmp_path: Path,
                                                                      store: Store) -> None:
    out, bench = tmp_path / "r.json", _index(tmp_path / "bench.json", 2)
    common = ["eval", "--theorems", str(bench), "--output", str(out), "--set", "lean.workers=1"]
    model = ["--set", f"policy.model={tiny_model_dir}"]
    first = burnqed(*common, *model, "--budgets", "2")
    assert first.returncode == 0, first.stderr
    result = load_eval_result(out, store=store)
    assert result.made_from is not None and result.made_from.settings["--budgets"] == [2]
    written = out.read_bytes()

    same = burnqed(*common, *model, "--budgets", "2")
    assert same.returncode == 0, same.stderr
    lines = same.stdout.splitlines()
    assert lines[0] == f"reusing {out} (finished {when(result.timestamp)}, same inputs); --force redoes it"
    assert "bench" in lines[1]  # then its table, as when it was written

    def refused(*args: str) -> str:
        done = burnqed(*common, *args)
        assert done.returncode == 2 and done.stdout == "", done.stderr
        assert out.read_bytes() == written
        [line] = done.stderr.splitlines()
        prefix = f"error: {out} is a finished eval result made with other inputs: "
        suffix = "; --force redoes it, or choose another --output"
        assert line.startswith(prefix) and line.endswith(suffix), line
        return line.removeprefix(prefix).removesuffix(suffix)

    assert refused(*model, "--budgets", "3") == "--budgets was [2], now [3]"
    assert refused(*model, "--budgets", "2", "--set", "policy.top_p=0.9") == "policy.top_p was 0.95, now 0.9"
    assert refused(*model, "--budgets", "2", "--set", "search.revisits=3") == "search.revisits was 16, now 3"
    other_model = tmp_path / "other-model"
    shutil.copytree(tiny_model_dir, other_model)
    assert refused("--set", f"policy.model={other_model}", "--budgets", "2") == (
        f"model was file://{tiny_model_dir}, now file://{other_model}")
    _index(bench, 3)  # the benchmark file now holds another theorem set
    assert refused(*model, "--budgets", "2") == "theorems was 2, now 3"

    forced = burnqed(*common, *model, "--budgets", "3", "--force")
    assert forced.returncode == 0, forced.stderr
    redone = load_eval_result(out, store=store)
    assert [row.budget for row in redone.budgets] == [3] and redone.total == 3
    assert redone.made_from is not None and redone.made_from.settings["theorems"] == 3


def test_an_eval_result_of_an_older_burnqed_is_compared_on_the_settings_it_records(tmp_path: Path,
                                                                                  store: Store) -> None:
    out = tmp_path / "r.json"
    publish(str(out), {"world_0"}, store=store)  # 10 theorems of embedded-test at budgets 10, 50 on the replay server
    older = load_eval_result(out, store=store)
    assert older.made_from is None  # written as an older burnqed wrote it
    full = load_local_theorem_index(bundled_index_path())
    bench = tmp_path / "embedded-test.json"  # a benchmark of that name and size
    bench.write_text(TheoremIndex(name="embedded-test", theorems=full.theorems[:10]).model_dump_json(),
                     encoding="utf-8")
    replay = ["--set", "lean.command=" + json.dumps(["python", "-m", "minilean.replay"])]
    common = ["eval", "--theorems", str(bench), "--output", str(out), *replay]
    refused = burnqed(*common, "--budgets", "10,60")
    assert refused.returncode == 2 and refused.stderr == (
        f"error: {out} is a finished eval result made with other inputs: --budgets was [10, 50], now [10, 60]; "
        "--force redoes it, or choose another --output\n")
    same = burnqed(*common, "--budgets", "10,50")
    assert same.returncode == 0, same.stderr
    assert same.stdout.splitlines()[0] == (
        f"reusing {out} (finished {when(older.timestamp)}, made by an older burnqed: compared on the settings it "
        "records, not on its inputs' content); --force redoes it")
    embedded = burnqed("eval", "--output", str(out), "--budgets", "10,50", *replay)
    assert embedded.returncode == 2 and "theorems was 10, now 71;" in embedded.stderr  # the embedded benchmark


def test_report_reuses_the_same_report_refuses_one_made_from_other_outputs_and_force_redoes_it(
    tmp_path: Path, store: Store
) -> None:
    root, out = tmp_path / "run", tmp_path / "run" / "iter_0" / "report"
    at = Layout(f"file://{root}")
    publish(at.eval_result(0), {"world_0"}, store=store)
    args = ["report", "--root", str(root), "--iter", "0", "--output", str(out)]
    first = burnqed(*args)
    assert first.returncode == 0, first.stderr
    report_md = (out / "report.md").read_text(encoding="utf-8")
    marker = json.loads((out / "_SUCCESS.json").read_text(encoding="utf-8"))
    finished = store.read_marker(str(out))
    assert finished is not None
    same = burnqed(*args)
    assert same.returncode == 0, same.stderr
    # reused: the same lines as the run that wrote it (the report's path and headline), after the reuse line
    assert same.stdout == f"reusing {out} (finished {when(finished.written_at)}, same inputs); --force redoes it\n" + (
        first.stdout)
    assert first.stdout.startswith(f"report: {out}/report.md\n") and "Decision: **go**" in report_md
    gate = burnqed(*args, "--set", "pipeline.gate_min_rate=0.3")
    assert gate.returncode == 2 and gate.stderr == (
        f"error: {out} is a finished report made with other inputs: pipeline.gate_min_rate was 0.05, now 0.3; --force "
        "redoes it, or choose another --output\n")
    publish(at.eval_result(0), {"world_0", "world_1"}, store=store)  # the eval redone since: another result
    redone_eval = burnqed(*args)
    assert redone_eval.returncode == 2
    assert f"iter_0 eval file://{root}/iter_0/eval/eval.json was made again since (it was finished " in (
        redone_eval.stderr)
    assert json.loads((out / "_SUCCESS.json").read_text(encoding="utf-8")) == marker  # untouched
    forced = burnqed(*args, "--force")
    assert forced.returncode == 0, forced.stderr
    assert "2/10" in (out / "report.md").read_text(encoding="utf-8")  # the new eval's figures
    assert burnqed(*args).stdout.startswith(f"reusing {out} (finished ")
