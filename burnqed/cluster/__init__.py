"""The cluster edge (docs/cluster.md; the commands are in burnqed/commands/cluster.py): render the Hera workflow
files to Argo YAML, validate it offline, submit it to the Argo Server, and fetch artifacts inside pods. Hera,
kubernetes and jsonschema load inside the functions that need them.

    render.py     load burnqed/workflows/NAME.py by path, build WorkflowTemplates / Workflows, write YAML
    validate.py   Argo JSON schema (kind-specific, strict) and kubernetes-validate --strict
    retry.py      the retry expression of every step: interruptions yes, deterministic failures no
    memory.py     the memory plan of Lean pods, checked at render time (Kubernetes quantities)
    argo.py       Argo Server API client (httpx); kube.py the Kubernetes API connection
    preflight.py  `burnqed cluster check`: what a submit needs, read through the Kubernetes API
    checkreport.py  its report: a row per thing a submit needs, with its verdict and fix
    argocheck.py  its Argo Server rows: reachable where submit looks, an auth mode that lets submit in
    fetch.py      `burnqed fetch URI DIR`: download a model folder for the SGLang sidecar, ready file last
"""
