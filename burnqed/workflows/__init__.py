"""burnqed's Argo workflows, one file per workflow (docs/cluster.md), built with Hera from `burnqed.runner.iteration`.

    burnqed render iteration --output manifests/rendered     # WorkflowTemplates as YAML (--check validates them)
    burnqed submit iteration --iter 2 --dry-run               # the Workflow `submit` would create

`burnqed render | submit` load this folder by path (`--workflows DIR`, like a DAG folder). Every public module
(`iteration.py`, `baseline.py`, `smoke.py`, `eval.py`) defines the same two functions:

    templates(cfg: Config) -> list[WorkflowTemplate]        what the Helm chart installs
    workflow(cfg: Config, *, iteration: int, parameters: Mapping[str, str]) -> Workflow   what `submit` creates

Modules whose name starts with `_` are helpers, not workflows. Workflow files import only `burnqed.runner.iteration`,
`burnqed.config`, Hera, these helpers and the pod rules in `burnqed.cluster` (`retry`, `memory`); no stage
internals, no business logic: every step is a container running `burnqed <stage> …`.
"""
