"""The reward is the verifier: 1.0 for a completion that is a counted whole proof of its theorem, else 0.0
(docs/training.md, "Reward from Lean's verdict").

    reward = LeanReward(theorems, lambda: LeanPool.from_config(cfg.lean), guard, RewardSettings(fmt=fmt))
    with reward:
        rows = reward.rows()                       # the dataset: {"prompt": the whole prompt, "theorem": its name}
        rewards = reward(prompts=prompts, completions=completions, theorem=names)   # TRL's calling convention
        rewards = await reward.judge(prompts, completions, names)   # the same on the caller's event loop
        reward.last                                # that call's RewardStats (verified, Lean seconds, cache hits)
    GRPOTrainer(..., reward_funcs=reward, train_dataset=Dataset.from_list(rows))
    LeanReward(theorems, open_pool, guard, RewardSettings(fmt, form, repair=repair_fmt), failed=failed)  # + repairs

With a repair format (`RewardSettings.repair`) and `failed` proofs (`rl.failures`), the rows also hold each failed
proof's repair prompt, byte for byte what whole and hybrid search send to revise it (`search.repair.repair_prompt`);
a completion of it is read as search reads a revision (`read_whole` in the repair format) and judged alike.

A completion earns 1.0 on the evidence whole search counts a proof on, through the functions it calls
(`search.whole.read_whole`: the completion read as whole mode reads it, the answer of an open slot included, the
tactic guard; `search.whole.check_whole`: the compile, the axioms check and the kernel recheck), and, for a theorem
whose answer is open, only when Lean shows its answer equal to the reference (`search.answer_check`: a proof with a
`different`, `undecided` or unreferenced answer earns 0.0; docs/training.md says why). A refusal, a compile
error, `sorry`, a timeout, a crashed worker or an empty completion earns 0.0 and is counted, never raised; only a Lean
that cannot start (`LeanStartError`) or bad input (`InputError`: an unknown theorem, a prompt that is neither the
theorem's whole prompt nor the repair prompt of one of its failed proofs) raises. The compiles go through the Lean
pool the caller's factory opens (its verifier workers, in parallel); verdicts are cached by (theorem name, file
compiled), so identical completions compile once. The pool lives on the event loop of the first call: `judge`'s
caller's (TRL's own loop, which awaits an async reward function: `rl.grpo_step.RecordingReward`), or, for a
synchronous call, an event loop thread of the reward's own; a later synchronous call and `close()` run there.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self, TypeVar

from burnqed.errors import InputError
from burnqed.lean.env import LeanEnv, WorkerPool
from burnqed.lean.guard import TacticGuard, read_off_loop
from burnqed.lean.soundness import Verdict
from burnqed.records.enums import DeclarationForm
from burnqed.records.replies import first_line
from burnqed.records.theorem import Theorem
from burnqed.rl.failures import FailedProof
from burnqed.search.answer import AnswerSlot
from burnqed.search.answer_check import judge_answer
from burnqed.search.repair import repair_prompt
from burnqed.search.whole import WholeAttempt, check_whole, read_whole, whole_prompt
from burnqed.text.prompt import PromptFormat, is_repair_format, is_statement_format, whole_format_of

THEOREM_COLUMN = "theorem"  # the dataset column (hence TRL's keyword argument) naming each prompt's theorem

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RewardSettings:
    """How the prompts are written and the completions read: whole search's `policy.prompt_format` family's whole
    format and `policy.declaration_form` (`stages.search` builds whole mode's from the same fields), and the repair
    format of that family when repair prompts are served (search.repair_rounds > 0: `text.prompt.repair_format`, as
    search asks it); None serves whole prompts alone."""

    fmt: PromptFormat = PromptFormat.PLAIN_WHOLE
    form: DeclarationForm = DeclarationForm.BINDER
    repair: PromptFormat | None = None


@dataclass(frozen=True, slots=True)
class RewardStats:
    """One call's rewards (in the completions' order) and what they cost."""

    rewards: tuple[float, ...]
    reasons: tuple[str, ...]  # why each completion earned 0.0 (the verdict's first line); "" for a verified one
    verified: int  # completions that earned 1.0
    refused: int  # refused before Lean: no proof, no answer, another statement, a denied tactic or answer
    compiles: int  # compiles sent to Lean
    failures: int  # compiles that came back with no verdict of Lean's (a timeout, a crashed worker): 0.0
    cache_hits: int  # completions whose verdict an earlier (or a concurrent identical) completion's compile gave
    lean_s: float  # seconds of the compiles (waiting for a verifier worker included), summed
    wall_s: float
    verdicts: tuple[Verdict, ...] = ()  # each completion's verdict (its compile's reply: Lean's messages on a failure)

    def metrics(self) -> dict[str, float]:
        """The scalars a trainer logs per call (TRL's `log_metric` averages them over each logging step)."""
        return {"lean/verified": float(self.verified), "lean/refused": float(self.refused),
                "lean/compiles": float(self.compiles), "lean/failures": float(self.failures),
                "lean/cache_hits": float(self.cache_hits), "lean/seconds": self.lean_s}


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


@dataclass(frozen=True, slots=True)
class _Judged:
    verdict: Verdict
    compiled: bool  # this completion's own compile (not a cache hit)
    lean_s: float = 0.0
    hit: bool = False


class LeanReward:
    """TRL's reward function over a fixed set of theorems (and the `failed` proofs of theorems among them whose
    repair prompts it serves); see the module docstring. `open_pool` makes the Lean pool (an async context manager),
    entered on the event loop of the first call and left by `close()` on that loop."""

    def __init__(self, theorems: Sequence[Theorem], open_pool: Callable[[], AbstractAsyncContextManager[WorkerPool]],
                 guard: TacticGuard, settings: RewardSettings | None = None,
                 failed: Sequence[FailedProof] = ()) -> None:
        self.settings = settings or RewardSettings()
        if not is_statement_format(self.settings.fmt):
            raise InputError(f"the reward reads whole proofs: prompt format {self.settings.fmt} is not a whole format")
        repair = self.settings.repair
        if repair is not None and (not is_repair_format(repair) or whole_format_of(repair) != self.settings.fmt):
            raise InputError(f"prompt format {repair} is not the repair format of {self.settings.fmt}")
        self.theorems: dict[str, Theorem] = {}
        for theorem in theorems:
            if theorem.name in self.theorems:
                raise InputError(f"theorem {theorem.name} is given twice: the reward names each theorem once")
            if theorem.statement is None:
                raise InputError(f"theorem {theorem.name} has no statement: a whole prompt shows it and the compile "
                                 "restates it")
            self.theorems[theorem.name] = theorem
        self.prompts = {name: whole_prompt(t, self.settings.fmt, self.settings.form)
                        for name, t in self.theorems.items()}
        self.repairs = self._repair_prompts(failed)
        self.guard = guard
        self.last: RewardStats | None = None
        self._open_pool = open_pool
        self._pool: WorkerPool | None = None
        self._stack: contextlib.AsyncExitStack | None = None
        # (theorem name, the file compiled) → Lean's verdict: what `check_proof_text` is a function of (the file holds
        # the header, answer and statement; names are unique among the theorems)
        self._cache: dict[tuple[str, str], Verdict] = {}
        self._pending: dict[tuple[str, str], asyncio.Task[_Judged]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None  # the synchronous call's own loop (thread)
        self._thread: threading.Thread | None = None
        self._pool_loop: asyncio.AbstractEventLoop | None = None  # the loop the pool was entered on

    def _repair_prompts(self, failed: Sequence[FailedProof]) -> dict[str, dict[str, FailedProof]]:
        """Theorem → the repair prompt of each of its failed proofs → that failed proof."""
        repairs: dict[str, dict[str, FailedProof]] = {}
        for failure in failed:
            theorem = self.theorems.get(failure.theorem)
            if self.settings.repair is None:
                raise InputError("failed proofs were given without a repair format to prompt them in "
                                 "(RewardSettings.repair)")
            if theorem is None:
                raise InputError(f"a failed proof of theorem {failure.theorem!r}, which the reward was not given")
            if not AnswerSlot(theorem).record_repairable:
                raise InputError(f"a failed proof of {theorem.name}, whose answer is open: its repair prompt shows the "
                                 "failed attempt's answer, which a failed proof's record does not hold")
            prompt = repair_prompt(self.settings.repair, theorem, theorem.declaration(self.settings.form),
                                   failure.feedback, failure.revision)
            repairs.setdefault(theorem.name, {})[prompt] = failure
        return repairs

    def rows(self) -> list[dict[str, str]]:
        """The training rows: each theorem's whole prompt, byte for byte what whole search sends, and its name; then
        the repair prompt of each failed proof given, byte for byte what search sends to revise it, and its theorem's
        name."""
        return [{"prompt": self.prompts[name], THEOREM_COLUMN: name} for name in self.theorems] + [
            {"prompt": prompt, THEOREM_COLUMN: name} for name, prompts in self.repairs.items() for prompt in prompts]

    # ------------------------------------------------------------------------------------------ TRL's convention

    def __call__(self, prompts: Sequence[str], completions: Sequence[str], theorem: Sequence[str] | None = None,
                 **kwargs: Any) -> list[float]:
        """`judge` for a caller without an event loop (`run`)."""
        return self.run(self.judge(prompts, completions, theorem, **kwargs))

    async def judge(self, prompts: Sequence[str], completions: Sequence[str], theorem: Sequence[str] | None = None,
                    **kwargs: Any) -> list[float]:
        """TRL's `reward_func(prompts=…, completions=…, completion_ids=…, **columns, trainer_state=…, log_extra=…,
        log_metric=…)`: one reward per completion, in order; the call's statistics go to `log_metric`, each
        completion's reason to `log_extra` (column `lean_verdict`), when given."""
        stats = await self.score(prompts, completions, theorem)
        log_extra = kwargs.get("log_extra")
        if callable(log_extra):
            log_extra("lean_verdict", list(stats.reasons))
        log_metric = kwargs.get("log_metric")
        if callable(log_metric):
            for name, value in stats.metrics().items():
                log_metric(name, value)
        return list(stats.rewards)

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run `coroutine` on the loop the pool lives on (an async caller's, such as TRL's, which must still run),
        else on the reward's own event loop thread (started at the first call), and wait for it."""
        loop = self._pool_loop
        if loop is None:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=self._loop.run_forever, name="burnqed-reward", daemon=True)
                self._thread.start()
            loop = self._loop
        if _running_loop() is loop:
            raise RuntimeError("LeanReward was called from its own event loop: await score() there instead")
        if loop is not self._loop and not loop.is_running():  # nothing would ever run the coroutine
            raise RuntimeError("LeanReward's pool lives on an event loop that no longer runs: close the reward first")
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result()

    def close(self) -> None:
        """Leave the pool (its workers stop) on the loop it was entered on, and stop the reward's own event loop
        thread. Idempotent."""
        if self._stack is not None:
            stack, self._stack, self._pool = self._stack, None, None
            try:
                self.run(stack.aclose())
            finally:
                self._pool_loop = None
        if self._loop is None:
            return
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join()
        loop.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------------ verdicts

    async def score(self, prompts: Sequence[str], completions: Sequence[str],
                    theorem: Sequence[str] | None) -> RewardStats:
        """The rewards of `completions` (of `prompts`, prompt i being theorem `theorem[i]`'s whole prompt or a repair
        prompt of one of its failed proofs), judged concurrently on the reward's pool; sets `last`. Runs on the loop
        the pool lives on (the first call's)."""
        started = time.perf_counter()
        read = self._check_batch(prompts, completions, theorem)
        if self._pool_loop is not None and asyncio.get_running_loop() is not self._pool_loop:
            raise RuntimeError("LeanReward was awaited on another event loop than its pool's: await it on one loop, "
                               "or call it (it runs there)")
        if self._pool is None:
            stack = contextlib.AsyncExitStack()
            self._pool = await stack.enter_async_context(self._open_pool())
            self._stack, self._pool_loop = stack, asyncio.get_running_loop()
        judged = await asyncio.gather(*(self._judge(name, fmt, text)
                                        for (name, fmt), text in zip(read, completions, strict=True)))
        rewards = tuple(1.0 if j.verdict.verified else 0.0 for j in judged)
        own = [j for j in judged if j.compiled]
        stats = RewardStats(
            rewards=rewards,
            reasons=tuple("" if j.verdict.verified else first_line(j.verdict.reason) for j in judged),
            verified=sum(1 for r in rewards if r == 1.0),
            refused=sum(1 for j in judged if not j.compiled and not j.hit),
            compiles=len(own),
            failures=sum(1 for j in own if not j.verdict.compiled),
            cache_hits=sum(1 for j in judged if j.hit),
            lean_s=sum(j.lean_s for j in own),
            wall_s=time.perf_counter() - started,
            verdicts=tuple(j.verdict for j in judged),
        )
        self.last = stats
        return stats

    def _check_batch(self, prompts: Sequence[str], completions: Sequence[str],
                     theorem: Sequence[str] | None) -> list[tuple[str, PromptFormat]]:
        """The theorem of each completion and the format its prompt is in, after the input is checked: one theorem
        name, one prompt and one text per completion, each name a theorem of the reward, each prompt its whole prompt
        or the repair prompt of one of its failed proofs."""
        if theorem is None:
            raise InputError(f"the reward needs the dataset column {THEOREM_COLUMN!r} (each prompt's theorem name): "
                             "build the dataset from LeanReward.rows()")
        if not len(prompts) == len(completions) == len(theorem):
            raise InputError(f"{len(completions)} completions with {len(prompts)} prompts and {len(theorem)} theorem "
                             "names: one of each per completion")
        read: list[tuple[str, PromptFormat]] = []
        for index, (prompt, completion, name) in enumerate(zip(prompts, completions, theorem, strict=True)):
            if name not in self.theorems:
                raise InputError(f"completion {index} names theorem {name!r}, which the reward was not given")
            if not isinstance(completion, str):
                raise InputError(f"completion {index} is a {type(completion).__name__}, not text: the reward reads "
                                 "completions of a standard (text) dataset, not a conversational one")
            if prompt == self.prompts[name]:
                read.append((name, self.settings.fmt))
            elif self.settings.repair is not None and prompt in self.repairs.get(name, {}):
                read.append((name, self.settings.repair))
            else:
                repairs = (f" nor the repair prompt of one of its {len(self.repairs.get(name, {}))} failed proofs "
                           f"({self.settings.repair})" if self.settings.repair is not None else "")
                raise InputError(f"the prompt of completion {index} is not the whole prompt of {name} (format "
                                 f"{self.settings.fmt}){repairs}: its completion would be read in another format")
        return read

    async def _judge(self, name: str, fmt: PromptFormat, completion: str) -> _Judged:
        theorem = self.theorems[name]
        attempt = await read_off_loop(completion, lambda: read_whole(theorem, fmt, completion, self.guard))
        if attempt.refusal is not None:
            return _Judged(Verdict(False, attempt.refusal), compiled=False)
        assert attempt.proof is not None  # every theorem has a statement (checked when the reward was made)
        key = (name, attempt.proof)
        cached = self._cache.get(key)
        if cached is not None:
            return _Judged(cached, compiled=False, hit=True)
        pending = self._pending.get(key)
        if pending is not None:  # the same proof in this batch, compiling now: its verdict
            return _Judged((await asyncio.shield(pending)).verdict, compiled=False, hit=True)
        task = asyncio.ensure_future(self._compile(theorem, attempt))
        self._pending[key] = task
        try:
            judged = await asyncio.shield(task)
        finally:
            del self._pending[key]
        if judged.verdict.compiled:  # Lean's verdict; a timeout or a crash is no verdict on the proof: asked again
            self._cache[key] = judged.verdict
        return judged

    async def _compile(self, theorem: Theorem, attempt: WholeAttempt) -> _Judged:
        assert self._pool is not None
        async with self._pool.lease(theorem.name, header=theorem.header) as lean:
            started = time.perf_counter()
            verdict = await check_whole(lean, theorem, attempt)
            if verdict.verified and AnswerSlot(theorem).judged and attempt.answer is not None:
                verdict = await self._reference(lean, theorem, attempt, verdict)
            return _Judged(verdict, compiled=True, lean_s=time.perf_counter() - started)

    async def _reference(self, lean: LeanEnv, theorem: Theorem, attempt: WholeAttempt, verdict: Verdict) -> Verdict:
        """A verified proof of an answer-produced theorem earns 1.0 only when its answer is the reference's
        (`search.answer_check`: Lean proves the slot's constant `equal` to it, under the header the proof compiled
        under, `attempt.theorem.header`); `different`, `undecided` and `no reference` earn 0.0, the reason naming the
        header judged by its sha256. A check Lean gave no verdict on (a timeout, a crash) is no verdict on the
        completion: not cached."""
        assert attempt.answer is not None
        judged = await judge_answer(lean, theorem, attempt.answer, self.guard,
                                    compiled_under=attempt.theorem.header or "")
        if judged.equal:
            return verdict
        header = f" (header sha256 {judged.header_sha256})" if judged.header_sha256 is not None else ""
        return Verdict(False, f"the answer {first_line(attempt.answer)!r} is not shown to be the reference answer "
                       f"({judged.verdict}){header}: {judged.reason}", verdict.proof, compiled=judged.answered)
