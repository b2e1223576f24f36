"""The go/no-go gates of an iteration report (docs/pipeline.md, "Report and go/no-go gates"): the baseline's floor
and the gain over the step before, both blocking, read theorem by theorem (`paired_change`: new, lost, Newcombe's
paired 95 % interval), and whether the value model helps (a warning). With pipeline.start = "base" or "best" the
measured gain of iteration i ≥ 1 is shown but not a stop (a worse iteration is not the next one's start); under
"best" the policy gate (a warning) says what iteration i+1 starts from.

    gates = go_no_go(rows, iteration, cfg.pipeline, results, base)   # rows: every eval arm's budget rows
    decision = Report(..., gates=gates).decision                      # go, no-go by the gate that decided, or none

Pure: it reads the eval results the report collected (`report.build`), nothing else.
"""

from __future__ import annotations

from burnqed.config import PipelineConfig
from burnqed.eval.best_so_far import score
from burnqed.eval.compare import unlike
from burnqed.eval.result import EvalResult
from burnqed.report.tables import ArmRow, Gate, PairedChange


def _best(rows: list[ArmRow], iteration: int, arm: str) -> ArmRow | None:
    """The arm's row at its largest budget."""
    mine = [row for row in rows if row.iteration == iteration and row.arm == arm]
    return max(mine, key=lambda row: row.budget) if mine else None


def go_no_go(rows: list[ArmRow], iteration: int, cfg: PipelineConfig,
           results: dict[tuple[int, str], EvalResult], base: EvalResult | None) -> list[Gate]:
    """The go/no-go gates of iteration `iteration` (docs/pipeline.md, "Report and go/no-go gates"): the baseline's
    floor, the gain over the step before (iteration i-1's main eval, or for iteration 0 the base eval when there is
    one), both blocking (a measured gain not from iteration 1 under pipeline.start "base" or "best": `_gain_gate`), and
    whether the value model helps (a warning)."""
    gates: list[Gate] = []
    # The raw baseline is the untrained policy's eval; runs without one fall back to iteration 0's.
    raw = _best(rows, 0, "base")
    floor, who, measured = ((raw, "the base policy", base) if raw is not None
                            else (_best(rows, 0, "llm"), "iteration 0", results.get((0, "llm"))))
    if floor is None:
        gates.append(Gate(name="baseline", passed=False, blocking=True, detail="iteration 0 has no eval result"))
    else:
        # the figure names what it measured: the model and the benchmark (a run root is one experiment)
        model = "" if measured is None else f" ({model_label(measured.model)})"
        of = "" if measured is None else f" of {measured.benchmark}"
        gates.append(Gate(
            name="baseline", passed=floor.rate >= cfg.gate_min_rate, blocking=True,
            detail=f"{who}{model} solves {floor.text}{of} at its largest budget, {floor.budget} (gate: ≥ "
            f"{cfg.gate_min_rate:.1%} [pipeline.gate_min_rate = {cfg.gate_min_rate:g}])",
        ))
    gain = _gain_gate(iteration, cfg, rows, results, base)
    if gain is not None:
        gates.append(gain)
    if iteration >= 1 and cfg.start == "best":
        gates.append(_policy_gate(iteration, results))
    if iteration >= 1:
        with_ebm = _best(rows, iteration, "llm+ebm")
        without = _best(rows, iteration, "llm")
        differences = _unlike_arms(results, (iteration, "llm"), (iteration, "llm+ebm"))
        if with_ebm is not None and without is not None and differences:
            gates.append(Gate(name="ebm-helps", passed=False, blocking=False, measured=False,
                              detail=f"not measured: LLM+EBM and LLM only are not the same measurement "
                              f"({'; '.join(differences)})"))
        elif with_ebm is not None and without is not None:
            gates.append(Gate(
                name="ebm-helps", passed=with_ebm.rate > without.rate, blocking=False,
                detail=f"LLM+EBM {with_ebm.text} vs LLM only {without.text} at the largest budget"
                + ("" if with_ebm.rate > without.rate else ": the value model does not help; keep log-prob ordering"),
            ))
    return gates


def _policy_gate(iteration: int, results: dict[tuple[int, str], EvalResult]) -> Gate:
    """The policy judged alone (pipeline.start = "best"): iteration `iteration`'s LLM-only eval against the best
    earlier one at the largest budget. Not blocking: a no-go iteration is not the next one's start
    (`eval.best_so_far.choose_start` keeps the best policy so far)."""
    scores = [score(j, results) for j in range(iteration + 1)]
    now, earlier = scores[-1], [s for s in scores[:-1] if s.llm is not None]
    best = max(earlier, key=lambda s: (s.llm, s.iteration)) if earlier else None
    if now.llm is None or best is None or best.llm is None:
        missing = f"iteration {iteration}" if now.llm is None else "every earlier iteration"
        return Gate(name="policy", passed=False, blocking=False, measured=False,
                    detail=f"not measured: {missing} has no LLM-only eval")
    differences = _unlike_arms(results, (best.iteration, "llm"), (iteration, "llm"))
    if differences:
        return Gate(name="policy", passed=False, blocking=False, measured=False,
                    detail=f"not measured: the LLM-only evals of iterations {best.iteration} and {iteration} are not "
                    f"the same measurement ({'; '.join(differences)})")
    passed = now.llm >= best.llm
    return Gate(name="policy", passed=passed, blocking=False,
                detail=f"LLM only {now.llm}/{now.total} vs the best so far, iteration {best.iteration}'s "
                f"{best.llm}/{best.total}, at budget {now.budget}: the next iteration starts from "
                + (f"iteration {iteration}'s policy" if passed else f"iteration {best.iteration}'s policy (no-go)"))


