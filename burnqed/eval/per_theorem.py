"""Per-theorem results of an eval, for a reader: what happened to each theorem and what it cost.

    print(render_theorem_table(load_eval_result("results/iter_0.json", store=store)))   # `burnqed eval --show-theorems`

`render_theorem_table` prints one row per theorem: solved (at which budget) or why not (`PerTheorem.detail`, written
by `eval.pass_at.failure_detail`), then its edges, generated tokens and where its time went (policy, Lean, value
model). `render_not_evaluated` lists the benchmark's declarations that were not evaluated (`EvalResult.
not_evaluated`), each with its file, line and reason; every eval prints it under its table.
"""

from __future__ import annotations

from burnqed.eval.rendering import to_text
from burnqed.eval.result import EvalResult


def one_line(proof: str, limit: int = 100) -> str:
    """A proof's text on one line: its tactics after `:= by`, one per line joined with "; ", cut at `limit`."""
    body = proof.split(":= by", 1)[-1]
    text = "; ".join(" ".join(line.split()) for line in body.splitlines() if line.strip())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def answer_line(answer: str, limit: int = 60, *, check: str | None = None, reference: str | None = None) -> str:
    """An answer on one line, `answer: VALUE`, cut at `limit` characters of its value (and of the reference's); with
    the answer check (`PerTheorem.answer_check`) its verdict and the reference beside it: `answer: 100 (different from
    the reference 5)`, `answer: 2 (equal to the reference)`, `answer: x (undecided; the reference: 2)`."""
    line = "answer: " + _cut(answer, limit)
    if check is None:
        return line
    shown = _cut(reference, limit) if reference is not None else ""
    if check == "equal":
        return f"{line} (equal to the reference)"
    if check == "different":
        return f"{line} (different from the reference {shown})"
    if check == "undecided":
        return f"{line} (undecided; the reference: {shown})"
    return f"{line} ({check})"


def _cut(value: str, limit: int) -> str:
    text = " ".join(value.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def render_theorem_table(result: EvalResult, width: int = 160) -> str:
    """One row per theorem (solved first, then the rest in benchmark order) and the solved names. Names, proofs,
    answers and details are text, not markup: `nlinarith [sq_nonneg x]` keeps its brackets."""
    from rich.markup import escape
    from rich.table import Table

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
            if theorem.answer is not None:
                detail = f"{answer_line(theorem.answer, check=theorem.answer_check, reference=theorem.reference)}; " \
                    f"{detail}"
        else:
            outcome = theorem.failure_reason.value if theorem.failure_reason else "unsolved"
            detail = theorem.detail or ""
        table.add_row(escape(theorem.name), outcome, "–" if theorem.edges is None else str(theorem.edges),
                      "–" if theorem.tokens is None else str(theorem.tokens), _seconds(theorem.policy_s),
                      _seconds(theorem.lean_s), _seconds(theorem.value_s), escape(detail))
    solved = ", ".join(result.solved_names) or "none"
    skipped = (f"; {len(result.not_evaluated)} more of the {result.declarations} declarations not evaluated"
               if result.not_evaluated else "")
    return to_text(table, width) + f"solved ({result.cumulative_solved}/{result.total}{skipped}): {solved}\n"


def render_not_evaluated(result: EvalResult, width: int = 160) -> str:
    """The benchmark's declarations that were not evaluated, one row each (where, name, reason, what was found);
    "" when every declaration was. Every cell is text, not markup."""
    from rich.markup import escape
    from rich.table import Table

    if not result.not_evaluated:
        return ""
    table = Table(title=f"{result.benchmark}: {len(result.not_evaluated)} of {result.declarations} declarations not "
                  "evaluated", title_justify="left")
    for header in ("where", "declaration", "reason", "detail"):
        table.add_column(header)
    for skipped in result.not_evaluated:
        table.add_row(escape(skipped.where), escape(skipped.name or "–"), skipped.reason, escape(skipped.detail))
    return to_text(table, width)
