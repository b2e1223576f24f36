"""The iteration report's sections over the evals and the gates (`report.document.SECTIONS` lists them with those
over what the iterations ran, `report.runs`, and the self-contained ones, `report.repairs` and the like, in
report.md's order): each one's build from what the report read (`report.reading`), its report.md lines and its
plots (`report.plots`).

    values = LEARNING_SECTION.values(inputs)             # {"learning": [...]}
    lines = LEARNING_SECTION.markdown(LEARNING_SECTION.shown(report))

Every solve rate is written `solved/n (rate, 95% Wilson interval)` (`result.rate_text`).
"""

from __future__ import annotations

from burnqed.eval.compare import LEGEND, Comparison, CostEntry, cost_text, delta_text, entry_text
from burnqed.eval.result import BudgetRow, EvalResult, rate_text
from burnqed.records.theorem import SkippedDeclaration
from burnqed.report.gates import go_no_go
from burnqed.report.plots import plot_mode_tokens, plot_solve_rate
from burnqed.report.reading import (
    _arm_rows,
    _ceiling,
    _changes,
    _decontamination,
    _learning,
    _mode_comparison,
    _mode_rows,
    _not_compared,
    _proofs,
    _unsolved,
    known_false,
    solve_curve,
)
from burnqed.report.section import ReportInputs, ReportSection
from burnqed.report.tables import (
    ArmRow,
    BaseArm,
    CeilingRow,
    Change,
    CostRow,
    CurvePoint,
    Gate,
    LearningRow,
    ModeRow,
    OverlapRow,
    ProofRow,
    Provenance,
    UnsolvedRow,
    decision,
)

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


def _figures_markdown(report_rows: list[ArmRow]) -> list[str]:
    """Every eval arm's per-budget figures (`BudgetRow.figures`, declared once in eval.result): what each budget
    used and cost."""
    figures = BudgetRow.figures()
    rows = [row for row in report_rows if row.figures]
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


def _rates_markdown(rows: list[ArmRow]) -> list[str]:
    """Every arm of every iteration at every budget."""
    lines = ["## Solve rate per budget", ""]
    if not rows:
        return [*lines, "No eval results are published yet.", ""]
    budgets = sorted({row.budget for row in rows})
    lines.append("| iteration | arm | " + " | ".join(f"budget {b}" for b in budgets) + " |")
    lines.append("|---|---|" + "---|" * len(budgets))
    for key in sorted({(row.iteration, row.arm) for row in rows}):
        cells = []
        for budget in budgets:
            row = next((r for r in rows if (r.iteration, r.arm) == key and r.budget == budget), None)
            cells.append("–" if row is None else row.text)
        lines.append(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + " |")
    return [*lines, "", "![solve rate against budget](solve_rate.png)", ""]


