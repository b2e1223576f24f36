"""`burnqed rl`: GRPO on Lean's verdict (TRL's GRPOTrainer) over an SFT output, into a model folder of the same form.

    burnqed rl --iter 0 --sft runs/iter_0/sft --theorems runs/iter_0/data/theorems.json --split train,pool \\
               --output runs/iter_0/rl
    burnqed export --sft runs/iter_0/rl --output runs/iter_0/export

    settings = RlSettings.from_config(cfg)
    index = rl_index(theorems, split, cfg, store=store)    # data.theorems: without --split, the train split
    line = check_rl_theorems(index, cfg, store=store)       # data.theorems: test and benchmark theorems refused
    theorems = select_theorems(index.theorems, cfg.rl.theorems, proved_theorems(trajectories, store=store))
    theorems = with_failed_proofs(theorems, trajectories, settings, store=store)   # repair prompts, when on
    outcome = run_rl(RlRequest(iteration=0, sft=..., output=...), theorems, settings,
                     open_pool=lambda: LeanPool.from_config(cfg.lean, size), store=store)

The policy is the SFT output's (its weights, or its adapter on its base: trainable again, as a warm start of SFT
loads it), the dataset `LeanReward.rows()` (whole search's prompts, byte for byte; with search.repair_rounds > 0 also
one repair prompt per theorem with a failed proof in the trajectories, `with_failed_proofs`), the reward `LeanReward`
on the pool `open_pool` makes (an async reward function: TRL awaits it on its own event loop). Checkpoints every
`rl.save_steps` into `{output}-checkpoints` (after the trainer's files, `on_save` adds the rollouts and the step log so
far, then the mark `complete.json`), resumed from the newest complete one. The output: the weights or adapter, the
tokenizer, the SFT record it started from (`sft.json`: how the folder loads, what export reads), `rl.json`, the step
log `rl-log.jsonl`, the rollouts `rollouts.jsonl` and the same rollouts as a whole-mode trajectory `trajectories/`
(`rl.rollouts`: what the next iteration's SFT reads) (docs/training.md, "GRPO stage").
"""

from __future__ import annotations

import gc
import math
import shutil
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager, ExitStack
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from burnqed.base.cpu_kernels import cpu_threads
from burnqed.config import Config, RlConfig, SftConfig
from burnqed.config.identity import identity_values
from burnqed.config.rl import CONTINUOUS_PAGE_TOKENS
from burnqed.errors import ConfigError, InputError, TrainingError
from burnqed.lean.env import WorkerPool
from burnqed.lean.guard import TacticGuard
from burnqed.lean.soundness import Verdict
from burnqed.policy.localmodel import resolve_device
from burnqed.policy.modelfolder import write_config, write_tokenizer
from burnqed.provenance import StageInputs
from burnqed.records.enums import SearchMode
from burnqed.records.theorem import Theorem
from burnqed.rl.failures import FailedProof, pick_failed_proofs, read_failed_proofs
from burnqed.rl.reward import LeanReward, RewardSettings
from burnqed.rl.rollouts import rollout_feedback, rollout_searches, write_rollouts
from burnqed.rl.served import IS_CLIP_MAX, served_engine
from burnqed.search.repair import RepairSettings
from burnqed.sft.checkpoints import CheckpointStore
from burnqed.sft.launch import World, barrier, process_group
from burnqed.sft.manifests import (
    SFT_RECORD,
    SftRecord,
    model_fingerprint,
    read_sft_record,
    share_files,
    trained_formats,
)
from burnqed.sft.model import load_for_training, quiet_imports, quiet_warnings, resolve_base_model
from burnqed.sft.train import echo_stderr
from burnqed.storage import Store, join
from burnqed.text.prompt import format_for, repair_format, stop_strings

RL_RECORD = "rl.json"
CHECKPOINT_MARK = "complete.json"  # a checkpoint's last file (`CheckpointStore.seal`): after the journal
STEP_LOG = "rl-log.jsonl"
ROLLOUTS = "rollouts.jsonl"
TRAJECTORIES = "trajectories"  # the rollouts as a whole-mode trajectory prefix inside the output
Echo = Callable[[str], None]
OpenPool = Callable[[], AbstractAsyncContextManager[WorkerPool]]


# ------------------------------------------------------------------------------------------------ inputs


@dataclass(frozen=True, slots=True)
class RlRequest:
    """The command line of one `burnqed rl` run."""

    iteration: int
    sft: str
    output: str
    theorems: str | None = None  # the theorem index (as `search --theorems` reads it)
    split: str | None = None
    trajectories: tuple[str, ...] = ()  # earlier searches: what they proved is not 'unsolved'
    force: bool = False
    made_from: StageInputs | None = None


