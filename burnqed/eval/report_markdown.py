"""report.md: the iteration report as a researcher reads it (`eval.report` builds the `Report`, `eval.report_plots`
draws its figures). One function per section, in the order they appear.

    text = render_markdown(report)

Every solve rate is written `solved/n (rate, 95% Wilson interval)` (`report_model.rate_text`).
"""

from __future__ import annotations

from burnqed.eval.compare import LEGEND, CostEntry, cost_text, delta_text, entry_text
from burnqed.eval.report_model import (
    SECTIONS,
    BaseArm,
    Change,
    CostRow,
    DepthOutcomes,
    IterationFacts,
    LearningRow,
    ProofRow,
    Report,
    TrainingPoint,
    TrainingSummary,
)
from burnqed.eval.result import BudgetRow, rate_text
from burnqed.records import EdgeOutcome

SCALAR_METRICS = ("rank1", "rank1_accuracy", "energy_gap", "temperature", "centroid_l2", "probe_accuracy",
                  "linear_probe_accuracy", "loss")
MAX_NAMES = 30  # theorem names listed per line of the new/lost section before "… and N more"
DETAIL_LIMIT = 120  # characters of a failure's detail shown per unsolved theorem


def _cell(value: float | int | str | None, fmt: str = "{}") -> str:
    return "–" if value is None else fmt.format(value)


def _seconds(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.1f} s" if value < 600 else f"{value / 60:.1f} min"