def _learning_markdown(rows: list[LearningRow], provenance: list[Provenance]) -> list[str]:
    """The learning table: each step's solve rate per group, on the benchmark the evals measured (their provenance)."""
    steps = list(dict.fromkeys(row.step for row in rows))
    groups = list(dict.fromkeys(row.group for row in rows))
    budget = rows[-1].budget
    benchmarks = list(dict.fromkeys(f"`{p.benchmark}` ({p.total} theorems)" for p in provenance))
    of = f" of {' and '.join(benchmarks)}" if benchmarks else ""
    lines = ["## Learning", "", f"Solve rate{of} at the largest budget ({budget}); each iteration's main eval "
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


def _base_arm_markdown(arm: BaseArm | None) -> list[str]:
    """One line under the learning table: which model the base arm is."""
    if arm is None:
        return []
    text = _base_arm_text(arm)
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


def _unsolved_markdown(rows: list[UnsolvedRow], ceiling_rows: list[CeilingRow], iteration: int) -> list[str]:
    """The theorems the iteration's main eval did not prove: how many per source and reason, with the known-false
    ones and the reachable ceiling, what the budget-used figure is, then each one."""
    step = f"iteration {iteration}"
    if not rows:
        return _ceiling_markdown(ceiling_rows, rows)
    ceiling = {row.group: row for row in ceiling_rows}
    lines = [f"## Unsolved theorems of {step}", "",
             f"{len(rows)} theorems the main eval did not prove at its largest budget, by source and failure reason "
             "(docs/search.md: `exhausted` = nothing left to try, `max_nodes`/`max_proofs` = the budget was spent, "
             "`timeout` = the time limit, `start_error` = Lean refused the statement).", "",
             *_ceiling_markdown(ceiling_rows, rows),
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
    lines += ["", *_budget_used_note(rows), ""]
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


def _not_evaluated_markdown(not_evaluated: list[SkippedDeclaration], iteration: int) -> list[str]:
    """The benchmark's declarations the iteration's main eval did not evaluate: where, which and why."""
    if not not_evaluated:
        return []
    lines = [f"## Declarations not evaluated in iteration {iteration}", "",
             f"{len(not_evaluated)} declarations of the benchmark are none of its theorems, so no rate above "
             "counts them:", "", "| where | declaration | reason | detail |", "|---|---|---|---|"]
    lines += [f"| `{_escaped(skipped.where)}` | {_escaped(skipped.name or '–')} | {skipped.reason} | "
              f"{_escaped(skipped.detail)} |" for skipped in not_evaluated]
    return [*lines, ""]


def _ceiling_markdown(ceiling: list[CeilingRow], unsolved: list[UnsolvedRow]) -> list[str]:
    """The reachable ceiling when the benchmark holds known-false theorems (the world's traps), and an alarm for any
    the main eval proved."""
    whole = next((row for row in ceiling if row.group == "all"), None)
    if whole is None or not whole.known_false:
        return []
    proved = sorted(set(whole.known_false) - {row.theorem for row in unsolved})
    lines = [f"{len(whole.known_false)} of the {whole.total} theorems are known to be false (the generated world's "
             "traps, false by construction with a recorded counterexample: `burnqed world stats`), marked **known "
             f"false** below: no sound prover solves them, so the reachable ceiling is {whole.reachable} of "
             f"{whole.total}, of which the main eval solved {whole.solved}.", ""]
    if proved:
        lines += [f"**Proved although known to be false: {_names(proved)}.** A sound Lean never accepts a proof of a "
                  "false statement: check `lean.command` and the soundness rules (docs/lean.md).", ""]
    return lines


def _budget_used_note(rows: list[UnsolvedRow]) -> list[str]:
    """What the unsolved theorems' budget-used figure is, and why a search stops short of the budget."""
    from burnqed.config.search import SearchConfig

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


def _mode_section(modes: list[ModeRow], comparison: Comparison | None, iteration: int) -> list[str]:
    """report.md's modes section: every eval of the iteration at each budget with its cost, then the evals at equal
    generated tokens and at equal Lean calls per theorem (`eval.compare`'s reading)."""
    rows = [row for row in modes if row.iteration == iteration]
    if not rows:
        return []
    lines = ["## Search modes at equal tokens", "",
             "| eval | budget | solved | tokens/theorem | Lean calls |", "|---|---|---|---|---|"]
    for row in rows:
        tokens = "–" if row.avg_tokens is None else f"{row.avg_tokens:.0f}"
        lines.append(f"| {row.label} | {row.budget} {row.unit} | {row.text} | {tokens} | {_cell(row.lean_calls)} |")
    lines.append("")
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


def _decontamination_markdown(overlaps: list[OverlapRow], compared: list[str]) -> list[str]:
    """What the training statements were compared with, and each training theorem that restates a benchmark theorem
    (dropped by the data preparation, or trained on: found by an eval)."""
    if not compared and not overlaps:
        return []
    lines = ["## Decontamination", "", "Training statements compared with the benchmarks in normal form (docs/data.md, "
             "Decontamination):", ""] + [f"- {line}" for line in compared] + [""]
    if overlaps:
        lines += ["| benchmark theorem | training theorem | route | trained on | listed in |", "|---|---|---|---|---|"]
        lines += [f"| {o.benchmark} ({o.benchmark_source}) | {o.training} ({o.training_source}) | {o.route} | "
                  f"{'no: dropped' if o.dropped else '**yes**'} | `{o.listed_in}` |" for o in overlaps]
        lines.append("")
    return lines


def _gates_markdown(gates: list[Gate]) -> list[str]:
    """The gates and the decision (go, no-go, or none when a blocking gate could not be measured) with the gate that
    decided it."""
    lines = ["## Go / no-go", "",
             "Blocking gates: the baseline's floor (`pipeline.gate_min_rate`) and the gain over the step before on the "
             "same theorems (iteration i-1's main eval, the base eval for iteration 0): newly solved minus lost over "
             "the theorems, at least `pipeline.gate_min_gain` (with `pipeline.gate_gain_interval`, the lower end of "
             "its 95% interval), and at most `pipeline.gate_max_lost` lost when that is set. The interval is "
             "Newcombe's paired hybrid score interval: the two rates' Wilson intervals combined with their "
             "correlation over the same theorems.", ""]
    for gate in gates:
        mark = "PASS" if gate.passed else ("NOT MEASURED" if not gate.measured else "STOP" if gate.blocking else "WARN")
        lines.append(f"- **{mark}** {gate.name}: {gate.detail}")
    outcome, _, rest = decision(gates).partition(" ")  # "go:", "no-go" (by the … gate:) or "none:"
    colon = ":" if outcome.endswith(":") else ""
    return [*lines, "", f"Decision: **{outcome.removesuffix(':')}**{colon} {rest}", ""]


def _not_compared_markdown(notes: list[str]) -> list[str]:
    """The pairs of evals shown side by side but not compared, each with why."""
    if not notes:
        return []
    lines = ["## Not compared", "", "These evals are shown side by side but are not the same measurement, so no "
             "gain, gate or new proof is read between them:", ""]
    return lines + [f"- {note}" for note in notes] + [""]


# -- builds: each section's fields from what the report read (`ReportInputs`) ----------------------------------------

def _base(inputs: ReportInputs) -> EvalResult | None:
    """The base policy's eval, when published."""
    return next((read.result for read in inputs.read if read.arm == "base"), None)


def _results(inputs: ReportInputs) -> dict[tuple[int, str], EvalResult]:
    """Every iteration's evals by (iteration, arm), the later of two with one key winning."""
    return {(read.iteration, read.arm): read.result for read in inputs.read if read.arm != "base"}


def _main_arm(inputs: ReportInputs) -> str | None:
    """The arm of the reported iteration's main eval, None when it is not published."""
    return next((read.arm for read in inputs.read if read.step == f"iteration {inputs.iteration}"), None)


def _current(inputs: ReportInputs) -> EvalResult | None:
    """The reported iteration's main eval."""
    main_arm = _main_arm(inputs)
    return _results(inputs).get((inputs.iteration, main_arm)) if main_arm is not None else None


def _rows(inputs: ReportInputs) -> list[ArmRow]:
    return [row for read in inputs.read for row in _arm_rows(read.result, read.iteration, read.arm)]


def _gates(inputs: ReportInputs) -> list[Gate]:
    return go_no_go(_rows(inputs), inputs.iteration, inputs.pipeline, _results(inputs), _base(inputs))


def _build_rates(inputs: ReportInputs) -> tuple[list[ArmRow], list[CurvePoint]]:
    curves = [point for read in inputs.read for point in solve_curve(read.result, read.iteration, read.arm)]
    return _rows(inputs), curves


def _build_not_compared(inputs: ReportInputs) -> list[str]:
    return _not_compared(_learning(list(inputs.steps)), _gates(inputs), list(inputs.evals), inputs.iteration)


def _build_unsolved(inputs: ReportInputs) -> tuple[list[UnsolvedRow], list[CeilingRow]]:
    current = _current(inputs)
    if current is None:
        return [], []
    false = known_false(current)
    return _unsolved(current, false), _ceiling(current, false)


def _build_not_evaluated(inputs: ReportInputs) -> list[SkippedDeclaration]:
    current = _current(inputs)
    return current.not_evaluated if current is not None else []


def _build_modes(inputs: ReportInputs) -> tuple[list[ModeRow], Comparison | None]:
    return (_mode_rows(inputs.at, inputs.iteration, inputs.pipeline, inputs.load),
            _mode_comparison(list(inputs.evals)))


# -- the sections, in report.md's order (`report.document.SECTIONS` places the self-contained ones among them) -----

NOT_COMPARED_SECTION: ReportSection[list[str]] = ReportSection(
    field="not_compared", build=_build_not_compared, markdown=_not_compared_markdown)


RATES_SECTION: ReportSection[tuple[list[ArmRow], list[CurvePoint]],
                             tuple[list[ArmRow], list[CurvePoint], list[CostRow]]] = ReportSection(
    field=("rows", "curves"), build=_build_rates, reads=("costs",),
    markdown=lambda shown: _rates_markdown(shown[0]) + _figures_markdown(shown[0]),
    plots=lambda shown, folder: plot_solve_rate(shown[1], shown[0], shown[2], folder / "solve_rate.png"))


LEARNING_SECTION: ReportSection[list[LearningRow], tuple[list[LearningRow], BaseArm | None, list[Provenance]]] = \
    ReportSection(field="learning", build=lambda inputs: _learning(list(inputs.steps)),
                  reads=("base_arm", "provenance"),
                  markdown=lambda shown: _learning_markdown(shown[0], shown[2]) + _base_arm_markdown(shown[1])
                  if shown[0] else [])


CHANGES_SECTION: ReportSection[list[Change]] = ReportSection(
    field="changes", build=lambda inputs: _changes(inputs.steps), markdown=_changes_markdown)


UNSOLVED_SECTION: ReportSection[tuple[list[UnsolvedRow], list[CeilingRow]],
                                tuple[list[UnsolvedRow], list[CeilingRow], int]] = ReportSection(
    field=("unsolved", "ceiling"), build=_build_unsolved, reads=("iteration",),
    markdown=lambda shown: _unsolved_markdown(*shown))


NOT_EVALUATED_SECTION: ReportSection[list[SkippedDeclaration], tuple[list[SkippedDeclaration], int]] = ReportSection(
    field="not_evaluated", build=_build_not_evaluated, reads=("iteration",),
    markdown=lambda shown: _not_evaluated_markdown(*shown))


PROOFS_SECTION: ReportSection[list[ProofRow], tuple[list[ProofRow], int, list[LearningRow]]] = ReportSection(
    field="proofs", build=lambda inputs: _proofs(inputs.steps, _changes(inputs.steps)),
    reads=("iteration", "learning"), markdown=lambda shown: _proofs_markdown(*shown))


MODES_SECTION: ReportSection[tuple[list[ModeRow], Comparison | None],
                             tuple[list[ModeRow], Comparison | None, int]] = ReportSection(
    field=("modes", "mode_comparison"), build=_build_modes, reads=("iteration",),
    markdown=lambda shown: _mode_section(*shown),
    plots=lambda shown, folder: plot_mode_tokens(shown[0], shown[2], folder / "modes_tokens.png"))


DECONTAMINATION_SECTION: ReportSection[tuple[list[OverlapRow], list[str]]] = ReportSection(
    field=("overlaps", "decontamination"),
    build=lambda inputs: _decontamination(inputs.at, inputs.load, inputs.read_first, inputs.store),
    markdown=lambda shown: _decontamination_markdown(*shown))


GATES_SECTION: ReportSection[list[Gate]] = ReportSection(field="gates", build=_gates, markdown=_gates_markdown)
