"""What a stage asks its command to do, as typed data: one request type per command the pipeline runs, each field named
as the command's parameter it sets (`burnqed sft`'s `iteration` is its `--iter`). A request renders its own command line
(`argv()`, what `runner.local` runs as a subprocess and `workflows/` renders into an Argo template) and is what the
stage's identity is computed from (`runner.request_inputs.made_from`); the command builds the same request from its
parsed options, so a stage and a pasted `burnqed …` line agree by construction. Run in process, a request is a call
of its command function with its fields, no command line rendered (`commands.stagecall`, above this layer).

    request = SftRequest(iteration=1, data="runs/iter_0/data", trajectories=("runs/iter_0/trajectories",),
                         init="runs/iter_0/sft", output="runs/iter_1/sft")
    request.argv()   # ('sft', '--iter', '1', '--data', 'runs/iter_0/data', '--trajectories', …, '--output', …)

A fanned-out stage's request holds `SHARD` where each shard puts its index (`for_shard`). `force` and `resume` say how
the command runs, not what it makes (marked `identity=False`: no part of the stage's identity); `iterate --force`
redoes a finished stage as `redone()`, a change of the request, rendered like any other. No I/O happens here.
"""

from __future__ import annotations

import dataclasses
import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

SHARD = "{shard}"  # placeholder in a fanned-out stage's request (its --shard and --output), replaced by the shard index
IDENTITY = "identity"  # a field's metadata key: False for a field no part of what the stage's run is made from


def _run_flag() -> Any:
    """A flag that says how the command runs (`--force`, `--resume`), not what it makes: off unless set, and outside
    the stage's identity (`runner.request_inputs.made_from` reads no such field)."""
    return field(default=False, metadata={IDENTITY: False})


def _flag(flag: str, on: bool) -> tuple[str, ...]:
    return (flag,) if on else ()


def _optional(flag: str, value: str | None) -> tuple[str, ...]:
    return (flag, value) if value else ()


def _repeated(flag: str, values: Sequence[str]) -> tuple[str, ...]:
    return tuple(word for value in values for word in (flag, value))


def _theorems(theorems: str | None, split: str | None) -> tuple[str, ...]:
    return (*_optional("--theorems", theorems), *_optional("--split", split))


@dataclass(frozen=True, slots=True, kw_only=True)
class StageRequest(ABC):
    """A command the pipeline runs, with the options it runs with. `command` is its words after `burnqed`."""

    command: ClassVar[tuple[str, ...]] = ()
    output: str

    @abstractmethod
    def options(self) -> tuple[str, ...]:
        """The command line after the command's words."""

    def argv(self) -> tuple[str, ...]:
        """The command line after `burnqed` (may hold SHARD when the stage fans out)."""
        return (*self.command, *self.options())

    def for_shard(self, shard: int) -> Self:
        """This request as shard `shard` runs it: SHARD replaced by the index in every text field."""
        changed: dict[str, object] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, str) and SHARD in value:
                changed[f.name] = value.replace(SHARD, str(shard))
            elif isinstance(value, tuple) and any(isinstance(v, str) and SHARD in v for v in value):
                changed[f.name] = tuple(v.replace(SHARD, str(shard)) for v in value)
        return dataclasses.replace(self, **changed) if changed else self  # type: ignore[arg-type]

    def redone(self) -> Self:
        """This request as `iterate --force` redoes its finished stage: with its command's own --force (it replaces
        its finished output), without --resume (a search or eval would otherwise continue the run it replaces). A
        command without --force (`start`, which writes its record anew at every run) as it is."""
        names = {f.name for f in dataclasses.fields(self)}
        changed = {name: value for name, value in (("force", True), ("resume", False)) if name in names}
        return dataclasses.replace(self, **changed)  # type: ignore[arg-type]

    def config_sets(self) -> list[str]:
        """The `--set`s the command's process runs with: its own, then `--model DIR` as the `--set policy.model=DIR`
        it equals (a command without them: none)."""
        sets = list(getattr(self, "sets", ()))
        if (model := getattr(self, "model", None)) is not None:
            sets.append(f"policy.model={json.dumps(model, ensure_ascii=False)}")
        return sets


