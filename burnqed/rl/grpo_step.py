"""One GRPO step as burnqed records it, in the order it happens. TRL's GRPOTrainer samples the step's completions and
calls the reward (`RecordingReward`: Lean's verdict on each, every completion kept as a rollout of the step in the
`Journal` and the step's tallies beside it); after its optimizer step TRL logs its loss, and the callback
(`RlCallback`) closes the step (`close_step`): the step of every data-parallel process gathered (`gather_step`), its
step-log entry and its progress line; at a checkpoint the callback saves the journal, seals and pushes the
checkpoint. TRL's own part of the step (sampling, advantages, the loss, the optimizer) runs between the two calls.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from burnqed.errors import InputError
from burnqed.lean.soundness import Verdict
from burnqed.rl.records import ROLLOUTS, STEP_LOG, Rollout, StepLog
from burnqed.rl.reward import LeanReward
from burnqed.rl.rollouts import rollout_feedback
from burnqed.search.repair import RepairSettings
from burnqed.sft.checkpoints import CheckpointStore
from burnqed.sft.launch import World, barrier

Echo = Callable[[str], None]


# ------------------------------------------------------------------------------------------------ journal


@dataclass(frozen=True, slots=True)
class StepTally:
    """What the reward saw of the step being computed, for its step-log entry: its rewards (in the completions'
    order), its distinct prompts and those with a verified completion, the completion tokens, the compiles' seconds,
    the cut completions, and when the reward was called (`time.monotonic`)."""

    step: int
    rewards: list[float]
    prompts: int
    solved: int
    tokens: int
    lean_s: float
    truncated: int
    sampled_at: float


@dataclass
class Journal:
    """The rollouts and the step log of a run; saved inside each checkpoint and read back on resume, so a resumed
    run's files hold exactly the steps of an uninterrupted one."""

    rollouts: list[Rollout] = field(default_factory=list)
    steps: list[StepLog] = field(default_factory=list)
    pending: StepTally | None = None  # the step being computed: its reward's tallies

    def save(self, folder: Path) -> None:
        _write_jsonl(folder / ROLLOUTS, self.rollouts)
        _write_jsonl(folder / STEP_LOG, self.steps)

    @classmethod
    def load(cls, folder: Path, step: int) -> Journal:
        """The journal a checkpoint at `step` holds (lines of later steps dropped)."""
        rollouts = [Rollout.model_validate_json(line) for line in _lines(folder / ROLLOUTS)]
        steps = [StepLog.model_validate_json(line) for line in _lines(folder / STEP_LOG)]
        return cls([r for r in rollouts if r.step <= step], [s for s in steps if s.step <= step])


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line] if path.is_file() else []


def _write_jsonl(path: Path, items: Sequence[BaseModel]) -> None:
    path.write_text("".join(item.model_dump_json() + "\n" for item in items), encoding="utf-8")


