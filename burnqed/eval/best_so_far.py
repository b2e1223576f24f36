"""Never below the best so far (docs/pipeline.md, "Start of an iteration"): what iteration i starts from, decided from
the evals of iterations 0..i-1 — the policy SFT warm-starts from, the value model train-ebm warm-starts from, and
whether search orders by the value model.

    start = choose_start(results, iteration=3, at=Layout(root), rl=False)   # results: (iteration, arm) → EvalResult
    start.policy            # e.g. ".../iter_1/sft": iteration 1's LLM-only eval is the best so far
    start.search_value_model  # False: at iteration 2's eval the value model did not help

The policy is judged by the LLM-only arm (iteration 0's eval, from iteration 1 the ablation eval-noebm): the best
solve count at the largest budget, ties to the later iteration, so a worse iteration (a no-go) never becomes the next
one's start; under pipeline.start = "base" (`setting`) no policy is chosen: SFT trains the base model afresh. The
value model is judged apart: the start's is the best LLM+EBM eval among those where it helped, and search uses the
iteration's value model only when the last measured one helped (never measured: it does). Pure but for
`load_results` and `read_start`; the `start` stage writes `StartRecord` to iter_i/start.json (`burnqed start`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from burnqed import storage
from burnqed.config.pipeline import SearchValueModel
from burnqed.errors import InputError
from burnqed.eval.result import EvalResult
from burnqed.layout import Layout
from burnqed.provenance import StageInputs

LLM, EBM = "llm", "llm+ebm"
ChosenStart = Literal["best", "base"]  # the pipeline.start settings a start stage chooses under


class ArmScore(BaseModel):
    """One earlier iteration's evals at their largest budget, as the start reads them."""

    model_config = ConfigDict(extra="forbid")

    iteration: int = Field(ge=0)
    budget: int | None = Field(description="The largest budget of the LLM-only eval (None: no such eval).")
    total: int = Field(ge=0, description="Theorems evaluated.")
    llm: int | None = Field(description="Solved by the policy alone (LLM only); None: not evaluated.")
    llm_ebm: int | None = Field(description="Solved with the value model (LLM+EBM); None: not evaluated.")

    @property
    def value_model_helped(self) -> bool | None:
        """Whether LLM+EBM solved more than LLM only (None: not both measured)."""
        if self.llm is None or self.llm_ebm is None:
            return None
        return self.llm_ebm > self.llm


class StartRecord(BaseModel):
    """What iteration `iteration` starts from (iter_i/start.json); `reasons` says why, in words."""

    model_config = ConfigDict(extra="forbid")

    iteration: int = Field(ge=1)
    setting: ChosenStart = Field(default="best", description="pipeline.start it was chosen under: "
                                             "'base' chooses no policy (SFT trains the base model afresh).")
    policy_from: int | None = Field(ge=0, description="The iteration whose policy SFT warm-starts from (None: the "
                                    "base model, pipeline.start = 'base').")
    policy: str | None = Field(description="Its SFT (or rl) output folder: sft's --init (None: the base model).")
    value_model_from: int | None = Field(description="The iteration whose value model train-ebm warm-starts from "
                                         "(None: none helped, train afresh).")
    value_model: str | None = Field(description="Its value-model folder: train-ebm's --init (None: none).")
    search_value_model: bool = Field(description="Whether search orders by this iteration's value model: only when "
                                     "the last measured one helped (or none was ever measured).")
    scores: list[ArmScore] = Field(description="The earlier iterations' evals read, in order.")
    reasons: list[str] = Field(description="Why, one line a decision.")
    made_from: StageInputs | None = Field(default=None, description="The evals read (stamped) and the settings: what "
                                          "a re-run of the start stage compares (`runner.reuse`); None: not recorded.")


def score(iteration: int, results: dict[tuple[int, str], EvalResult]) -> ArmScore:
    """Iteration `iteration`'s arms at the LLM-only eval's largest budget (LLM+EBM read at the same budget)."""
    llm, ebm = results.get((iteration, LLM)), results.get((iteration, EBM))
    if llm is None or not llm.budgets:
        return ArmScore(iteration=iteration, budget=None, total=ebm.total if ebm else 0, llm=None,
                        llm_ebm=None if ebm is None or not ebm.budgets else len(ebm.solved_at(ebm.budgets[-1].budget)))
    budget = llm.budgets[-1].budget
    return ArmScore(iteration=iteration, budget=budget, total=llm.total, llm=len(llm.solved_at(budget)),
                    llm_ebm=None if ebm is None else len(ebm.solved_at(budget)))


