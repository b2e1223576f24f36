"""The cluster edge (design §3 Cluster): render the Hera workflow files to Argo YAML, validate it offline, submit
it to the Argo Server, and fetch artifacts inside pods.

    render.py    load workflows/NAME.py by path, build WorkflowTemplates / Workflows, write YAML
    validate.py  Argo JSON schema (kind-specific, strict) and kubernetes-validate --strict
    argo.py      Argo Server API client (httpx): create a Workflow, submit a WorkflowTemplate
    fetch.py     `burnqed fetch URI DIR`: download a model folder for the SGLang sidecar, ready file last

Commands: `burnqed render | submit | fetch` (burnqed/commands/cluster.py). Nothing heavy is imported here:
Hera, kubernetes and jsonschema load inside the functions that need them.
"""
