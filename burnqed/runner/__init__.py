"""An iteration as data and its run on this machine (docs/pipeline.md).

`plan.build_iteration` lists the stages (each a `burnqed …` command line, its inputs and outputs);
`local.LocalRunner` runs them as subprocesses; `reuse` decides whether a finished output may be reused. The Argo
workflows (`burnqed.workflows`) render the same stages for the cluster.
"""
