"""One GRPO step's close (`rl.grpo_step.close_step`): once TRL has logged the step's loss, the step the reward saw is
one log entry in the journal and one progress line, from the reward's tallies and TRL's loss and KL."""

from __future__ import annotations

from unittest.mock import patch

from burnqed.rl.grpo_step import Journal, StepClock, StepTally, close_step
from burnqed.sft.launch import World


def tally(step: int) -> StepTally:
    # 4 completions of 2 prompts, one verified; the reward was called 2.5 s into the step
    return StepTally(step=step, rewards=[1.0, 0.0, 0.0, 0.0], prompts=2, solved=1, tokens=96, lean_s=0.75,
                     truncated=1, sampled_at=102.5)


def test_a_step_is_closed_into_one_log_entry_and_one_line() -> None:
    journal = Journal(pending=tally(3))
    lines: list[str] = []
    clock = StepClock(began=100.0, started=90.0, first=1, total=5)
    with patch("burnqed.rl.grpo_step.time.monotonic", return_value=104.0):
        entry = close_step(journal, 3, {"loss": 0.5, "kl": 0.125}, world=World(), echo=lines.append, clock=clock)
    assert entry is not None and journal.steps == [entry] and journal.pending is None
    assert entry.model_dump(exclude_none=True) == {
        "step": 3, "mean_reward": 0.25, "solved_share": 0.5, "verified": 1, "completions": 4, "kl": 0.125,
        "loss": 0.5, "tokens_generated": 96, "lean_seconds": 0.75, "wall_seconds": 4.0, "generation_seconds": 2.5,
        "truncated": 1}
    # 2 steps done in 14 s since the run started from step 1: the 2 left take 14 s
    assert lines == ["rl: step 3/5 reward 0.250 solved 1/2 loss 0.5000 kl 0.1250 96 tokens (1 cut), sampled in 2.5s, "
                     "Lean 0.8s, 4.0s ETA 14s"]


def test_a_step_the_reward_did_not_see_is_not_logged() -> None:
    journal = Journal(pending=tally(2))
    lines: list[str] = []
    clock = StepClock(began=100.0, started=90.0, first=0, total=5)
    assert close_step(journal, 3, {"loss": 0.5}, world=World(), echo=lines.append, clock=clock) is None
    assert journal.steps == [] and lines == [] and journal.pending == tally(2)
