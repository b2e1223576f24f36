"""The value model (EBM, docs/ebm.md): a goal-conditioned energy head over the policy's mean-pooled hidden states.

    burnqed train-ebm --trajectories runs/iter_0/trajectories --output runs/iter_1/ebm
    burnqed search --ebm runs/iter_1/ebm --output runs/iter_1/search/shard-0

Modules: `records` (file formats), `identity` (which encoder produced an embedding), `cache` (resumable
Parquet embedding cache), `sampling` (states, positives and negatives from trajectories), `head` (the
energy head), `losses`, `metrics`, `train` (the `train-ebm` stage), `scorer` (the `ValueFn` search uses).
See docs/ebm.md. Importing this package is cheap: torch is imported only by `head`, `losses`, `metrics`,
`train` and `scorer`, which the commands import inside the functions that need them.
"""