def _escaped(text: str) -> str:
    """`text` on one line, safe inside a markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def render_markdown(report: Report) -> str:
    """report.md."""
    lines = [f"# burnqed report: iteration {report.iteration}", "",
             f"Run root: `{report.root}`" + (f"; written by {report.made_by}" if report.made_by else "") + ".", "",
             "Every solve rate is shown as solved/n (rate, 95% Wilson score interval). On a few dozen theorems the "
             "interval spans ±10 points or more: a difference inside it may be chance.", ""]
    arm = report.base_arm
    if arm is not None and arm.differs:
        lines += [f"**The base arm is not the model SFT started from**: {_base_arm_text(arm)}.", ""]
    if report.not_compared:
        lines += ["## Not compared", "", "These evals are shown side by side but are not the same measurement, so no "
                  "gain, gate or new proof is read between them:", ""]
        lines += [f"- {note}" for note in report.not_compared] + [""]
    lines += _rates_markdown(report)
    lines += _figures_markdown(report)
    if report.learning:
        lines += _learning_markdown(report.learning)
        lines += _base_arm_markdown(report)
    lines += _changes_markdown(report.changes)
    lines += _unsolved_markdown(report)
    lines += _not_evaluated_markdown(report)
    lines += _proofs_markdown(report.proofs, report.iteration, report.learning)
    lines += _training_markdown(report.training, report.training_summaries)
    lines += _search_markdown(report.iterations, report.depth_outcomes, report.iteration)
    lines += _cost_markdown(report.costs)
    lines += _stage_markdown(report)
    exports = [fact for fact in report.iterations if fact.export]
    if exports:
        lines += ["## Policy exports", ""] + [f"- iteration {fact.iteration}: {fact.export}" for fact in exports] + [""]
    lines += _value_markdown(report.iterations)
    lines += _evidence_markdown(report.iterations)
    lines += _mode_section(report)
    for section in SECTIONS:
        lines += section.markdown(getattr(report, section.field))
    lines += _decontamination_markdown(report)
    lines += _provenance_markdown(report)
    lines += _gates_markdown(report)
    return "\n".join(lines)


def _figures_markdown(report: Report) -> list[str]:
    """Every eval arm's per-budget figures (`BudgetRow.figures`, declared once in eval.result): what each budget
    used and cost."""
    figures = BudgetRow.figures()
    rows = [row for row in report.rows if row.figures]
    if not rows:
        return []
    lines = ["## Per-budget figures", "", "What each eval arm used and cost at each budget (means and medians over "
             "the benchmark's theorems; tokens and Lean calls of every attempt).", "",
             "| iteration | arm | budget | " + " | ".join(header for _, header in figures) + " |",
             "|---|---|---|" + "---|" * len(figures)]
    for row in sorted(rows, key=lambda r: (r.iteration, r.arm, r.budget)):
        cells = [BudgetRow.shown(name, row.figures.get(name)) for name, _ in figures]
        lines.append(f"| {row.iteration} | {row.arm} | {row.budget} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def _rates_markdown(report: Report) -> list[str]:
    """Every arm of every iteration at every budget."""
    lines = ["## Solve rate per budget", ""]
    if not report.rows:
        return [*lines, "No eval results are published yet.", ""]
    budgets = sorted({row.budget for row in report.rows})
    lines.append("| iteration | arm | " + " | ".join(f"budget {b}" for b in budgets) + " |")
    lines.append("|---|---|" + "---|" * len(budgets))
    for key in sorted({(row.iteration, row.arm) for row in report.rows}):
        cells = []
        for budget in budgets:
            row = next((r for r in report.rows if (r.iteration, r.arm) == key and r.budget == budget), None)
            cells.append("–" if row is None else row.text)
        lines.append(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + " |")
    return [*lines, "", "![solve rate against budget](solve_rate.png)", ""]


def _learning_markdown(rows: list[LearningRow]) -> list[str]:
    steps = list(dict.fromkeys(row.step for row in rows))
    groups = list(dict.fromkeys(row.group for row in rows))
    budget = rows[-1].budget
    lines = ["## Learning", "", f"Solve rate at the largest budget ({budget}); each iteration's main eval "
             "(LLM+EBM when it has a value model), the change from the step before in points in brackets.", "",
             "| theorems | " + " | ".join(steps) + " |", "|---|" + "---|" * len(steps)]
    for group in groups:
        cells = []
        for step in steps:
            row = next((r for r in rows if r.step == step and r.group == group), None)
            if row is None:
                cells.append("–")
                continue
            gain = " (not compared)" if row.unlike else "" if row.gain is None else f" ({100 * row.gain:+.1f})"
            cells.append(f"{row.text}{gain}")
        lines.append(f"| {group} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def _base_arm_text(arm: BaseArm) -> str:
    """What the base arm evaluated, and what iteration 0's SFT started from."""
    text = f"the base arm is `{arm.model}`, evaluated untrained (eval-base)"
    if arm.sft_base_model is None:
        return text
    started = arm.sft_base_model if arm.sft_base_model.startswith("the ") else f"`{arm.sft_base_model}`"
    if arm.differs:
        return (f"{text}, but iteration 0's SFT started from {started} (sft.base_model): base → iteration 0 is not "
                "what training added to the base arm's model; set sft.base_model to the model to train")
    return f"{text}; iteration 0's SFT started from {started}"


def _base_arm_markdown(report: Report) -> list[str]:
    """One line under the learning table: which model the base arm is."""
    if report.base_arm is None:
        return []
    text = _base_arm_text(report.base_arm)
    return [text[0].upper() + text[1:] + ".", ""]


def _names(names: list[str]) -> str:
    shown = ", ".join(f"`{name}`" for name in names[:MAX_NAMES])
    return shown + (f" … and {len(names) - MAX_NAMES} more" if len(names) > MAX_NAMES else "") if names else "none"


def _changes_markdown(changes: list[Change]) -> list[str]:
    """Each step's new and lost theorems against the step before (`eval.compare`), or why they are not compared."""
    if not changes:
        return []
    lines = ["## New and lost theorems", "", "Theorems each step's main eval solves that the step before did not "
             "(new), and the reverse (lost), at the largest budget (`burnqed compare` of the two evals).", ""]
    for change in changes:
        if change.unlike is not None:
            lines.append(f"- **{change.after}** vs {change.before}: not compared ({change.unlike})")
            continue
        lines.append(f"- **{change.after}** vs {change.before} ({change.compared_at}): {len(change.new)} new, "
                     f"{len(change.lost)} lost")
        lines.append(f"  - new: {_names(change.new)}")
        lines.append(f"  - lost: {_names(change.lost)}")
    return [*lines, ""]


