"""burnqed's Argo workflows, one file per workflow (docs/cluster.md, "Workflows"), built with Hera from
`burnqed.runner.plan`; `burnqed render | submit` load this folder by path (`--workflows DIR`).

    burnqed render iteration --output manifests/rendered     # WorkflowTemplates as YAML (--check validates them)
    burnqed submit iteration --iter 2 --dry-run               # the Workflow `submit` would create

Every public module (`iteration.py`, `baseline.py`, `smoke.py`, `eval.py`; `_` marks a helper) defines:

    templates(cfg: Config) -> list[WorkflowTemplate]        what the Helm chart installs
    workflow(cfg: Config, *, iteration: int, parameters: Mapping[str, str]) -> Workflow   what `submit` creates

"""
