"""Evaluation: the result document (`result`, the provenance it records: `metadata`), pass@N over budgets (`pass_at`),
its tables (`rendering`, `per_theorem`), comparisons between evals (`compare`), the eval stage (`run`: its passes;
`identity`: its settings and identity; `resume`: an interrupted eval continued; `arms`: both arms of one `burnqed eval`;
`stage`: `burnqed eval` as one call) and the joint-training study (`joint_study`). The iteration report is
`burnqed.report`.

Scoring and rendering are pure: the search runner hands in per-attempt `TheoremResult`s. Import from the module that
holds a name: this package re-exports nothing, so that importing one of its modules (`burnqed start`'s `best_so_far`)
does not load the others (the result document's search modes and pyarrow).
"""