def _unsolved_markdown(report: Report) -> list[str]:
    """The theorems the iteration's main eval did not prove: how many per source and reason, with the known-false
    ones and the reachable ceiling, what the budget-used figure is, then each one."""
    rows = report.unsolved
    step = f"iteration {report.iteration}"
    if not rows:
        return _ceiling_markdown(report)
    ceiling = {row.group: row for row in report.ceiling}
    lines = [f"## Unsolved theorems of {step}", "",
             f"{len(rows)} theorems the main eval did not prove at its largest budget, by source and failure reason "
             "(docs/search.md: `exhausted` = nothing left to try, `max_nodes`/`max_proofs` = the budget was spent, "
             "`timeout` = the time limit, `start_error` = Lean refused the statement).", "",
             *_ceiling_markdown(report),
             "| source | unsolved | known false | solved of the reachable | by reason |", "|---|---|---|---|---|"]
    groups = list(dict.fromkeys(row.group for row in rows))
    for group in groups:
        mine = [row for row in rows if row.group == group]
        reasons: dict[str, int] = {}
        for row in mine:
            reasons[row.reason] = reasons.get(row.reason, 0) + 1
        cap = ceiling.get(group) or (ceiling.get("all") if len(groups) == 1 else None)
        of = f" of {cap.total}" if cap is not None else ""
        reach = f"{cap.solved} of {cap.reachable}" if cap is not None else "–"
        by = ", ".join(f"{reason} {n}" for reason, n in sorted(reasons.items(), key=lambda item: (-item[1], item[0])))
        lines.append(f"| {group} | {len(mine)}{of} | {sum(row.known_false for row in mine)} | {reach} | {by} |")
    lines += ["", *_budget_used_note(report), ""]
    for group in groups:
        unit = rows[0].unit
        largest = f", of {rows[0].budget}" if rows[0].budget is not None else ""
        lines += [f"### {group}", "", f"| theorem | reason | budget used ({unit}{largest}) | time | edges | what "
                  "happened |", "|---|---|---|---|---|---|"]
        for row in (r for r in rows if r.group == group):
            detail = _escaped(row.detail or "")
            if len(detail) > DETAIL_LIMIT:
                detail = detail[: DETAIL_LIMIT - 1] + "…"
            mark = " **known false**" if row.known_false else ""
            lines.append(f"| `{row.theorem}`{mark} | {row.reason} | {row.budget_used} | {row.time_s:.1f} s | "
                         f"{_cell(row.edges)} | {detail} |")
        lines.append("")
    return lines


def _not_evaluated_markdown(report: Report) -> list[str]:
    """The benchmark's declarations the iteration's main eval did not evaluate: where, which and why."""
    if not report.not_evaluated:
        return []
    lines = [f"## Declarations not evaluated in iteration {report.iteration}", "",
             f"{len(report.not_evaluated)} declarations of the benchmark are none of its theorems, so no rate above "
             "counts them:", "", "| where | declaration | reason | detail |", "|---|---|---|---|"]
    lines += [f"| `{_escaped(skipped.where)}` | {_escaped(skipped.name or '–')} | {skipped.reason} | "
              f"{_escaped(skipped.detail)} |" for skipped in report.not_evaluated]
    return [*lines, ""]


