"""Reinforcement learning from Lean's verdict, documented in docs/training.md ("Reward from Lean's verdict"). Import
from the module that holds a name: this package re-exports nothing.

    reward.py    the reward: 1.0 for a completion of a theorem's whole prompt that verifies as a counted whole proof
                 (guard, compile, axioms, kernel recheck), else 0.0; through the Lean pool, cached; TRL's calling
                 convention (`LeanReward`)
"""
