"""The value model (EBM, docs/ebm.md): a goal-conditioned energy head over the policy's mean-pooled hidden states.

    burnqed train-ebm --trajectories runs/iter_0/trajectories --output runs/iter_1/ebm
    burnqed search --ebm runs/iter_1/ebm --output runs/iter_1/search/shard-0

Modules: `formats` (file formats), `encoder_identity` (which encoder produced an embedding), `cache` (resumable
Parquet embedding cache), `sampling` (states, positives and negatives from trajectories), `head` (the energy head),
`losses`, `metrics`, `scorer` (the `ValueFn` search uses); the `train-ebm` stage is `burnqed.stages.train_ebm`.
Importing this package is cheap: torch is imported only by `head`, `losses`, `metrics` and `scorer`, which the
commands import inside the functions that need them.
"""
