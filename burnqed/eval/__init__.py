"""Evaluation: the result document (`result`, the provenance it records: `metadata`), pass@N over budgets (`pass_at`),
its tables (`rendering`, `per_theorem`), comparisons between evals (`compare`), the eval stage (`run`: its passes;
`identity`: its settings and identity; `resume`: an interrupted eval continued; `arms`: both arms of one `burnqed eval`;
`stage`: `burnqed eval` as one call) and the joint-training study (`joint_study`). The iteration report is
`burnqed.report`.

Scoring and rendering are pure: the search runner hands in per-attempt `TheoremResult`s.
"""

from __future__ import annotations

from burnqed.eval.compare import BudgetComparison, CompareEntry, Comparison, compare_results, render_comparison
from burnqed.eval.metadata import config_digest, git_commit
from burnqed.eval.pass_at import build_eval_result
from burnqed.eval.rendering import render_eval_table
from burnqed.eval.result import BudgetRow, EvalResult, PerTheorem, load_eval_result, write_eval_result

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
    "load_eval_result",
    "render_comparison",
    "render_eval_table",
    "write_eval_result",
]
