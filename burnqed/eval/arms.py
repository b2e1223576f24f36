"""One `burnqed eval`, both arms: what it was asked (`EvalRequest`: the arm with the value model and, with
`--ablation`, the arm without it), its checks before any work (`check_eval_request`, `check_resumable`), its arms
run one after the other (`eval_arms`, each `eval.run.eval_job`) and their results written and shown
(`publish_eval`, `render_finished`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from burnqed.errors import InputError
from burnqed.eval.identity import EvalIdentity, EvalJobSettings, evaluable
from burnqed.eval.judging import alarm_lines, judge_line
from burnqed.eval.rendering import render_eval_table
from burnqed.eval.result import EvalResult, load_eval_result, write_eval_result
from burnqed.eval.resume import pass_prefix, resume_state
from burnqed.eval.run import eval_job, needs_real_lean_line
from burnqed.layout import trajectories_beside
from burnqed.lean.env import WorkerPool
from burnqed.policy.base import Policy
from burnqed.provenance import StageInputs
from burnqed.records.theorem import TheoremIndex
from burnqed.search.value import ValueFn
from burnqed.storage import Store

# ---------------------------------------------------------------------------------- one `burnqed eval`, both arms


def ablation_output(output: str) -> str:
    """Where an ablation writes its arm without the value model: `OUTPUT-noebm.EXT` beside `OUTPUT` (a name
    without an extension gets `-noebm.json`)."""
    stem, dot, suffix = output.rpartition(".") if output.rpartition("/")[2].count(".") else (output, "", "")
    return f"{stem}-noebm.{suffix}" if dot else f"{output}-noebm.json"


@dataclass(frozen=True, slots=True)
class EvalArm:
    """One search of the benchmark within an eval: its result file, its trajectory prefix and its value model."""

    output: str
    trajectories: str | None
    ebm: str | None


@dataclass(frozen=True, slots=True)
class EvalRequest:
    """What one `burnqed eval` was asked: its result file and the arms it runs. Without `ablation` one arm (with
    the value model `ebm`, if any); with it a second arm without the value model, written to
    `ablation_output(output)`. Each arm keeps its trajectories: under `trajectories` (the second arm's under
    `TRAJECTORIES-noebm`), else beside its result file (`layout.trajectories_beside`: `R.json` → `R.trajectories`),
    unless `keep_trajectories` is off."""

    output: str
    pass_n: int = 1
    iteration: int = 0
    ebm: str | None = None
    ablation: bool = False
    trajectories: str | None = None
    resume: bool = False
    keep_trajectories: bool = True

    def arms(self) -> list[EvalArm]:
        """The arms in the order they run: the one with the value model first."""
        arms = [EvalArm(self.output, self._prefix(self.output, self.trajectories), self.ebm)]
        if self.ablation:
            given = f"{self.trajectories.rstrip('/')}-noebm" if self.trajectories is not None else None
            arms.append(EvalArm(ablation_output(self.output), self._prefix(ablation_output(self.output), given), None))
        return arms

    def _prefix(self, output: str, given: str | None) -> str | None:
        if given is not None or not self.keep_trajectories:
            return given
        return trajectories_beside(output)

    @property
    def outputs(self) -> list[str]:
        """The result files, one per arm."""
        return [arm.output for arm in self.arms()]

    @property
    def prefixes(self) -> list[str]:
        """The trajectory prefixes, one per arm (none with `keep_trajectories` off and no `trajectories`)."""
        return [arm.trajectories for arm in self.arms() if arm.trajectories is not None]


def check_eval_request(request: EvalRequest, *, store: Store) -> None:
    """Refuse, before anything starts, an ablation without a value model, a resume without trajectories and
    result files that cannot be written or that exist and are not eval results (`InputError`, `ConfigError`)."""
    if request.ablation and request.ebm is None:
        raise InputError("--ablation compares the search with and without a value model: give --ebm too")
    if request.trajectories is not None and not request.keep_trajectories:
        raise InputError("--no-trajectories-out and --trajectories-out contradict each other: give one of them")
    if request.resume and not request.prefixes:
        raise InputError("--resume continues an eval from its trajectories, which --no-trajectories-out does not keep: "
                         "drop --no-trajectories-out")
    for uri in request.outputs:
        store.check_writable(uri)
        store.check_replaceable_file(uri, EvalResult, "an eval result")


def finished_eval(request: EvalRequest, *, store: Store) -> list[EvalResult] | None:
    """The results of every arm when all of them exist already (a finished eval is not redone), else None."""
    if not all(store.exists(uri) for uri in request.outputs):
        return None
    return [load_eval_result(uri, store=store) for uri in request.outputs]


def check_resumable(request: EvalRequest, index: TheoremIndex, settings: EvalJobSettings, *, store: Store,
                    restart: bool = False) -> None:
    """Check every pass prefix of every arm (writable; resumable by this eval, `resume_state`) before the first
    search starts, so that a refusal of the second arm costs nothing either. With `restart` (`eval --force`) the
    command starts the prefixes over instead (`outputs.restart_trajectory_prefix`): only writable is checked."""
    index = evaluable(index, settings.job.mode)
    for arm in request.arms():
        if arm.trajectories is None:
            continue
        store.check_writable(arm.trajectories, what="--trajectories-out", folder=True)
        if restart:
            continue
        identity = EvalIdentity.of(index, settings, pass_n=request.pass_n, iteration=request.iteration, ebm=arm.ebm)
        for k in range(request.pass_n):
            resume_state(pass_prefix(arm.trajectories, request.pass_n, k), index.theorems, list(settings.budgets),
                         str(settings.job.mode), request.iteration, request.resume, store=store, identity=identity)


async def eval_arms(
    request: EvalRequest,
    index: TheoremIndex,
    settings: EvalJobSettings,
    *,
    pool: WorkerPool,
    pool_size: int,
    policy: Policy,
    value: ValueFn | None,
    pantograph_version: str | None = None,
    planner: Policy | None = None,
    store: Store,
) -> list[EvalResult]:
    """Run every arm of `request` on the same Lean pool and policy, one after the other (`eval_job`); the value
    model scores only the first arm. The results are in `request.arms()` order."""
    results = []
    for arm in request.arms():
        results.append(await eval_job(
            index, settings, pass_n=request.pass_n, pool=pool, pool_size=pool_size, policy=policy,
            iteration=request.iteration, trajectories=arm.trajectories, value=value if arm.ebm is not None else None,
            ebm=arm.ebm, resume=request.resume, pantograph_version=pantograph_version, planner=planner, store=store,
        ))
    return results


def publish_eval(request: EvalRequest, results: Sequence[EvalResult], *, made_from: Sequence[StageInputs],
                 store: Store, show_theorems: bool, echo: Callable[[str], None]) -> None:
    """Write each arm's result file, recording what it is made from (`made_from`, one per arm: `runner.reuse`), and
    `echo` its table as it is written (with `show_theorems`, the first arm's per-theorem table too); after an
    ablation, the two arms side by side."""
    from burnqed.eval.compare import compare_results, render_comparison
    from burnqed.eval.per_theorem import render_not_evaluated, render_theorem_table

    for arm in request.arms():  # again: a file may have taken the name while the eval ran; never replace it
        store.check_replaceable_file(arm.output, EvalResult, "an eval result")
    for k, (arm, found, made) in enumerate(zip(request.arms(), results, made_from, strict=True)):
        result = found.model_copy(update={"made_from": made})
        write_eval_result(result, arm.output, store=store)
        echo(render_eval_table(result))
        for line in judge_texts(result):
            echo(line)
        if k == 0 and result.not_evaluated:
            echo(render_not_evaluated(result))
        if k == 0 and (apart := needs_real_lean_line(result)) is not None:
            echo(apart)
        if show_theorems and k == 0:
            echo(render_theorem_table(result))
    if len(results) == 2:
        echo(render_comparison(compare_results([("llm", results[1]), ("llm+ebm", results[0])])))


def judge_texts(result: EvalResult) -> list[str]:
    """Who counted the result's proofs, then one line per soundness alarm (`eval.judging`)."""
    said = judge_line(result)
    return ([said] if said is not None else []) + alarm_lines(result)


def render_finished(results: Sequence[EvalResult], *, show_theorems: bool) -> list[str]:
    """The tables of an eval that had finished already: each arm's, with `show_theorems` its per-theorem one too."""
    from burnqed.eval.per_theorem import render_not_evaluated, render_theorem_table

    texts = []
    for k, result in enumerate(results):
        texts.append(render_eval_table(result))
        texts.extend(judge_texts(result))
        if k == 0 and result.not_evaluated:
            texts.append(render_not_evaluated(result))
        if k == 0 and (apart := needs_real_lean_line(result)) is not None:
            texts.append(apart)
        if show_theorems:
            texts.append(render_theorem_table(result))
    return texts