def _ceiling_markdown(report: Report) -> list[str]:
    """The reachable ceiling when the benchmark holds known-false theorems (the world's traps), and an alarm for any
    the main eval proved."""
    whole = next((row for row in report.ceiling if row.group == "all"), None)
    if whole is None or not whole.known_false:
        return []
    proved = sorted(set(whole.known_false) - {row.theorem for row in report.unsolved})
    lines = [f"{len(whole.known_false)} of the {whole.total} theorems are known to be false (the generated world's "
             "traps, false by construction with a recorded counterexample: `burnqed world stats`), marked **known "
             f"false** below: no sound prover solves them, so the reachable ceiling is {whole.reachable} of "
             f"{whole.total}, of which the main eval solved {whole.solved}.", ""]
    if proved:
        lines += [f"**Proved although known to be false: {_names(proved)}.** A sound Lean never accepts a proof of a "
                  "false statement: check `lean.command` and the soundness rules (docs/lean.md).", ""]
    return lines


def _budget_used_note(report: Report) -> list[str]:
    """What the unsolved theorems' budget-used figure is, and why a search stops short of the budget."""
    from burnqed.config.search import SearchConfig

    rows = report.unsolved
    largest = rows[0].budget
    lines = [f"Budget used: what a theorem's search spent of the largest budget ({largest} {rows[0].unit}; with "
             "pass@N, the attempt that spent most). A search that stopped short of it ended for its reason, not the "
             "budget: nothing left to try (`exhausted`), the time limit, or Lean refusing the statement."]
    if rows[0].unit != "expansions":
        return lines
    revisits = SearchConfig.model_fields["revisits"].default
    lines[0] += (f" Step search expands a node at most 1 + `search.revisits` times ({1 + revisits} at the default "
                 f"{revisits} revisits), so a search in which no tactic tried at the root succeeded ends `exhausted` "
                 "at exactly 1 + `search.revisits` expansions, whatever the budget.")
    short = [row.budget_used for row in rows
             if row.reason == "exhausted" and largest is not None and row.budget_used < largest]
    if short:
        common, count = max(((value, short.count(value)) for value in set(short)), key=lambda item: (item[1], item[0]))
        if count > 1:
            lines[0] += (f" Here {count} of the {len(short)} searches that ended `exhausted` before the budget "
                         f"stopped at {common} expansions.")
    return lines


def _proofs_markdown(proofs: list[ProofRow], iteration: int, learning: list[LearningRow]) -> list[str]:
    """The proofs iteration `iteration`'s main eval found (new ones first), one line each; none is marked new when
    the step before is not the same measurement (`learning`'s rows say)."""
    from burnqed.eval.per_theorem import answer_line, one_line

    rows = [row for row in proofs if row.iteration == iteration]
    if not rows:
        return []
    rows.sort(key=lambda row: (not row.new, row.theorem))
    new = sum(row.new for row in rows)
    unlike_before = next((row.unlike for row in learning if row.step == f"iteration {iteration}" and row.unlike), None)
    versus = (f"not compared with the step before ({unlike_before})" if unlike_before
              else f"{new} the step before did not prove (marked new)")
    lines = [f"## Proofs found by iteration {iteration}", "",
             f"{len(rows)} theorems proved by the main eval ({rows[0].arm}); {versus}.", "",
             "| theorem | budget at proof | proof |", "|---|---|---|"]
    for row in rows:
        mark = " **new**" if row.new else ""
        proof = one_line(row.proof or "", limit=160)
        if row.answer is not None:  # the answer beside the proof
            proof = f"{answer_line(row.answer, check=row.answer_check, reference=row.reference)} · {proof}"
        proof = proof.replace("|", "\\|")
        lines.append(f"| `{row.theorem}`{mark} | {_cell(row.budget_at_proof)} | `{proof}` |")
    return [*lines, ""]


def _first_last(points: list[TrainingPoint], split: str) -> str:
    mine = sorted((p for p in points if p.split == split), key=lambda p: p.step)
    if not mine:
        return "–"
    return f"{mine[0].loss:.3f} → {mine[-1].loss:.3f} (step {mine[0].step} → {mine[-1].step})"


