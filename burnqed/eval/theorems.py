"""Per-theorem results of an eval, for a reader: what happened to each theorem and what it cost.

    detail = failure_detail(theorem_result)       # "Lean could not start the goal: unknown identifier 'foo'"
    print(render_theorem_table(load_eval_result("results/iter_0.json", store=store)))   # `burnqed eval --show-theorems`

`failure_detail` turns a search's failure reason and counters into one sentence (recorded as `PerTheorem.detail`
in eval results); `render_theorem_table` prints one row per theorem: solved (at which budget) or why not, then its
edges, generated tokens and where its time went (policy, Lean, value model).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from burnqed.records import FailureReason, TheoremResult, first_line

if TYPE_CHECKING:
    from burnqed.eval.results import EvalResult


def failure_detail(attempt: TheoremResult) -> str:
    """One sentence on why `attempt` ended without a proof (its failure reason, made concrete)."""
    reason = attempt.failure_reason
    extra = first_line(attempt.detail) if attempt.detail else ""
    if reason is FailureReason.START_ERROR:
        return f"Lean could not start the goal: {extra or 'no message'}"
    if reason is FailureReason.EXHAUSTED:
        if attempt.edges == 0 and attempt.proofs_sampled == 0:
            return "the policy proposed nothing: no tactic or proof to try"
        tried = f"{attempt.edges} tactics" if attempt.edges else f"{attempt.proofs_sampled} proofs"
        return f"nothing left to try: {tried} tried, none led to a proof" + (f" ({extra})" if extra else "")
    if reason is FailureReason.MAX_NODES:
        return f"budget reached: {attempt.nodes_expanded} expansions, {attempt.edges} tactics tried"
    if reason is FailureReason.MAX_PROOFS:
        return f"budget reached: {attempt.proofs_sampled} proofs sampled, none verified"
    if reason is FailureReason.MAX_ROUNDS:
        return f"round limit reached: {attempt.nodes_expanded} rounds (search.max_rounds)"
    if reason is FailureReason.TIMEOUT:
        return f"time limit reached after {attempt.time_s:.1f} s (search.timeout_s), {attempt.edges} tactics tried"
    if reason is FailureReason.LEAN_ERROR:
        return f"the Lean worker failed: {extra or 'no message'}"
    if reason is None:
        return "no proof and no reason recorded"
    return extra or reason.value


def one_line(proof: str, limit: int = 100) -> str:
    """A proof's text on one line: its tactics after `:= by`, one per line joined with "; ", cut at `limit`."""
    body = proof.split(":= by", 1)[-1]
    text = "; ".join(" ".join(line.split()) for line in body.splitlines() if line.strip())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def render_theorem_table(result: EvalResult, width: int = 160) -> str:
    """One row per theorem (solved first, then the rest in benchmark order) and the solved names."""
    from rich.table import Table

    from burnqed.eval.results import to_text

    largest = result.budgets[-1].budget
    table = Table(title=f"{result.benchmark}: per theorem at budget {largest} {result.budget_unit} "
                  f"(pass@{result.pass_n})", title_justify="left")
    for header, justify in (("theorem", "left"), ("result", "left"), ("edges", "right"), ("tokens", "right"),
                            ("policy s", "right"), ("Lean s", "right"), ("value s", "right"),
                            ("detail", "left")):
        table.add_column(header, justify=justify)  # type: ignore[arg-type]
    ordered = [t for t in result.per_theorem if t.proved] + [t for t in result.per_theorem if not t.proved]
    for theorem in ordered:
        if theorem.proved:
            outcome = f"proved @{theorem.budget_at_proof}"
            detail = one_line(theorem.proof or "")
        else:
            outcome = theorem.failure_reason.value if theorem.failure_reason else "unsolved"
            detail = theorem.detail or ""
        table.add_row(theorem.name, outcome, "–" if theorem.edges is None else str(theorem.edges),
                      "–" if theorem.tokens is None else str(theorem.tokens), _seconds(theorem.policy_s),
                      _seconds(theorem.lean_s), _seconds(theorem.value_s), detail)
    solved = ", ".join(result.solved_names) or "none"
    return to_text(table, width) + f"solved ({result.cumulative_solved}/{result.total}): {solved}\n"
