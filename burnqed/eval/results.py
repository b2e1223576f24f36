"""The old single module of eval results, kept so that the modules still importing it (`eval/report.py`,
`benchmarks/search_modes.py`) keep working while they are being refactored: it re-exports the schema
(`eval.schema`), the pass@N scoring (`eval.scoring`) and the tables (`eval.rendering`). New code imports from those
three; this module goes when its last importer has moved.
"""

from __future__ import annotations

from burnqed.eval.rendering import render_eval_table, to_text
from burnqed.eval.schema import (
    MINILEAN_MODULE,
    REPLAY_MODULE,
    UNKNOWN_REASON,
    BudgetRow,
    BudgetUnit,
    EvalResult,
    EvalSettings,
    GroupRow,
    PerTheorem,
    budget_unit,
    config_digest,
    git_commit,
    lean_backend_label,
    load_eval_result,
    write_eval_result,
)
from burnqed.eval.scoring import build_eval_result, failure_detail, validate_budgets

__all__ = [
    "MINILEAN_MODULE",
    "REPLAY_MODULE",
    "UNKNOWN_REASON",
    "BudgetRow",
    "BudgetUnit",
    "EvalResult",
    "EvalSettings",
    "GroupRow",
    "PerTheorem",
    "budget_unit",
    "build_eval_result",
    "config_digest",
    "failure_detail",
    "git_commit",
    "lean_backend_label",
    "load_eval_result",
    "render_eval_table",
    "to_text",
    "validate_budgets",
    "write_eval_result",
]
