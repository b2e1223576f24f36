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

import math
import shutil
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager, ExitStack
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from burnqed.base.collector import frozen_heap
from burnqed.base.cpu_kernels import cpu_threads
from burnqed.config import Config, RlConfig, SftConfig
from burnqed.config.identity import identity_values
from burnqed.errors import ConfigError, InputError, TrainingError
from burnqed.lean.env import WorkerPool
from burnqed.lean.guard import TacticGuard
from burnqed.policy.localmodel import resolve_device
from burnqed.policy.modelfolder import write_config, write_tokenizer
from burnqed.provenance import StageInputs
from burnqed.records.enums import SearchMode
from burnqed.records.theorem import Theorem
from burnqed.rl.failures import FailedProof, pick_failed_proofs, read_failed_proofs
from burnqed.rl.grpo_step import Journal, RecordingReward, _callback_class
from burnqed.rl.grpo_trainer import build_trainer
from burnqed.rl.records import CHECKPOINT_MARK, RL_RECORD, TRAJECTORIES, RlRecord, Rollout
from burnqed.rl.reward import LeanReward, RewardSettings
from burnqed.rl.rollouts import rollout_searches, write_rollouts
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
            try:
                with frozen_heap():
                    trainer.train(resume_from_checkpoint=str(resume) if resume is not None else None)
            finally:
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



def _gpu_peak_gib(device: str) -> float | None:
    if not device.startswith("cuda"):
        return None
    import torch

    return round(torch.cuda.max_memory_allocated() / 2**30, 3)



__all__ = ["RlOutcome", "RlRequest", "RlSettings", "proved_theorems", "run_rl", "select_theorems",
           "with_failed_proofs"]