@dataclass(frozen=True, slots=True)
class RlSettings:
    """What a run reads of the configuration: its section, SFT's (the adapter's settings when lora/qlora, the device,
    the CPU threads), how prompts are written (whole search's, and search's repair format when
    search.repair_rounds > 0), the tactic guard, and search's repair settings (a failed rollout keeps Lean's
    messages when whole search's rows would: `search.repair_rounds` > 0)."""

    rl: RlConfig
    sft: SftConfig
    reward: RewardSettings
    guard: TacticGuard
    repair: RepairSettings = field(default_factory=RepairSettings)
    server_wait_s: float = 0.0  # rl.server_url: how long its /health is waited for (policy.ready_timeout_s)
    server_starting: bool = False  # policy.wait_for_start: a refused connection is a sidecar still starting

    @classmethod
    def from_config(cls, cfg: Config) -> RlSettings:
        fmt = format_for(cfg.policy.prompt_format, SearchMode.WHOLE, cot=cfg.policy.cot)
        search = cfg.search
        repair = RepairSettings(rounds=search.repair_rounds, message_tokens=search.repair_message_tokens,
                                fmt=repair_format(cfg.policy.prompt_format, cot=cfg.policy.cot),
                                cut=search.repair_cut_at_error)
        served = repair.fmt if search.repair_rounds > 0 else None  # repair prompts in the rows
        return cls(cfg.rl, cfg.sft, RewardSettings(fmt=fmt, form=cfg.policy.declaration_form, repair=served),
                   TacticGuard.from_config(cfg.lean), repair, server_wait_s=cfg.policy.ready_timeout_s,
                   server_starting=cfg.policy.wait_for_start)


def proved_theorems(trajectories: Sequence[str], *, store: Store) -> set[str]:
    """The theorems some search in `trajectories` proved (a theorem result with `proved`: every soundness rule
    passed, the compile included)."""
    from burnqed.trajectory.reader import read_results

    return {result.name for uri in trajectories for result in read_results(uri, store=store) if result.proved}


@dataclass(frozen=True, slots=True)
class Selection:
    """The theorems RL prompts, the failed proofs whose repair prompts it serves too, and what was left out."""

    theorems: list[Theorem]
    without_statement: int
    proved: int  # left out as proved by an earlier search ('unsolved')
    failed: tuple[FailedProof, ...] = ()  # one per theorem with any (`with_failed_proofs`)


def select_theorems(theorems: Sequence[Theorem], which: str, proved: set[str]) -> Selection:
    """`rl.theorems` over the iteration's theorems: those with a statement (a whole prompt shows it), and with
    'unsolved' only those no earlier search proved. InputError when none is left."""
    stated = [t for t in theorems if t.statement is not None]
    chosen = [t for t in stated if which == "all" or t.name not in proved]
    selection = Selection(chosen, len(theorems) - len(stated), len(stated) - len(chosen))
    if not theorems:
        raise InputError("the theorem set is empty: RL needs theorems to prompt")
    if not stated:
        raise InputError(f"none of the {len(theorems)} theorems has a statement: a whole prompt shows the statement "
                         "and the compile restates it")
    if not chosen:
        raise InputError(f"every one of the {len(stated)} theorems with a statement was proved by an earlier search "
                         "(rl.theorems = 'unsolved'): set rl.theorems = 'all' to train on them")
    return selection


def untrained_format(sft: str, *, store: Store) -> str | None:
    """A `warning:` line when the SFT output RL starts from was never trained on the whole format RL prompts (no SFT
    of its chain counts a proof example: sft.proof_examples was off; `sft.manifests.trained_formats`), else None: a
    policy that never saw the format ends its completions at once unless its base model writes whole proofs, and
    every reward is then 0."""
    formats = trained_formats(sft, store=store)
    if formats is None or formats.proofs:
        return None
    return (f"warning: rl: --sft {sft} was never trained on whole proofs ({SFT_RECORD} counts no proof example: "
            "sft.proof_examples was off), the format RL prompts: expect reward 0 on every step unless its base model "
            "writes whole proofs; train SFT with sft.proof_examples = true")


