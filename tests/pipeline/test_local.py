"""local.py: stages run as `burnqed` subprocesses in order; finished ones are skipped; a failure stops the
iteration; the user's overrides reach children as env vars that a stage's own --set beats."""

from __future__ import annotations

from pathlib import Path

import pytest

from burnqed.errors import ConfigError
from burnqed.local import LocalRunner, StageStatus, env_for, require_earlier
from burnqed.pipeline import Iteration, Resource, Stage
from burnqed.storage import Store


def test_env_for_turns_sets_into_env_vars(tmp_path: Path) -> None:
    cfg = tmp_path / "b.toml"
    env = env_for(["lean.workers=2", "policy.model=s3://b/m"], cfg, {"PATH": "/bin"})
    assert env == {"PATH": "/bin", "BURNQED_CONFIG": str(cfg.resolve()), "BURNQED_LEAN__WORKERS": "2",
                   "BURNQED_POLICY__MODEL": "s3://b/m"}
    with pytest.raises(ConfigError, match=r"expected section\.key=value"):
        env_for(["workers"], None, {})


def _report_stage(name: str, root: str, out: str, after: tuple[str, ...] = ()) -> Stage:
    return Stage(name=name, summary=f"write {name}", argv=("report", "--root", root, "--iter", "0", "--output", out),
                 outputs=(out,), inputs=(), resource=Resource.CPU, after=after)


@pytest.mark.slow
def test_runner_runs_in_order_skips_finished_and_stops_at_a_failure(tmp_path: Path, store: Store) -> None:
    from burnqed.layout import Layout
    from tests.eval.test_report import publish

    root = f"file://{tmp_path}/run"
    publish(Layout(root).eval_result(0), {"hand_0"}, store=store)  # report refuses a root without an eval
    first = _report_stage("first", root, f"{root}/a")
    failing = Stage(name="broken", summary="fails", argv=("compare", str(tmp_path / "only-one.json")),
                    outputs=(f"{root}/never.json",), inputs=(), resource=Resource.CPU, after=("first",))
    last = _report_stage("last", root, f"{root}/b", after=("broken",))
    iteration = Iteration(index=0, root=root, stages=(first, failing, last))
    lines: list[str] = []
    runner = LocalRunner(echo=lines.append, store=store)
    outcome = runner.run(iteration)
    assert [(r.stage, r.status) for r in outcome.runs] == [("first", StageStatus.RAN), ("broken", StageStatus.FAILED)]
    assert outcome.failed is not None and outcome.failed.exit_code == 2
    assert store.is_done(f"{root}/a") and not store.is_done(f"{root}/b")
    assert [stage.name for stage, _ in runner.pending(iteration)] == ["broken", "last"]
    # re-run with the broken stage fixed (dropped): the finished stage is skipped, the rest runs
    fixed = Iteration(index=0, root=root, stages=(first, _report_stage("last", root, f"{root}/b")))
    again = runner.run(fixed)
    assert [(r.stage, r.status) for r in again.runs] == [("first", StageStatus.SKIPPED), ("last", StageStatus.RAN)]
    assert runner.run(fixed).ran == []
    assert any("done already, skipped" in line for line in lines)


def test_only_unknown_stage_and_earlier_iterations(store: Store) -> None:
    iteration = Iteration(index=2, root="file:///r", stages=())
    with pytest.raises(ConfigError, match="unknown stage"):
        LocalRunner(store=store).run(iteration, only=["sft"])
    with pytest.raises(ConfigError, match="iteration 1 has not finished"):
        require_earlier(iteration, lambda j: j == 0)
    require_earlier(iteration, lambda j: True)
