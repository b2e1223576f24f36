"""Reinforcement learning from Lean's verdict: `burnqed rl`, documented in docs/training.md ("GRPO stage", "Reward
from Lean's verdict"). Import from the module that holds a name: this package re-exports nothing.

    grpo.py       the stage: its request and settings, the theorems it prompts, the run (`run_rl`) and its output
    grpo_step.py  one step as it is recorded: the reward TRL calls, the journal of rollouts, the gather of the
                  data-parallel processes, the step's log line and checkpoint
    grpo_trainer.py  TRL's GRPOTrainer as the stage builds it (RlConfig's fields under GRPOConfig's names)
    records.py    the saved documents: rl.json, rl-log.jsonl, rollouts.jsonl
    reward.py     the reward: 1.0 for a completion of a theorem's whole prompt that verifies as a counted whole proof
                  (guard, compile, axioms, kernel recheck), else 0.0; through the Lean pool, cached; TRL's calling
                  convention (`LeanReward`)
    failures.py   the failed proofs of earlier searches whose repair prompts the rows serve
    rollouts.py   the rollouts as a whole-mode trajectory prefix
    served.py     the served rollout engine (rl.rollout_engine = 'served')
"""