class RecordingReward:
    """TRL's reward function: `LeanReward`'s rewards, each completion kept as a rollout of the step being computed
    and the step's tallies (rewards, tokens, Lean seconds, when it was called) kept for its log line. A completion cut
    at `cut_at` tokens before it finished is unfinished: 0.0 whatever its text, never sent to the reward
    (`truncated`). Finished: its last token one of `end_ids` (the trainer's end-of-sequence tokens), or its text
    holding one of `stops` (the prompt formats' stop strings, where search's sampling stops: whole mode's closing
    fence; a chain-of-thought format's is its end-of-sequence text alone), since TRL samples past them."""

    __name__ = "lean"  # the reward's name in TRL's logs (rewards/lean/mean)

    def __init__(self, reward: LeanReward, journal: Journal, repair: RepairSettings | None = None, *,
                 cut_at: int | None = None, end_ids: Sequence[int] = (), stops: Sequence[str] = ()) -> None:
        self.reward = reward
        self.journal = journal
        self.repair = repair or RepairSettings()
        self.cut_at = cut_at
        self.end_ids = frozenset(end_ids)
        self.stops = tuple(stops)

    def is_cut(self, ids: Sequence[int], text: str) -> bool:
        """Whether a completion (its token ids and text) was cut at the length bound before it finished."""
        return (self.cut_at is not None and len(ids) >= self.cut_at and (not ids or ids[-1] not in self.end_ids)
                and not any(stop in text for stop in self.stops))

    async def __call__(self, prompts: Sequence[str], completions: Sequence[str],
                       completion_ids: Sequence[Sequence[int]], theorem: Sequence[str] | None = None,
                       trainer_state: Any = None, **kwargs: Any) -> list[float]:
        """TRL's async reward function (`async def`: TRL awaits it on its own event loop, where the Lean pool then
        lives)."""
        sampled_at = time.monotonic()
        if theorem is None:
            raise InputError("the reward needs the theorem column: each prompt's theorem")
        cut = [self.is_cut(ids, text) for ids, text in zip(completion_ids, completions, strict=True)]
        kept = [i for i, c in enumerate(cut) if not c]
        judged: dict[int, tuple[float, str, Verdict | None]] = {}
        lean_s = 0.0
        if kept:
            log_extra = kwargs.get("log_extra")
            if callable(log_extra):  # the reward's per-completion column, the cut ones' reason in their rows
                kwargs["log_extra"] = lambda column, values: log_extra(column, _spread(values, kept, len(cut)))
            rewards = await self.reward.judge([prompts[i] for i in kept], [completions[i] for i in kept],
                                              [theorem[i] for i in kept], **kwargs)
            stats = self.reward.last
            assert stats is not None  # the reward checked the batch
            judged = {i: (value, reason, verdict) for i, value, reason, verdict in zip(
                kept, rewards, stats.reasons, stats.verdicts, strict=True)}
            lean_s = stats.lean_s
        log_metric = kwargs.get("log_metric")
        if callable(log_metric):
            log_metric("rollouts/truncated", float(sum(cut)))
        step = int(trainer_state.global_step) + 1 if trainer_state is not None else 0
        fmt, guard = self.reward.settings.fmt, self.reward.guard
        rollouts: list[Rollout] = []
        none: list[Any] = [None] * len(prompts)  # the served engine's columns (rl.served), None for the others
        versions, served, own = (kwargs.get(key) or none for key in ("weights_version", "served_logprob",
                                                                      "trainer_logprob"))
        for i, (name, prompt, text, ids) in enumerate(zip(theorem, prompts, completions, completion_ids,
                                                          strict=True)):
            value, reason, verdict = judged.get(i, (0.0, TRUNCATED, None))
            feedback = None if verdict is None else rollout_feedback(self.reward.theorems[name], fmt, text, guard,
                                                                     verdict, self.repair)
            rollouts.append(Rollout(step=step, theorem=name, prompt=prompt, completion=text, reward=value,
                                    reason=reason, tokens=len(ids), truncated=cut[i], feedback=feedback,
                                    weights_version=versions[i], served_logprob=served[i], trainer_logprob=own[i]))
        self.journal.rollouts += rollouts
        rewards = [r.reward for r in rollouts]
        # by prompt: a theorem's whole prompt and its repair prompt are two prompts of the step
        solved = {prompt for prompt, value in zip(prompts, rewards, strict=True) if value == 1.0}
        self.journal.pending = StepTally(step=step, rewards=rewards, prompts=len(set(prompts)), solved=len(solved),
                                         tokens=sum(len(ids) for ids in completion_ids), lean_s=lean_s,
                                         truncated=sum(cut), sampled_at=sampled_at)
        return rewards


TRUNCATED = "cut at rl.max_completion_tokens: unfinished"  # the reason of a truncated completion


def _spread(values: Sequence[Any], kept: Sequence[int], size: int) -> list[Any]:
    """`values` of the kept completions at their places in a batch of `size`, TRUNCATED in the others'."""
    spread: list[Any] = [TRUNCATED] * size
    for i, value in zip(kept, values, strict=True):
        spread[i] = value
    return spread


def gather_step(journal: Journal, step: int, world: World) -> None:
    """Data-parallel: `journal`'s rollouts of `step` and its tallies become those of every process, in rank order
    (process k sampled the k-th slice of the step's global batch, so the order is the one-process batch's); its
    prompts and solved prompts counted again over them (a group may straddle two processes). Every process calls it
    at the same step (TRL logs every step on each); nothing for one process."""
    if world.size == 1:
        return
    import torch.distributed as dist

    own = [r for r in journal.rollouts if r.step == step]
    parts: list[Any] = [None] * world.size
    dist.all_gather_object(parts, (own, journal.pending))
    rollouts: list[Rollout] = [r for part, _ in parts for r in part]
    del journal.rollouts[len(journal.rollouts) - len(own):]
    journal.rollouts += rollouts
    tallies: list[StepTally] = [tally for _, tally in parts if tally is not None and tally.step == step]
    if journal.pending is None or len(tallies) != world.size:
        return
    journal.pending = replace(
        journal.pending, rewards=[r.reward for r in rollouts], prompts=len({r.prompt for r in rollouts}),
        solved=len({r.prompt for r in rollouts if r.reward == 1.0}), tokens=sum(t.tokens for t in tallies),
        lean_s=sum(t.lean_s for t in tallies), truncated=sum(t.truncated for t in tallies))