def _gain_gate(iteration: int, cfg: PipelineConfig, rows: list[ArmRow],
               results: dict[tuple[int, str], EvalResult], base: EvalResult | None) -> Gate | None:
    """The gain gate: iteration `iteration`'s main eval against the step before's on the same theorems
    (`paired_change`), passed when the difference (with `gate_gain_interval`, the lower end of its 95 % interval)
    reaches `gate_min_gain` and no more than `gate_max_lost` theorems were lost. None for iteration 0 without a base
    eval (nothing before it). Blocking, but a gain measured from iteration 1 under pipeline.start "base" or "best" is
    shown, not a stop: there a worse iteration is not the next one's start (the next SFT trains the base model afresh,
    or starts from the best so far, `eval.best_so_far.choose_start`). A missing or unlike eval stays a stop (no
    decision) whatever the setting: the next iteration would go on from no measurement."""
    if iteration == 0 and base is None:
        return None
    gate = _gain_check(iteration, cfg, rows, results, base)
    if iteration >= 1 and cfg.start != "previous" and gate.change is not None:
        after = "" if gate.passed else (f" — not a stop with pipeline.start = \"{cfg.start}\": the next iteration "
                                        + ("starts from the best so far (the policy gate)" if cfg.start == "best"
                                           else "trains the base model afresh on every proof so far"))
        return gate.model_copy(update={"blocking": False, "detail": gate.detail + after})
    return gate


def _gain_check(iteration: int, cfg: PipelineConfig, rows: list[ArmRow],
                results: dict[tuple[int, str], EvalResult], base: EvalResult | None) -> Gate:
    """`_gain_gate`'s comparison, as a blocking gate."""
    arm = _main_arm(rows, iteration)
    now = results.get((iteration, arm))
    before: EvalResult | None = base
    before_step, what, before_arm = "base", "the base eval and iteration 0's", "base"
    if iteration >= 1:
        earlier_arm = _main_arm(rows, iteration - 1)
        before_step, what = f"iteration {iteration - 1}", f"the evals of iterations {iteration - 1} and {iteration}"
        before, before_arm = results.get((iteration - 1, earlier_arm)), f"{before_step} {earlier_arm}"
    if now is None or before is None:
        missing = f"iteration {iteration}" if now is None else before_step
        return Gate(name="gain", passed=False, blocking=True, detail=f"missing eval result of {missing}")
    after_step = f"iteration {iteration}"
    differences = unlike([(before_arm, before), (f"{after_step} {arm}", now)], budgets=True)
    if differences:
        return Gate(name="gain", passed=False, blocking=True, measured=False,
                    detail=f"not measured: {what} are not the same measurement ({'; '.join(differences)}); evaluate "
                    "both on the same theorems with the same budgets and settings")
    change = paired_change(before_step, before, after_step, now)
    low, _ = change.interval
    read, measure = (low, "the lower end of its 95% interval") if cfg.gate_gain_interval else (
        change.difference, "the difference")
    short = read < cfg.gate_min_gain
    too_many = cfg.gate_max_lost is not None and change.lost > cfg.gate_max_lost
    rules = [(f"{measure} ≥ {100 * cfg.gate_min_gain:+.1f} pts", short)]
    if cfg.gate_max_lost is not None:
        rules.append((f"at most {cfg.gate_max_lost} lost", too_many))
    unmet = [rule for rule, failed in rules if failed]
    return Gate(name="gain", passed=not unmet, blocking=True, change=change,
                detail=f"{after_step} vs {before_step.removeprefix('iteration ')}: {change.text} (gate: "
                + ", ".join(rule + (f" [pipeline.gate_min_gain = {cfg.gate_min_gain:g}]" if k == 0 else "")
                            for k, (rule, _) in enumerate(rules))
                + (f"; not met: {', '.join(unmet)})" if unmet else ")"))


def model_label(model: str) -> str:
    """A model as a figure names it: a folder or URI by its last part (`…/tiny-v3` → `tiny-v3`), a served model's
    name as it is; the report's provenance names it in full."""
    return model.rstrip("/").rsplit("/", 1)[-1] or model


def paired_change(before_step: str, before: EvalResult, after_step: str, after: EvalResult) -> PairedChange:
    """Two evals of the same theorems (`unlike` empty: the same names and largest budget) theorem by theorem at
    their largest budget: how many each solved, how many only the later one did (new) and only the earlier (lost)."""
    budget = after.budgets[-1].budget
    was, now = before.solved_at(budget), after.solved_at(budget)
    return PairedChange(before=before_step, after=after_step, total=after.total, before_solved=len(was),
                        after_solved=len(now), new=len(now - was), lost=len(was - now))


def _main_arm(rows: list[ArmRow], iteration: int) -> str:
    """The arm the gates read for `iteration`: llm+ebm when it has one (`_best`'s order), else llm."""
    return "llm+ebm" if _best(rows, iteration, "llm+ebm") is not None else "llm"


def _unlike_arms(results: dict[tuple[int, str], EvalResult], first: tuple[int, str], second: tuple[int, str]
                 ) -> list[str]:
    """`unlike` (with budgets) of two arms' evals; empty when either is missing."""
    if first not in results or second not in results:
        return []
    return unlike([(f"iteration {first[0]} {first[1]}", results[first]),
                   (f"iteration {second[0]} {second[1]}", results[second])], budgets=True)