def with_failed_proofs(selection: Selection, trajectories: Sequence[str], settings: RlSettings, *,
                       store: Store) -> Selection:
    """`selection` with the failed proofs its repair prompts revise, when repair prompts are served
    (`settings.reward.repair`: search.repair_rounds > 0): of each selected theorem with any failed proof the searches of
    `trajectories` recorded with Lean's messages, one, drawn with rl.seed (`rl.failures`); else `selection` as it is.
    One per theorem: whole prompts stay at least half the rows, and a theorem with many failures (step search records
    one per rejected tactic) crowds out no other."""
    if settings.reward.repair is None or not trajectories:
        return selection
    found = read_failed_proofs(trajectories, selection.theorems, store=store)
    return replace(selection, failed=tuple(pick_failed_proofs(found, settings.rl.seed)))


def check_model_folder(folder: Path, given: str) -> SftRecord:
    """The SFT record of the model folder RL starts from; InputError when it is not an SFT output (no sft.json) or
    lacks the files its method loads."""
    record = read_sft_record(folder, "--sft")
    needed = ["config.json"] if record.method == "full" else ["adapter_config.json"]
    weights = list(folder.glob("*.safetensors")) + list(folder.glob("*.bin"))
    missing = [name for name in needed if not (folder / name).is_file()] + ([] if weights else ["weights"])
    if missing:
        raise InputError(f"--sft {given} is not a model folder RL can load ({record.method}): it lacks "
                         f"{', '.join(missing)}")
    return record


def base_folder(source: Path, record: SftRecord, *, store: Store) -> Path:
    """The folder RL loads its base from: the SFT output `source` itself when it is full (the whole model: no base is
    read, nor the default one built for it), else the adapter's base (`sft.model.resolve_base_model`: built or
    downloaded on first use; the command that launches torchrun calls this first, so its processes find it)."""
    return source if record.method == "full" else resolve_base_model(record.base_model, store=store)


def checkpoint_settings(request: RlRequest, settings: RlSettings, record: SftRecord,
                        selection: Selection) -> dict[str, Any]:
    """What a run's checkpoints belong to: the keys of the `rl-checkpoints` identity and the inputs (the SFT output's
    weights by fingerprint, the theorems by name, the prompt format; the repair format and the failed proofs, by
    their records, when repair prompts are served)."""
    values = identity_values(Config(rl=settings.rl), "rl-checkpoints")
    repairs = {} if settings.reward.repair is None else {
        "repair format": str(settings.reward.repair),
        "failed proofs": _digest([[f.theorem, *f.key] for f in selection.failed])}
    return {**values, "--iter": request.iteration, "--sft": request.sft, "sft method": record.method,
            "sft weights": _folder_print(request.sft), "theorems": [t.name for t in selection.theorems],
            "prompt format": str(settings.reward.fmt), "declaration form": str(settings.reward.form), **repairs}


def _digest(value: Any) -> str:
    import hashlib
    import json

    return hashlib.sha256(json.dumps(value, ensure_ascii=False).encode("utf-8")).hexdigest()


def _folder_print(uri: str) -> str:
    path = Path(uri.removeprefix("file://"))
    return model_fingerprint(path) if path.is_dir() else uri


def fit_prompts(rows: Sequence[dict[str, str]], tokenizer: Any, max_tokens: int) -> tuple[list[dict[str, str]], int]:
    """The rows whose prompt is at most `max_tokens` tokens as TRL tokenizes it (`tokenizer(text=…)`), and how many
    were left out; InputError when none is left (the GPU memory plan sizes generation for that many)."""
    lengths = tokenizer(text=[row["prompt"] for row in rows])["input_ids"]
    fitting = [row for row, ids in zip(rows, lengths, strict=True) if len(ids) <= max_tokens]
    if not fitting:
        raise InputError(f"every one of the {len(rows)} prompts is longer than rl.max_prompt_tokens = {max_tokens} "
                         f"tokens (the shortest: {min(len(ids) for ids in lengths)}): raise rl.max_prompt_tokens")
    return fitting, len(rows) - len(fitting)


def ordered_rows(rows: Sequence[dict[str, str]], count: int, seed: int) -> list[dict[str, str]]:
    """`count` rows: the rows in seeded permutations, one after the other (so the trainer reads one epoch in order:
    its position after a resume is the step, never an epoch's reshuffle)."""
    import random

    rng = random.Random(seed)
    ordered: list[dict[str, str]] = []
    while len(ordered) < count:
        block = list(rows)
        rng.shuffle(block)
        ordered += block
    return ordered[:count]


# ------------------------------------------------------------------------------------------------ records


