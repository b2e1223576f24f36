"""The stages that run the engines: each reads its inputs by URI and writes one output atomically.

`search` (`burnqed search`: theorems in, a trajectory prefix out), `merge` (`merge-trajectories`), `summary` (what a
trajectory prefix holds), `train_ebm` with `ebm_fit` and `ebm_joint` (`burnqed train-ebm`). The data, SFT and eval
stages are packages of their own (`burnqed.data`, `burnqed.sft`, `burnqed.eval`).
"""
