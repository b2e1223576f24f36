"""The run layout: the URI of every artifact of a run under its root (`{root}/iter_{i}/{stage}/`), as the runners
write them and the report reads them back, and the local runner's record of its stage times (`StageTimes`).

    at = Layout("s3://bucket/run")
    at.eval_result(2, with_ebm=False)        # "s3://bucket/run/iter_2/eval/eval-noebm.json"
    at.sft(1)                                # "s3://bucket/run/iter_1/sft"

`burnqed.runner.plan` builds the stages on it; the tree it describes: docs/pipeline.md, "Run root".
Pure: no I/O, nothing is contacted.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

INFLIGHT = "_inflight"  # in a hybrid search's trajectory prefix: its journal of half-searched theorems (search.journal)


def trajectories_beside(result: str) -> str:
    """Where an eval keeps its trajectories unless told otherwise: beside its result file, named after it
    (`R.json` → `R.trajectories`; a name without `.json` gets `.trajectories` added)."""
    stem = result[: -len(".json")] if result.endswith(".json") else result
    return f"{stem}.trajectories"


def subgoal_cache_beside(result: str) -> str:
    """The subgoal cache beside an output (`R.json` → `R.subgoal-cache`, `PREFIX` → `PREFIX.subgoal-cache`): where
    `burnqed search` keeps its own when `search.subgoal_cache` names none (docs/pipeline.md, "Subgoal cache")."""
    stem = result[: -len(".json")] if result.endswith(".json") else result
    return f"{stem}.subgoal-cache"


@dataclass(frozen=True, slots=True)
class Layout:
    """URIs of every artifact of a run (the tree: docs/pipeline.md, "Run root")."""

    root: str

    def iter_dir(self, i: int) -> str:
        return f"{self.root.rstrip('/')}/iter_{i}"

    def data(self) -> str:
        return f"{self.iter_dir(0)}/data"

    def sft(self, i: int) -> str:
        return f"{self.iter_dir(i)}/sft"

    def rl(self, i: int) -> str:
        """The GRPO stage's model folder (`burnqed rl`), when `rl.enabled`."""
        return f"{self.iter_dir(i)}/rl"

    def rl_trajectories(self, i: int) -> str:
        """The GRPO stage's rollouts as a whole-mode trajectory, inside its output (`rl.records.TRAJECTORIES`)."""
        return f"{self.rl(i)}/trajectories"

    def export(self, i: int) -> str:
        return f"{self.iter_dir(i)}/export"

    def ebm(self, i: int) -> str:
        return f"{self.iter_dir(i)}/ebm"

    def search_shard(self, i: int, shard: int | str, noise: bool = False) -> str:
        return f"{self.iter_dir(i)}/{'search-noise' if noise else 'search'}/shard-{shard}"

    def trajectories(self, i: int) -> str:
        return f"{self.iter_dir(i)}/trajectories"

    def experiment(self) -> str:
        """The run root's experiment: the base model, benchmark and settings its iterations share
        (`burnqed.runner.experiment`; docs/pipeline.md, "One root, one experiment")."""
        return f"{self.root.rstrip('/')}/experiment.json"

    def subgoal_cache(self) -> str:
        """The subgoal cache of the run's searches: every shard and iteration of the run shares it, each Lean
        environment in a folder of its own (`burnqed.search.subgoal_cache`; docs/pipeline.md, "Subgoal cache")."""
        return f"{self.root.rstrip('/')}/subgoal-cache"

    def eval_result(self, i: int, with_ebm: bool = True, mode: str | None = None) -> str:
        if mode is not None:
            return f"{self.iter_dir(i)}/eval/eval-{mode}.json"
        return f"{self.iter_dir(i)}/eval/{'eval' if with_ebm else 'eval-noebm'}.json"

    def eval_base(self) -> str:
        """The untrained base policy's eval result (iteration 0 only)."""
        return f"{self.iter_dir(0)}/eval-base/eval.json"

    def eval_trajectories(self, i: int, with_ebm: bool = True, mode: str | None = None) -> str:
        """The trajectories of the eval whose result is `eval_result(i, with_ebm, mode)`."""
        return trajectories_beside(self.eval_result(i, with_ebm, mode))

    def eval_base_trajectories(self) -> str:
        return trajectories_beside(self.eval_base())

    def stage_times(self, i: int) -> str:
        """The local runner's record of the wall and CPU time of iteration i's stage runs (`local.StageTimes`)."""
        return f"{self.iter_dir(i)}/stages.json"

    def start(self, i: int) -> str:
        """What iteration i ≥ 1 starts from (`burnqed start`, `eval.best_so_far.StartRecord`): the best policy and value
        model so far and whether search uses the value model."""
        return f"{self.iter_dir(i)}/start.json"

    def study(self, i: int, part: str) -> str:
        """An artifact of the joint study of iteration i (`burnqed.eval.joint_study`), e.g. 'a/export'."""
        return f"{self.iter_dir(i)}/study/{part}"

    def report(self, i: int) -> str:
        return f"{self.iter_dir(i)}/report"


class StageRun(BaseModel):
    """One run of one stage shard, as the local runner saw it end (`iter_i/stages.json`)."""

    model_config = ConfigDict(extra="forbid")

    stage: str = Field(description="The stage's name (`burnqed plan`).")
    shard: int | None = Field(description="The shard of a fanned-out stage; None for a stage that is not.")
    status: Literal["ran", "failed"] = Field(description="'ran': exit 0; 'failed': any other exit (143/130: stopped "
                                             "by a signal after saving its work).")
    exit_code: int = Field(description="The process's exit code.")
    started_at: AwareDatetime = Field(description="When the process started (UTC).")
    wall_s: float = Field(ge=0.0, description="Wall time from start to exit, seconds.")
    cpu_s: float | None = Field(description="User + system CPU seconds of the process and of the processes it waited "
                                "for (its Lean workers, its threads); None when the runner could not read them.")

    @property
    def finished_at(self) -> datetime:
        return self.started_at + timedelta(seconds=self.wall_s)


class StageTimes(BaseModel):
    """`iter_i/stages.json`: every stage run of iteration i that the local runner saw end, in the order they ended,
    over every `iterate` of that iteration (a stage stopped and resumed has one run per attempt). The cluster's
    runner is Argo, which records its own step times; it writes no such file."""

    model_config = ConfigDict(extra="forbid")

    iteration: int = Field(ge=0, description="The iteration.")
    runs: list[StageRun] = Field(default_factory=list, description="The runs, in the order they ended.")