def _latest_best(scores: list[ArmScore], key: Callable[[ArmScore], int | None]) -> ArmScore | None:
    """The score with the largest `key` (None: skipped), ties to the later iteration."""
    have = [s for s in scores if key(s) is not None]
    return max(have, key=lambda s: (key(s), s.iteration)) if have else None


def choose_start(results: dict[tuple[int, str], EvalResult], iteration: int, at: Layout, *, rl: bool = False,
                 setting: ChosenStart = "best", search: SearchValueModel = "helped"
                 ) -> StartRecord:
    """The start of iteration `iteration` ≥ 1 from the evals of iterations 0..iteration-1 (`results`, keyed by
    (iteration, arm) with arm 'llm' or 'llm+ebm', as the report collects them). `rl` (`rl.enabled`): a policy is the
    rl stage's output, else SFT's. `setting` (pipeline.start): under 'base' the policy is the base model and only the
    value model and its use in search are chosen; `search` (pipeline.search_value_model): 'always' searches with it
    whatever it did. `InputError` when iteration-1 has no LLM-only eval: nothing to judge it by."""
    if iteration < 1:
        raise ValueError(f"iteration 0 starts from the base model; got {iteration}")
    scores = [score(j, results) for j in range(iteration)]
    last = scores[-1]
    if last.llm is None:
        raise InputError(f"start of iteration {iteration}: iteration {iteration - 1} has no LLM-only eval "
                         f"({at.eval_result(iteration - 1, with_ebm=iteration - 1 == 0)}): run its evals first")
    best = _latest_best(scores, lambda s: s.llm)
    assert best is not None  # the last iteration has one
    if setting == "base":
        reasons = [f"policy: the base model, trained afresh on every proof so far (the best so far, iteration "
                   f"{best.iteration}'s {best.llm}/{best.total} LLM only at budget {best.budget}, is not a start under "
                   "pipeline.start = \"base\")"]
    else:
        reasons = [f"policy: iteration {best.iteration}'s ({best.llm}/{best.total} LLM only at budget {best.budget}, "
                   "the best so far" + ("" if best.iteration == last.iteration else
                                        f"; iteration {last.iteration} solved {last.llm}: no-go, not its start") + ")"]
    helped = [s for s in scores if s.value_model_helped]
    value = _latest_best(helped, lambda s: s.llm_ebm)
    if value is None:
        reasons.append("value model: none helped so far; train-ebm starts afresh")
    else:
        reasons.append(f"value model: iteration {value.iteration}'s ({value.llm_ebm} with it vs {value.llm} without)")
    measured = [s for s in scores if s.value_model_helped is not None]
    use = measured[-1].value_model_helped if measured and search == "helped" else True
    if search == "always":
        reasons.append("search: with the value model (pipeline.search_value_model = \"always\")")
    elif not measured:
        reasons.append("search: with the value model (none measured yet)")
    else:
        m = measured[-1]
        reasons.append(f"search: {'with' if use else 'without'} the value model (at iteration {m.iteration}'s eval "
                       f"{m.llm_ebm} with it vs {m.llm} without)")
    policy = None if setting == "base" else at.rl(best.iteration) if rl else at.sft(best.iteration)
    return StartRecord(iteration=iteration, setting=setting, policy_from=None if policy is None else best.iteration,
                       policy=policy,
                       value_model_from=value.iteration if value else None,
                       value_model=at.ebm(value.iteration) if value else None, search_value_model=bool(use),
                       scores=scores, reasons=reasons)


def load_results(at: Layout, iteration: int, store: storage.Store) -> dict[tuple[int, str], EvalResult]:
    """The published evals of iterations 0..iteration-1 by (iteration, arm): iteration 0's eval is LLM only; from
    iteration 1 eval.json is LLM+EBM when it names a value model and eval-noebm.json LLM only."""
    results: dict[tuple[int, str], EvalResult] = {}
    for j in range(iteration):
        for uri in (at.eval_result(j), at.eval_result(j, with_ebm=False)):
            if not store.exists(uri):
                continue
            result = store.read_model(uri, EvalResult, "eval result")
            results[(j, EBM if result.ebm else LLM)] = result
    return results


def read_start(uri: str, store: storage.Store) -> StartRecord:
    """The start record at `uri` (`InputError` when it is missing or not one)."""
    if not store.exists(uri):
        raise InputError(f"--start {uri}: no start record there: run `burnqed start` (the iteration's start stage) "
                         "first")
    return store.read_model(uri, StartRecord, "start record")