@dataclass(frozen=True, slots=True, kw_only=True)
class OtherRequest(StageRequest):
    """A command line the pipeline does not build (a workflow's own step, a test's): run as it is, and reused as it
    is (no identity is computed for it). `words` is its command line after `burnqed`."""

    output: str = ""
    words: tuple[str, ...]
    force: bool = _run_flag()  # rendered after `words`

    def options(self) -> tuple[str, ...]:
        return (*self.words, *_flag("--force", self.force))


@dataclass(frozen=True, slots=True, kw_only=True)
class PrepareRequest(StageRequest):
    """`burnqed data prepare`."""

    command: ClassVar[tuple[str, ...]] = ("data", "prepare")
    force: bool = _run_flag()

    def options(self) -> tuple[str, ...]:
        return ("--output", self.output, *_flag("--force", self.force))


@dataclass(frozen=True, slots=True, kw_only=True)
class SftRequest(StageRequest):
    """`burnqed sft`: the warm start is `init` (a policy) or `start` (the start record naming one), never both."""

    command: ClassVar[tuple[str, ...]] = ("sft",)
    iteration: int = 0
    data: str
    trajectories: tuple[str, ...] = ()
    init: str | None = None
    start: str | None = None
    sets: tuple[str, ...] = ()
    force: bool = _run_flag()

    def options(self) -> tuple[str, ...]:
        return ("--iter", str(self.iteration), "--data", self.data, *_repeated("--trajectories", self.trajectories),
                *_optional("--init", self.init), *_optional("--start", self.start), *_repeated("--set", self.sets),
                "--output", self.output, *_flag("--force", self.force))


@dataclass(frozen=True, slots=True, kw_only=True)
class RlRequest(StageRequest):
    """`burnqed rl`."""

    command: ClassVar[tuple[str, ...]] = ("rl",)
    iteration: int = 0
    sft: str
    theorems: str | None = None
    split: str | None = None
    trajectories: tuple[str, ...] = ()
    force: bool = _run_flag()

    def options(self) -> tuple[str, ...]:
        return ("--iter", str(self.iteration), "--sft", self.sft, *_theorems(self.theorems, self.split),
                *_repeated("--trajectories", self.trajectories), "--output", self.output, *_flag("--force", self.force))


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportRequest(StageRequest):
    """`burnqed export`."""

    command: ClassVar[tuple[str, ...]] = ("export",)
    sft: str
    force: bool = _run_flag()

    def options(self) -> tuple[str, ...]:
        return ("--sft", self.sft, "--output", self.output, *_flag("--force", self.force))


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainEbmRequest(StageRequest):
    """`burnqed train-ebm`: a head published (`joint`, the SFT output that trained it), or one trained warm-started
    from `start` (the start record's value model) or `init`, or afresh."""

    command: ClassVar[tuple[str, ...]] = ("train-ebm",)
    iteration: int = 0
    trajectories: tuple[str, ...] = ()
    model: str | None = None
    joint: str | None = None
    start: str | None = None
    init: str | None = None
    force: bool = _run_flag()

    def options(self) -> tuple[str, ...]:
        return ("--iter", str(self.iteration), *_repeated("--trajectories", self.trajectories),
                *_optional("--model", self.model), *_optional("--joint", self.joint), *_optional("--start", self.start),
                *_optional("--init", self.init), "--output", self.output, *_flag("--force", self.force))


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchRequest(StageRequest):
    """`burnqed search`."""

    command: ClassVar[tuple[str, ...]] = ("search",)
    iteration: int = 0
    theorems: str | None = None
    split: str | None = None
    shard: str | None = None
    run_id: str | None = None
    resume: bool = _run_flag()
    ebm: str | None = None
    start: str | None = None
    model: str | None = None
    sets: tuple[str, ...] = ()
    unsolved_from: str | None = None
    force: bool = _run_flag()

    def options(self) -> tuple[str, ...]:
        return ("--iter", str(self.iteration), *_theorems(self.theorems, self.split), *_optional("--shard", self.shard),
                *_optional("--run-id", self.run_id), *_flag("--resume", self.resume),
                *_optional("--ebm", self.ebm), *_optional("--start", self.start), *_optional("--model", self.model),
                *_repeated("--set", self.sets), *_optional("--unsolved-from", self.unsolved_from),
                "--output", self.output, *_flag("--force", self.force))