class StepLog(BaseModel):
    """One line of `rl-log.jsonl`: an optimizer step."""

    model_config = ConfigDict(extra="forbid")

    step: int = Field(ge=1)
    mean_reward: float = Field(description="Mean reward of the step's completions.")
    solved_share: float = Field(description="Share of the step's prompts with at least one verified completion.")
    verified: int = Field(ge=0, description="Completions that earned 1.0.")
    completions: int = Field(ge=0)
    kl: float | None = Field(description="Mean per-token KL to the reference (TRL's; None when beta = 0).")
    loss: float | None = Field(description="The step's GRPO loss (TRL's).")
    tokens_generated: int = Field(ge=0, description="Completion tokens sampled in the step.")
    lean_seconds: float = Field(ge=0, description="Seconds of the step's compiles (LeanReward's, summed).")
    wall_seconds: float = Field(ge=0, description="Wall time of the step: generation, reward and update.")
    generation_seconds: float | None = Field(default=None, ge=0, description="Wall time from the step's start to "
                                             "its reward's call: sampling the rollouts (rl.rollout_engine), the "
                                             "prompts' tokenisation and the completions' decoding around it.")
    truncated: int = Field(default=0, ge=0, description="Completions cut at rl.max_completion_tokens (reward 0.0).")


class Rollout(BaseModel):
    """One line of `rollouts.jsonl`: a completion and Lean's verdict on it."""

    model_config = ConfigDict(extra="forbid")

    step: int = Field(ge=1)
    theorem: str
    prompt: str
    completion: str
    reward: float
    reason: str = Field(description="Why it earned 0.0 (the verdict's first line); empty for a verified proof.")
    tokens: int = Field(default=0, ge=0, description="Its completion tokens.")
    truncated: bool = Field(default=False, description="Cut at rl.max_completion_tokens: unfinished, 0.0 whatever "
                            "its text, never compiled.")
    feedback: str | None = Field(default=None, description="Lean's messages on a failed proof as whole search records "
                                 "them with repair on (`rl.rollouts.rollout_feedback`); None otherwise.")
    weights_version: int | None = Field(default=None, description="rl.rollout_engine 'served': the optimizer step "
                                        "whose weights the server sampled it with (the step before its own); None "
                                        "for the other engines (the trainer's current weights).")
    served_logprob: float | None = Field(default=None, description="'served': its log-prob as the server reported "
                                         "it (the sum of its tokens').")
    trainer_logprob: float | None = Field(default=None, description="'served': its log-prob under the trainer's "
                                          "weights of the same version; exp(trainer − served) above 3 left it out of "
                                          "the loss (TRL's vLLM correction).")


class RlRecord(BaseModel):
    """`rl.json` of a published RL output."""

    model_config = ConfigDict(extra="forbid")

    sft: str = Field(description="The SFT output RL started from (its sft.json is copied beside: how it loads).")
    iteration: int = Field(ge=0)
    method: str = Field(description="The SFT method: full weights, or the adapter trained further.")
    steps: int = Field(ge=0, description="Optimizer steps trained (global step at the end).")
    resumed_from_step: int | None = Field(description="Checkpoint step this run resumed from, if it did.")
    theorems: int = Field(ge=0, description="Theorems prompted.")
    theorems_selection: str = Field(description="rl.theorems.")
    left_out_proved: int = Field(ge=0, description="Theorems left out as proved by an earlier search.")
    left_out_without_statement: int = Field(ge=0)
    left_out_long_prompt: int = Field(default=0, ge=0, description="Prompts (whole or repair) left out: longer than "
                                      "rl.max_prompt_tokens.")
    repair_prompts: int = Field(default=0, ge=0, description="Repair prompts among the prompts served (one per "
                                "theorem with a failed proof in --trajectories, when search.repair_rounds > 0).")
    prompt_format: str = Field(description="The whole format of the prompts (search's).")
    settings: dict[str, Any] = Field(description="The rl section as run.")
    rollout_engine: str = Field(default="trainer", description="What sampled the rollouts (rl.rollout_engine).")
    truncated: int = Field(default=0, ge=0, description="Completions of the run's steps cut at "
                           "rl.max_completion_tokens: unfinished, reward 0.0 (resumed steps included).")
    served_logprob_gap: float | None = Field(default=None, description="'served': the largest |trainer − server| "
                                             "log-prob of a completion (resumed steps included); None for the other "
                                             "engines.")
    served_masked: int = Field(default=0, ge=0, description="'served': completions left out of the loss, their "
                               "importance ratio exp(trainer − server) above 3.")
    mean_reward: float | None = Field(description="Mean reward over every step's completions.")
    train_seconds: float = Field(ge=0, description="Wall time of the training loop (this run).")
    gpu_peak_gib: float | None = Field(default=None, description="On a GPU: the most memory torch allocated in this "
                                       "run (torch.cuda.max_memory_allocated, GiB; the CUDA context and the "
                                       "allocator's cache not included); None on CPU.")
    device: str
    written_at: datetime


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