def _training_markdown(points: list[TrainingPoint], summaries: list[TrainingSummary]) -> list[str]:
    """How each iteration's policy and value model trained: the first and last logged losses, what they trained on."""
    shown = [s for s in summaries if s.sft_steps is not None or s.ebm_steps is not None
             or any(p.iteration == s.iteration for p in points)]
    if not shown:
        return []
    lines = ["## Training curves", "",
             "Policy: SFT cross-entropy per supervised token (nats), on the training examples and the held-out ones. "
             "Value model: its InfoNCE loss (ln(K+1) is chance with K negatives) and, held out, the share of groups "
             "whose proof-path state has the lowest energy (rank-1).", "",
             "| iteration | policy training | policy loss, train | policy loss, held out | value model training | "
             "value loss, train | value loss, held out | held-out rank-1, last |",
             "|---|---|---|---|---|---|---|---|"]
    for s in shown:
        mine = [p for p in points if p.iteration == s.iteration]
        policy = [p for p in mine if p.model == "policy"]
        value = [p for p in mine if p.model == "value"]
        trained = "–" if s.sft_steps is None else (
            f"{s.sft_method}, {s.sft_steps} steps on {s.sft_examples} examples ({s.sft_positives} positives from "
            f"trajectories), {_seconds(s.sft_seconds)}")
        value_trained = "–" if s.ebm_steps is None else (
            f"{s.ebm_steps} steps on {s.ebm_positives} positive states, {_seconds(s.ebm_seconds)}")
        held = sorted((p for p in value if p.split == "held-out" and p.rank1 is not None), key=lambda p: p.step)
        rank1 = "–" if not held or held[-1].rank1 is None else f"{held[-1].rank1:.1%} (step {held[-1].step})"
        lines.append(f"| {s.iteration} | {trained} | {_first_last(policy, 'train')} | "
                     f"{_first_last(policy, 'held-out')} | {value_trained} | {_first_last(value, 'train')} | "
                     f"{_first_last(value, 'held-out')} | {rank1} |")
    lines.append("")
    if points:
        lines += ["![training curves](training.png)", ""]
    return lines


SHOWN_OUTCOMES = (EdgeOutcome.OK, EdgeOutcome.CLOSED, EdgeOutcome.ERROR, EdgeOutcome.TIMEOUT, EdgeOutcome.REFUSED)


def _search_markdown(facts: list[IterationFacts], depths: list[DepthOutcomes], iteration: int) -> list[str]:
    """The training searches' counts per iteration, then where this iteration's searches spent and proved by depth."""
    lines = ["## Where search spends and where it proves", "",
             "Training searches per iteration (train and pool theorems; the benchmark is never searched):", "",
             "| iteration | theorem searches | proved | edges | positive edges |", "|---|---|---|---|---|"]
    for fact in facts:
        lines.append(f"| {fact.iteration} | {_cell(fact.theorems_searched)} | {_cell(fact.theorems_proved)} | "
                     f"{_cell(fact.edges)} | {_cell(fact.positives)} |")
    lines.append("")
    for source in ("search", "eval"):
        rows = [row for row in depths if row.source == source]
        if not rows:
            continue
        what = "training searches" if source == "search" else "main eval (the benchmark)"
        lines += [f"Edges (tactics applied) of iteration {iteration}'s {what} by the depth of the state they lead "
                  "to, by outcome, and how many lie on a verified proof path:", "",
                  "| depth | edges | " + " | ".join(o.value for o in SHOWN_OUTCOMES) + " | other | on a proof path |",
                  "|---|---|" + "---|" * len(SHOWN_OUTCOMES) + "---|---|"]
        for row in rows:
            total = sum(row.outcomes.values())
            shown = [row.outcomes.get(o.value, 0) for o in SHOWN_OUTCOMES]
            lines.append(f"| {row.depth} | {total} | " + " | ".join(str(n) for n in shown)
                         + f" | {total - sum(shown)} | {row.on_path} |")
        lines.append("")
    if depths:
        lines += ["![edges by depth and outcome](outcomes_by_depth.png)", ""]
    return lines