@dataclass(frozen=True, slots=True)
class StepClock:
    """When the step being closed began and the run started (`time.monotonic`), the step the run started from and the
    last step: the times of its log entry and its progress line's ETA."""

    began: float
    started: float
    first: int
    total: int


def close_step(journal: Journal, step: int, logs: Mapping[str, Any], *, world: World, echo: Echo,
               clock: StepClock) -> StepLog | None:
    """The end of optimizer step `step`, once TRL has logged its loss: every process's rollouts and tallies gathered
    (`gather_step`), the step's log entry appended to the journal from them and TRL's loss and KL, and its progress
    line; None when the reward saw no completion of this step (nothing pending for it)."""
    gather_step(journal, step, world)
    pending = journal.pending
    if pending is None or pending.step != step:
        return None
    now = time.monotonic()
    rewards = pending.rewards
    entry = StepLog(
        step=step, mean_reward=sum(rewards) / len(rewards), solved_share=pending.solved / max(pending.prompts, 1),
        verified=sum(1 for r in rewards if r == 1.0), completions=len(rewards),
        kl=_number(logs.get("kl")), loss=_number(logs.get("loss")), tokens_generated=pending.tokens,
        lean_seconds=pending.lean_s, wall_seconds=now - clock.began,
        generation_seconds=max(pending.sampled_at - clock.began, 0.0), truncated=pending.truncated,
    )
    journal.steps.append(entry)
    journal.pending = None
    done = step - clock.first
    eta = f"ETA {(clock.total - step) * (now - clock.started) / done:.0f}s" if done > 0 else "ETA ?"
    kl = f" kl {entry.kl:.4f}" if entry.kl is not None else ""
    loss = f"{entry.loss:.4f}" if entry.loss is not None else "n/a"
    cut = f" ({entry.truncated} cut)" if entry.truncated else ""
    echo(f"rl: step {step}/{clock.total} reward {entry.mean_reward:.3f} solved {pending.solved}/{pending.prompts} "
         f"loss {loss}{kl} {entry.tokens_generated} tokens{cut}, sampled in {entry.generation_seconds:.1f}s, "
         f"Lean {entry.lean_seconds:.1f}s, {entry.wall_seconds:.1f}s {eta}")
    return entry


@cache
def _callback_class() -> Any:
    from transformers import TrainerCallback

    class RlCallback(TrainerCallback):
        """A log line and a step-log entry per step; every saved checkpoint pushed to the store's remote."""

        def __init__(self, journal: Journal, store: CheckpointStore, echo: Echo, world: World | None = None) -> None:
            self.journal = journal
            self.store = store
            self.echo = echo
            self.world = world or World()
            self._began = self._started = time.monotonic()
            self._first = 0

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self._started = time.monotonic()
            self._first = int(state.global_step)

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self._began = time.monotonic()

        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
                   **kwargs: Any) -> None:
            logs = logs or {}
            if "loss" in logs:
                close_step(self.journal, int(state.global_step), logs, world=self.world, echo=self.echo,
                           clock=StepClock(self._began, self._started, self._first, int(state.max_steps)))

        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            """After the trainer has written checkpoint-N (weights, optimizer, RNG, trainer state): the journal so
            far, then the checkpoint's mark (`CheckpointStore.seal`), then its upload: process 0's, once every process
            has written its own part (its sampler's state)."""
            barrier(self.world)
            if not args.should_save:
                return
            checkpoint = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            self.journal.save(checkpoint)
            self.store.seal(checkpoint)
            self.store.push(checkpoint)

    return RlCallback



def _number(value: Any) -> float | None:
    return float(value) if value is not None else None


__all__ = ["TRUNCATED", "Journal", "RecordingReward", "StepClock", "StepTally", "close_step", "gather_step"]