# ------------------------------------------------------------------------------------------------ the stage


@dataclass(frozen=True, slots=True)
class RlOutcome:
    output: str
    record: RlRecord
    skipped: bool

    @property
    def summary(self) -> str:
        r = self.record
        if self.skipped:
            return f"rl output {self.output} is done already ({r.method}, {r.steps} steps); pass --force to redo"
        reward = f"{r.mean_reward:.3f}" if r.mean_reward is not None else "n/a"
        return (f"rl iteration {r.iteration} ({r.method}) -> {self.output}: {r.steps} steps on {r.theorems} "
                f"theorems, mean reward {reward}, {r.train_seconds:.1f}s")


def run_rl(request: RlRequest, selection: Selection, settings: RlSettings, *, open_pool: OpenPool, store: Store,
           echo: Echo = echo_stderr, callbacks: Sequence[Any] = ()) -> RlOutcome:
    """Run one RL stage (see the module docstring): `selection` the theorems, `open_pool` the Lean pool the reward
    opens at its first call (closed at the end)."""
    quiet_imports()
    if store.is_done(request.output) and not request.force:
        record = store.read_model(join(request.output, RL_RECORD), RlRecord, RL_RECORD)
        return RlOutcome(request.output, record, skipped=True)
    source = store.local_input(request.sft)
    sft_record = check_model_folder(source, request.sft)
    rl, device, world = settings.rl, resolve_device(settings.sft.device), World.from_env()
    check_world(rl, world)
    if not world.main:
        echo = _silent  # data-parallel: one copy of every progress line, process 0's
    if device == "cuda" and world.size > 1:
        device = f"cuda:{world.local_rank}"  # one GPU per process
    with process_group(world, device):
        with cpu_threads(device, settings.sft.cpu_threads), quiet_warnings(), ExitStack() as engines, \
                LeanReward(selection.theorems, open_pool, settings.guard, settings.reward, selection.failed) as reward:
            base_dir = base_folder(source, sft_record, store=store)
            bf16 = settings.sft.bf16 and device.startswith("cuda")
            sft = settings.sft.model_copy(update={"seed": rl.seed})
            # the server first: the rl pod's sidecar, still loading, is waited for before the policy's own long load
            served = None if rl.rollout_engine != "served" else engines.enter_context(served_engine(
                rl, lora=sft_record.method != "full", base=base_dir, sft=source, device=device,
                wait_s=settings.server_wait_s, wait_for_start=settings.server_starting))
            policy = load_for_training(sft_record.method, base_dir, source, sft, device, bf16)
            checkpoints = CheckpointStore.for_output(request.output, store=store, mark=CHECKPOINT_MARK)
            if world.main:
                checkpoints.prepare(checkpoint_settings(request, settings, sft_record, selection), fresh=request.force)
            barrier(world)
            resume = checkpoints.latest()
            resumed_step = int(resume.name.rsplit("-", 1)[1]) if resume is not None else None
            journal = Journal.load(resume, resumed_step or 0) if resume is not None else Journal()
            fitting, long = fit_prompts(reward.rows(), policy.tokenizer, rl.max_prompt_tokens)
            if long:
                echo(f"rl: {long} prompt(s) left out: longer than rl.max_prompt_tokens = "
                     f"{rl.max_prompt_tokens}")
            rows = ordered_rows(fitting, rl.max_steps * rl.prompts_per_step, rl.seed)
            recorder = _recorder(reward, journal, settings)
            progress = _callback_class()(journal, checkpoints, echo, world)
            trainer = build_trainer(policy.model, policy.tokenizer, rows, recorder, rl, device=device, bf16=bf16,
                                    output_dir=checkpoints.local, callbacks=[progress, *callbacks], rollout_func=served,
                                    processes=world.size)
            recorder.end_ids = frozenset(trainer.eos_token_ids)  # TRL's: the tokenizer's and the generation config's
            if resume is not None:
                echo(f"rl: resuming from {resume.name} in {checkpoints.remote or checkpoints.local}")
            started = time.monotonic()
            from trl.trainer.utils import shutdown_event_loop_in_daemon

            # What lives now (the modules, the model, the trainer) is left out of the cyclic collector until the end:
            # continuous batching calls gc.collect() twice a step (transformers 5.19, continuous_api.py:859 and 405),
            # each ~0.6 s over the process's ~550k objects on CPU; frozen, each reads a step's new objects alone.
            gc.freeze()
            try:
                trainer.train(resume_from_checkpoint=str(resume) if resume is not None else None)
            finally:
                gc.unfreeze()  # back to the collector: a caller's process (tests, iterate in process) as it was
                reward.close()  # the pool, on TRL's event loop that entered it; then that loop's thread ends
                shutdown_event_loop_in_daemon(trainer.async_loop_thread, trainer.async_loop)
            seconds = time.monotonic() - started
        outcome = _publish(request, selection, settings, store, trainer, journal, source=source,
                           sft_record=sft_record, resumed_step=resumed_step, long=long, fitting=fitting,
                           reward=reward, seconds=seconds, device=device, world=world, checkpoints=checkpoints)
        barrier(world)  # the others wait for process 0's output
    return outcome