def _cost_markdown(costs: list[CostRow]) -> list[str]:
    """What each eval arm cost: wall time, where the search time went, tokens and edges."""
    if not costs:
        return []
    lines = ["## Time and tokens", "",
             "At each eval's largest budget. Search time is summed over theorems (which may search concurrently, "
             "so it can exceed the wall time); the policy/Lean/value columns are where it went.", "",
             "| iteration | arm | wall | search (Σ theorems) | policy | Lean | value model | tokens | edges |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in costs:
        lines.append(f"| {row.iteration} | {row.arm} | {_seconds(row.wall_s)} | {_seconds(row.search_s)} | "
                     f"{_seconds(row.policy_s)} | {_seconds(row.lean_s)} | {_seconds(row.value_s)} | "
                     f"{_cell(row.tokens)} | {_cell(row.edges)} |")
    return [*lines, ""]


def _stage_markdown(report: Report) -> list[str]:
    """Per-stage wall and CPU time of this iteration and the totals of every iteration, from `stages.json`."""
    lines = ["## Stage times", ""]
    stages = [cost for cost in report.stage_costs if cost.iteration == report.iteration]
    recorded = [cost for cost in report.iteration_costs if cost.recorded]
    if not recorded:
        return [*lines, "Not recorded: the local runner (`burnqed iterate`) writes each stage run's wall and CPU time "
                "to `iter_i/stages.json`; on a cluster Argo records each step's start and end (`argo get WORKFLOW`, "
                "or the Argo UI), and the eval's own wall time is under Time and tokens.", ""]
    if stages:
        lines += ["Wall time from each stage process's start to its exit and its CPU time (user + system, with the "
                  "Lean workers it ran), summed over shards and over the runs an interrupted stage took. Stages run "
                  "side by side, so the sum exceeds the time the iteration took (its span).", "",
                  "| stage | runs | wall | CPU |", "|---|---|---|---|"]
        for cost in stages:
            failed = f" ({cost.failed} stopped or failed)" if cost.failed else ""
            lines.append(f"| {cost.stage} | {cost.runs}{failed} | {_seconds(cost.wall_s)} | {_seconds(cost.cpu_s)} |")
        lines.append("")
    for total in report.iteration_costs:
        if total.recorded:
            lines.append(f"- iteration {total.iteration}: {_seconds(total.wall_s)} of stage time over "
                         f"{total.stage_runs} stage runs, {_seconds(total.cpu_s)} CPU; span {_seconds(total.span_s)} "
                         "(first start to last end, pauses between interrupted runs included)")
        else:
            lines.append(f"- iteration {total.iteration}: not recorded (no stages.json)")
    return [*lines, "", "The report stage writing this report is not in it (it is still running); a report stage "
            "that finished earlier is.", ""]


def _value_markdown(facts: list[IterationFacts]) -> list[str]:
    metrics = [fact for fact in facts if fact.ebm_metrics]
    if not metrics:
        return []
    lines = ["## Value model", ""]
    keys = [k for k in metrics[-1].ebm_metrics if k.rsplit(".", 1)[-1] in SCALAR_METRICS][:12]
    keys = keys or list(metrics[-1].ebm_metrics)[:12]
    lines.append("| iteration | " + " | ".join(keys) + " |")
    lines.append("|---|" + "---|" * len(keys))
    for fact in metrics:
        cells = " | ".join(_cell(fact.ebm_metrics.get(k), "{:.4g}") for k in keys)
        lines.append(f"| {fact.iteration} | {cells} |")
    return [*lines, ""]


def _evidence_markdown(facts: list[IterationFacts]) -> list[str]:
    """What decides whether the value model helps: rank accuracy among siblings by depth, calibration, and the
    energy by depth on the proof path and off it."""
    shown = [fact for fact in facts if fact.ebm_evidence is not None]
    if not shown:
        return []
    lines = ["## Value model: does it pick the proof path?", "",
             "Among an expanded node's children (one on a verified proof path, one off it at least): how often the "
             "lowest energy is on the path, against the policy's most likely tactic and a random child. "
             "Calibration: the proof-path rate of equal-count energy bins, lowest energy first (it should fall), "
             "and the chance that a positive state of a theorem has a lower energy than a negative one (AUC). "
             "Energy by depth: the mean energy of the states of each depth, minus their goal's own as step search "
             "scores them, on the proof path / off it (it should be lower on the path, and fall with depth there; "
             "rising with depth, it holds the search near the root).", "",
             "| iteration | split | decisions | lowest energy | policy's pick | random | by depth (energy / policy, "
             "nodes) | AUC | path rate by energy bin | energy by depth (path / off) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for fact in shown:
        ev = fact.ebm_evidence
        assert ev is not None
        rank, cal = ev.siblings, ev.calibration
        depths = "; ".join(f"{bucket}: {row.accuracy:.0%} / {_cell(row.policy, '{:.0%}')} ({row.decisions})"
                           for bucket, row in rank.by_depth.items())
        bins = " → ".join(f"{b.rate:.0%}" for b in cal.bins)
        energies = "; ".join(f"{bucket}: {_cell(row.positive, '{:+.2f}')} / {_cell(row.negative, '{:+.2f}')}"
                             for bucket, row in ev.by_depth.items()) or "–"
        lines.append(f"| {fact.iteration} | {ev.split} | {rank.decisions} | {rank.accuracy:.1%} | "
                     f"{_cell(rank.policy, '{:.1%}')} | {rank.chance:.1%} | {depths} | {_cell(cal.auc, '{:.3f}')} | "
                     f"{bins} | {energies} |")
    lines.append("")
    return lines


def _mode_section(report: Report) -> list[str]:
    """report.md's modes section: every eval of the iteration at each budget with its cost, then the evals at equal
    generated tokens and at equal Lean calls per theorem (`eval.compare`'s reading)."""
    rows = [row for row in report.modes if row.iteration == report.iteration]
    if not rows:
        return []
    lines = ["## Search modes at equal tokens", "",
             "| eval | budget | solved | tokens/theorem | Lean calls |", "|---|---|---|---|---|"]
    for row in rows:
        tokens = "–" if row.avg_tokens is None else f"{row.avg_tokens:.0f}"
        lines.append(f"| {row.label} | {row.budget} {row.unit} | {row.text} | {tokens} | {_cell(row.lean_calls)} |")
    lines.append("")
    comparison = report.mode_comparison
    if comparison is not None:
        labels = comparison.labels
        for levels, what in ((comparison.token_levels, "tokens"), (comparison.call_levels, "Lean calls")):
            if not levels:
                continue
            lines += [f"At equal {'generated ' if what == 'tokens' else ''}{what} per theorem (Δ: {labels[-1]} − "
                      f"{labels[0]}):", "", f"| {what}/theorem | " + " | ".join(labels) + " | Δ |",
                      "|---|" + "---|" * (len(labels) + 1)]
            for level in levels:
                cells = [_cost_cell(entry) for entry in level.entries]
                lines.append(f"| {cost_text(level.level)} | " + " | ".join(cells) + f" | {delta_text(level)} |")
            lines.append("")
        lines += [LEGEND.replace("\n", " "), ""]
    if len({row.label for row in rows}) > 1:
        lines += ["![solve rate vs generated tokens](modes_tokens.png)", ""]
    return lines


def _cost_cell(entry: CostEntry) -> str:
    """An eval at a cost level: its rate with the Wilson interval where read exactly (`eval.compare.entry_text`)."""
    if entry.measured and not entry.interpolated and entry.solved is not None and entry.cost is not None:
        return f"{rate_text(entry.solved, entry.total)} @{entry.budget} · {cost_text(entry.cost)}"
    return entry_text(entry)


def _provenance_markdown(report: Report) -> list[str]:
    """Where every eval's figures come from: its model, data, settings digest and software."""
    if not report.provenance:
        return []
    lines = ["## Provenance", "", "Each eval result records what produced it (its eval.json; the inputs' digests are "
             "in report.json, `inputs`).", "",
             "| eval | model | value model | benchmark | pass@N, mode | seed | config digest | commit | burnqed | Lean "
             "| written |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in report.provenance:
        lean = p.lean_backend + (f" (Pantograph {p.pantograph_version})" if p.pantograph_version else "")
        lines.append(f"| iteration {p.iteration} {p.arm} | `{p.model}` | {_cell(p.ebm and f'`{p.ebm}`')} | "
                     f"{p.benchmark} ({p.total}) | {p.pass_n}, {p.mode} | {_cell(p.seed)} | `{p.config_digest}` | "
                     f"{_cell(p.git_commit and p.git_commit[:12])} | {_cell(p.burnqed_version)} | {lean} | "
                     f"{p.timestamp:%Y-%m-%d %H:%M} UTC |")
    lines.append("")
    trained = [s for s in report.training_summaries if s.sft_method is not None]
    if trained:
        lines += ["Policies trained (sft.json): " + "; ".join(
            f"iteration {s.iteration}: {s.sft_method} from "
            + (f"`{s.sft_init}`" if s.sft_init else s.sft_base_model or "the tiny embedded model")
            + f", seed {s.sft_seed}" for s in trained) + ".", ""]
    return lines


def _decontamination_markdown(report: Report) -> list[str]:
    """What the training statements were compared with, and each training theorem that restates a benchmark theorem
    (dropped by the data preparation, or trained on: found by an eval)."""
    if not report.decontamination and not report.overlaps:
        return []
    lines = ["## Decontamination", "", "Training statements compared with the benchmarks in normal form (docs/data.md, "
             "Decontamination):", ""] + [f"- {line}" for line in report.decontamination] + [""]
    if report.overlaps:
        lines += ["| benchmark theorem | training theorem | route | trained on | listed in |", "|---|---|---|---|---|"]
        lines += [f"| {o.benchmark} ({o.benchmark_source}) | {o.training} ({o.training_source}) | {o.route} | "
                  f"{'no: dropped' if o.dropped else '**yes**'} | `{o.listed_in}` |" for o in report.overlaps]
        lines.append("")
    return lines


def _gates_markdown(report: Report) -> list[str]:
    """The gates and the decision (go, no-go, or none when a blocking gate could not be measured) with the gate that
    decided it."""
    lines = ["## Go / no-go", "",
             "Blocking gates: the baseline's floor (`pipeline.gate_min_rate`) and the gain over the step before on the "
             "same theorems (iteration i-1's main eval, the base eval for iteration 0): newly solved minus lost over "
             "the theorems, at least `pipeline.gate_min_gain` (with `pipeline.gate_gain_interval`, the lower end of "
             "its 95% interval), and at most `pipeline.gate_max_lost` lost when that is set. The interval is "
             "Newcombe's paired hybrid score interval: the two rates' Wilson intervals combined with their "
             "correlation over the same theorems.", ""]
    for gate in report.gates:
        mark = "PASS" if gate.passed else ("NOT MEASURED" if not gate.measured else "STOP" if gate.blocking else "WARN")
        lines.append(f"- **{mark}** {gate.name}: {gate.detail}")
    outcome, _, rest = report.decision.partition(" ")  # "go:", "no-go" (by the … gate:) or "none:"
    colon = ":" if outcome.endswith(":") else ""
    return [*lines, "", f"Decision: **{outcome.removesuffix(':')}**{colon} {rest}", ""]