@dataclass(frozen=True, slots=True, kw_only=True)
class EvalRequest(StageRequest):
    """`burnqed eval` (`budgets` as the one text --budgets takes; `ablation`: a second arm without the value model;
    `defer_judge`: its judge step, `JudgeRequest`, judges the proofs it counts)."""

    command: ClassVar[tuple[str, ...]] = ("eval",)
    iteration: int = 0
    theorems: str | None = None
    split: str | None = None
    budgets: str | None = None
    pass_n: int = 1
    resume: bool = _run_flag()
    ebm: str | None = None
    ablation: bool = False
    model: str | None = None
    sets: tuple[str, ...] = ()
    defer_judge: bool = False
    trajectories_out: str | None = None
    force: bool = _run_flag()

    def options(self) -> tuple[str, ...]:
        return ("--iter", str(self.iteration), *_theorems(self.theorems, self.split),
                *_optional("--budgets", self.budgets), "--pass-n", str(self.pass_n),
                *_flag("--resume", self.resume), *_optional("--ebm", self.ebm),
                *(("--ablation",) if self.ablation else ()), *_optional("--model", self.model),
                *_repeated("--set", self.sets), *(("--defer-judge",) if self.defer_judge else ()),
                *_optional("--trajectories-out", self.trajectories_out), "--output", self.output,
                *_flag("--force", self.force))


@dataclass(frozen=True, slots=True, kw_only=True)
class JudgeRequest(StageRequest):
    """`burnqed judge`: the deferred eval result `input_` judged by comparator into `output`."""

    command: ClassVar[tuple[str, ...]] = ("judge",)
    input_: str
    theorems: str | None = None
    split: str | None = None
    force: bool = _run_flag()

    def options(self) -> tuple[str, ...]:
        return ("--input", self.input_, *_theorems(self.theorems, self.split), "--output", self.output,
                *_flag("--force", self.force))


@dataclass(frozen=True, slots=True, kw_only=True)
class MergeRequest(StageRequest):
    """`burnqed merge-trajectories`: the prefixes to merge, in order; with comparator as the judge, the search's
    theorems its proofs are judged against (`stages.judge_merge`)."""

    command: ClassVar[tuple[str, ...]] = ("merge-trajectories",)
    inputs: tuple[str, ...]
    theorems: str | None = None
    split: str | None = None
    force: bool = _run_flag()

    def options(self) -> tuple[str, ...]:
        return (*self.inputs, *_theorems(self.theorems, self.split), "--output", self.output,
                *_flag("--force", self.force))


@dataclass(frozen=True, slots=True, kw_only=True)
class StartRequest(StageRequest):
    """`burnqed start`."""

    command: ClassVar[tuple[str, ...]] = ("start",)
    root: str
    iteration: int

    def options(self) -> tuple[str, ...]:
        return ("--root", self.root, "--iter", str(self.iteration), "--output", self.output)


@dataclass(frozen=True, slots=True, kw_only=True)
class JointStudyRequest(StageRequest):
    """`burnqed joint-study`."""

    command: ClassVar[tuple[str, ...]] = ("joint-study",)
    iteration: int
    root: str
    trajectories: tuple[str, ...] = ()
    force: bool = _run_flag()

    def options(self) -> tuple[str, ...]:
        return ("--iter", str(self.iteration), "--root", self.root, *_repeated("--trajectories", self.trajectories),
                "--output", self.output, *_flag("--force", self.force))


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportRequest(StageRequest):
    """`burnqed report`."""

    command: ClassVar[tuple[str, ...]] = ("report",)
    root: str
    iteration: int
    force: bool = _run_flag()

    def options(self) -> tuple[str, ...]:
        return ("--root", self.root, "--iter", str(self.iteration), "--output", self.output,
                *_flag("--force", self.force))
