"""Evaluation: pass@N over expansion budgets (`results`), and comparisons between evals (`compare`).

Pure scoring and rendering: the search runner hands in per-attempt `TheoremResult`s.
"""

from __future__ import annotations

from burnqed.eval.compare import BudgetComparison, CompareEntry, Comparison, compare_results, render_comparison
from burnqed.eval.results import (
    BudgetRow,
    EvalResult,
    PerTheorem,
    build_eval_result,
    config_digest,
    git_commit,
    lean_backend_label,
    load_eval_result,
    render_eval_table,
    write_eval_result,
)

__all__ = [
    "BudgetComparison",
    "BudgetRow",
    "CompareEntry",
    "Comparison",
    "EvalResult",
    "PerTheorem",
    "build_eval_result",
    "compare_results",
    "config_digest",
    "git_commit",
    "lean_backend_label",
    "load_eval_result",
    "render_comparison",
    "render_eval_table",
    "write_eval_result",
]