def check_world(rl: RlConfig, world: World) -> None:
    """The processes running the stage (torchrun's WORLD_SIZE) must split the global batch evenly (ConfigError
    otherwise: a torchrun started by hand with another count than rl.processes)."""
    batch = rl.prompts_per_step * rl.num_generations
    if batch % world.size:
        raise ConfigError(f"rl.prompts_per_step × rl.num_generations = {batch} completions a step must divide by the "
                          f"{world.size} data-parallel processes: the global batch stays the same for every process "
                          "count")


def _silent(line: str) -> None:
    """A progress line of a process other than 0: dropped."""


def _publish(request: RlRequest, selection: Selection, settings: RlSettings, store: Store, trainer: Any,
             journal: Journal, *, source: Path, sft_record: SftRecord, resumed_step: int | None, long: int,
             fitting: Sequence[dict[str, str]], reward: LeanReward, seconds: float, device: str,
             world: World, checkpoints: CheckpointStore) -> RlOutcome:
    """The run's record, and its output published by process 0 (the others return the record alone)."""
    rl = settings.rl
    rewards = [r.reward for r in journal.rollouts]
    if any(s.loss is not None and s.loss != s.loss for s in journal.steps):
        raise TrainingError("the GRPO loss diverged (NaN); lower rl.learning_rate")
    record = RlRecord(
        sft=request.sft, iteration=request.iteration, method=sft_record.method, steps=int(trainer.state.global_step),
        resumed_from_step=resumed_step, theorems=len(selection.theorems), theorems_selection=rl.theorems,
        left_out_proved=selection.proved, left_out_without_statement=selection.without_statement,
        left_out_long_prompt=long,
        repair_prompts=sum(1 for row in fitting if row["prompt"] != reward.prompts[row["theorem"]]),
        prompt_format=str(settings.reward.fmt), settings=rl.model_dump(mode="json"),
        rollout_engine=rl.rollout_engine, truncated=sum(1 for r in journal.rollouts if r.truncated),
        **_served_summary(journal.rollouts),
        mean_reward=sum(rewards) / len(rewards) if rewards else None, train_seconds=seconds,
        gpu_peak_gib=_gpu_peak_gib(device), device=device,
        written_at=datetime.now(UTC),
    )
    if not world.main:
        return RlOutcome(request.output, record, skipped=False)
    with store.staged_output(request.output, "rl", {"method": record.method, "steps": record.steps},
                             made_from=request.made_from) as folder:
        _save_model(trainer.model, source, folder)
        shutil.copyfile(source / SFT_RECORD, folder / SFT_RECORD)
        journal.save(folder)
        searches, left_out = rollout_searches(journal.rollouts, {t.name: t for t in selection.theorems},
                                              fmt=settings.reward.fmt, form=settings.reward.form, guard=settings.guard)
        write_rollouts(str(folder / TRAJECTORIES), searches, run_id=f"iter{request.iteration}-rl",
                       iteration=request.iteration, left_out=left_out, store=store)
        (folder / RL_RECORD).write_text(record.model_dump_json(indent=2) + "\n", encoding="utf-8")
        share_files(folder, folder / RL_RECORD)
    checkpoints.clear()
    return RlOutcome(request.output, record, skipped=False)


def _recorder(reward: LeanReward, journal: Journal, settings: RlSettings) -> RecordingReward:
    """The reward TRL calls: `reward` recorded into `journal`, a completion cut at rl.max_completion_tokens before
    any stop string of the prompt formats scored as unfinished."""
    formats = [settings.reward.fmt, *([settings.reward.repair] if settings.reward.repair is not None else [])]
    return RecordingReward(reward, journal, settings.repair, cut_at=settings.rl.max_completion_tokens,
                           stops=sorted({stop for fmt in formats for stop in stop_strings(fmt)}))


def _served_summary(rollouts: Sequence[Rollout]) -> dict[str, Any]:
    """rl.json's served fields from the journal's rollouts (none served: the defaults)."""
    gaps = [(r.trainer_logprob - r.served_logprob) for r in rollouts
            if r.trainer_logprob is not None and r.served_logprob is not None]
    if not gaps:
        return {}
    return {"served_logprob_gap": max(abs(gap) for gap in gaps),
            "served_masked": sum(1 for gap in gaps if gap > math.log(IS_CLIP_MAX))}


def _save_model(model: Any, source: Path, folder: Path) -> None:
    """The folder as SFT writes its output: a full model's weights and config, or the trained adapter alone (the
    reference adapter a KL term adds is not saved); the tokenizer of the SFT output."""
    if hasattr(model, "peft_config"):
        model.save_pretrained(folder, selected_adapters=["default"])
    else:
        model.save_pretrained(folder)
    write_tokenizer(source, folder)
    if (folder / "config.json").is_file():
        write_config(folder / "config.json")


# ------------------------------------------------------------------------------------------------ the trainer


def build_trainer(model: Any, tokenizer: Any, rows: list[dict[str, str]], reward: RecordingReward, rl: RlConfig, *,
                  device: str, bf16: bool, output_dir: Path, callbacks: Sequence[Any] = (),
                  rollout_func: Any = None, processes: int = 1) -> Any:
    """TRL's GRPOTrainer: one generation of `prompts_per_step` × `num_generations` completions per optimizer step (the
    global batch: each of `processes` data-parallel processes samples 1/processes of it), the rows read in order
    (`ordered_rows`), a constant learning rate, a checkpoint every `save_steps`; the rollouts sampled by
    `rollout_func` when given (rl.rollout_engine 'served': `rl.served.ServedRollouts`)."""
    from datasets import Dataset
    from transformers import PrinterCallback, ProgressCallback
    from trl.trainer.grpo_config import GRPOConfig
    from trl.trainer.grpo_trainer import GRPOTrainer

    args = GRPOConfig(
        output_dir=str(output_dir),
        **grpo_fields(rl),
        per_device_train_batch_size=rl.prompts_per_step * rl.num_generations // processes,
        gradient_accumulation_steps=1,
        lr_scheduler_type="constant",
        warmup_steps=0,
        logging_steps=1,
        save_strategy="steps",
        save_total_limit=None,  # the older checkpoint goes once the newer is sealed (RlCallback.on_save)
        shuffle_dataset=False,
        use_cpu=device == "cpu",
        bf16=bf16,
        report_to="none",
        disable_tqdm=True,
        generation_kwargs={"use_cache": True},
        **engine_args(rl),
    )
    model.config.use_cache = True  # generation reads its KV cache; training passes no cache
    funcs: list[Any] = [reward]  # async: TRL awaits it (its annotation names the synchronous form alone)
    trainer = GRPOTrainer(model=model, reward_funcs=funcs, args=args, train_dataset=Dataset.from_list(rows),
                          processing_class=tokenizer, callbacks=list(callbacks), rollout_func=rollout_func)
    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    return trainer


# RlConfig's fields GRPOConfig takes as they are, each under the GRPOConfig names it becomes: the one place of the
# renames (tests/rl/test_stage.py checks every name is a GRPOConfig field, and that every RlConfig field is here or in
# DERIVED_FIELDS).
GRPO_FIELDS: dict[str, tuple[str, ...]] = {
    "num_generations": ("num_generations",),
    "loss_type": ("loss_type",),
    "beta": ("beta",),
    "temperature": ("temperature",),
    "max_completion_tokens": ("max_completion_length",),
    "learning_rate": ("learning_rate",),
    "max_steps": ("max_steps",),
    "save_steps": ("save_steps",),
    "seed": ("seed", "data_seed"),
}
# RlConfig's other fields: what each becomes instead of a GRPOConfig field of its own.
DERIVED_FIELDS: dict[str, str] = {
    "enabled": "whether iterate runs the stage",
    "theorems": "the theorems the rows prompt (select_theorems)",
    "prompts_per_step": "per_device_train_batch_size: prompts_per_step × num_generations ÷ processes",
    "processes": "torchrun's processes (the command relaunches itself), the divisor of per_device_train_batch_size",
    "max_prompt_tokens": "the rows left out (fit_prompts), the continuous engine's cache (engine_args)",
    "rollout_engine": "engine_args; 'served': the rollout_func (rl.served.served_engine)",
    "server_url": "the served engine's server (rl.served.served_engine); none: `burnqed serve` in process",
}


def grpo_fields(rl: RlConfig) -> dict[str, Any]:
    """GRPOConfig's keyword arguments that `rl` gives as they are (`GRPO_FIELDS`)."""
    return {name: getattr(rl, key) for key, names in GRPO_FIELDS.items() for name in names}


# transformers 5.19's continuous batching: max_batch_tokens when none is given (generation/continuous_batching/cache.py,
# PagedAttentionMemoryHandler); engine_args never asks for more, so a large step batches its prefills as before.
CONTINUOUS_BATCH_TOKENS = 8192


def engine_args(rl: RlConfig) -> dict[str, Any]:
    """GRPOConfig's fields for `rl.rollout_engine`: none for 'trainer' (HF `generate`); for 'continuous'
    transformers' continuous batching with its paged KV cache sized to the step (each of prompts_per_step ×
    num_generations sequences its pages of max_prompt_tokens + max_completion_tokens; else it takes half the free
    memory, TRL's default, which the GPU plan cannot count), refused only past 0.9 of the free memory (TRL's 0.5 would
    refuse a cache the plan fits), and its batch at most the step's prompt tokens (the default, 8,192, at most): under
    sdpa/eager attention it allocates and fills a float mask of max_batch_tokens × (cache + batch) tokens twice a
    step (transformers 5.19, input_outputs.py:126 and 302; 369 MB for 12 pages, ~0.4 s a step on CPU), and the
    step's prefills fit the smaller batch as they fitted the default (the same batches, the same samples). No seed of
    its own: it draws one from torch's generator, which the trainer seeds with rl.seed and a checkpoint restores (a
    fixed seed would reset that generator at every step's generation)."""
    if rl.rollout_engine != "continuous":  # 'trainer': HF generate; 'served': TRL's rollout_func
        return {}
    sequences = rl.prompts_per_step * rl.num_generations
    pages = -(-(rl.max_prompt_tokens + rl.max_completion_tokens) // CONTINUOUS_PAGE_TOKENS)
    batch_tokens = min(sequences * rl.max_prompt_tokens, CONTINUOUS_BATCH_TOKENS)
    return {"use_transformers_continuous_batching": True,
            "transformers_continuous_batching_config": {"num_blocks": sequences * pages, "max_memory_percent": 0.9,
                                                        "max_batch_tokens": batch_tokens}}


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
            step = int(state.global_step)
            if "loss" in logs:
                gather_step(self.journal, step, self.world)
            pending = self.journal.pending
            if "loss" not in logs or pending is None or pending.step != step:
                return
            now = time.monotonic()
            rewards = pending.rewards
            entry = StepLog(
                step=step, mean_reward=sum(rewards) / len(rewards),
                solved_share=pending.solved / max(pending.prompts, 1),
                verified=sum(1 for r in rewards if r == 1.0), completions=len(rewards),
                kl=_number(logs.get("kl")), loss=_number(logs.get("loss")), tokens_generated=pending.tokens,
                lean_seconds=pending.lean_s, wall_seconds=now - self._began,
                generation_seconds=max(pending.sampled_at - self._began, 0.0), truncated=pending.truncated,
            )
            self.journal.steps.append(entry)
            self.journal.pending = None
            done, total = step - self._first, int(state.max_steps)
            eta = f"ETA {(total - step) * (now - self._started) / done:.0f}s" if done > 0 else "ETA ?"
            kl = f" kl {entry.kl:.4f}" if entry.kl is not None else ""
            loss = f"{entry.loss:.4f}" if entry.loss is not None else "n/a"
            cut = f" ({entry.truncated} cut)" if entry.truncated else ""
            self.echo(f"rl: step {step}/{total} reward {entry.mean_reward:.3f} solved {pending.solved}/"
                      f"{pending.prompts} loss {loss}{kl} {entry.tokens_generated} tokens{cut}, sampled in "
                      f"{entry.generation_seconds:.1f}s, Lean {entry.lean_seconds:.1f}s, {entry.wall_seconds:.1f}s "
                      f"{eta}")

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


def _gpu_peak_gib(device: str) -> float | None:
    if not device.startswith("cuda"):
        return None
    import torch

    return round(torch.cuda.max_memory_allocated() / 2**30, 3)


def _number(value: Any) -> float | None:
    return float(value) if value is not None else None


__all__ = ["CHECKPOINT_MARK", "DERIVED_FIELDS", "GRPO_FIELDS", "TRAJECTORIES", "TRUNCATED", "RlOutcome", "RlRequest",
           "RlSettings", "StepTally", "build_trainer", "engine_args", "grpo_fields", "proved_theorems", "run_rl",
           "select_theorems", "with_failed_proofs"]
