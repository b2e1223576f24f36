"""The resume of an interrupted eval: each pass' trajectory prefix (`pass_prefix`), what an earlier run of it
committed and whether this eval may continue it (`resume_state`: the same identity, `eval.identity.EvalIdentity`,
the same budgets, mode and iteration, no theorem outside the benchmark), and each committed proof compiled again
before it counts (`recheck_committed`: a part is a file anyone can edit).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from burnqed.errors import InputError
from burnqed.eval.identity import EvalIdentity, read_identity
from burnqed.lean.env import WorkerPool
from burnqed.lean.guard import TacticGuard
from burnqed.lean.soundness import check_lemmas, check_path, check_proof_text
from burnqed.lean.stored_proof import stored_lemmas
from burnqed.records.results import FailureReason, TheoremResult
from burnqed.records.theorem import Theorem
from burnqed.search.answer import AnswerSlot
from burnqed.storage import Store
from burnqed.trajectory.reader import committed_parts, is_complete

log = logging.getLogger(__name__)


def pass_prefix(trajectories: str, pass_n: int, k: int) -> str:
    """The trajectory prefix of pass `k`: the prefix itself for pass@1, else `pass-K` under it."""
    return trajectories if pass_n == 1 else f"{trajectories.rstrip('/')}/pass-{k}"


@dataclass(frozen=True, slots=True)
class PassState:
    """What an earlier, interrupted run of one pass left under its trajectory prefix."""

    uri: str
    run_id: str | None  # the earlier run's id (its parts must keep it); None: nothing committed yet
    done: list[TheoremResult]  # results committed for theorems of the benchmark
    complete: bool  # the prefix carries its completion marker: the pass finished


def resume_state(uri: str, theorems: Sequence[Theorem], budgets: Sequence[int], mode: str, iteration: int,
                 resume: bool, *, store: Store, identity: EvalIdentity | None = None) -> PassState:
    """Read what `uri` holds and check that this eval may continue it (see the module docstring): with `identity`,
    the one the interrupted run recorded must be the same, and every theorem it committed must be in this
    benchmark (an eval on another theorem set would otherwise publish its result over the interrupted one)."""
    parts = committed_parts(uri, store=store)
    recorded = read_identity(uri, store=store) if identity is not None else None
    if not parts:  # nothing committed: a fresh start (a recorded identity is replaced), unless resuming another eval
        if resume and recorded is not None and identity is not None and \
                (difference := recorded.describe_difference(identity)):
            raise InputError(f"--trajectories-out {uri} was started by an eval that differs from this one: "
                             f"{difference}; resume with the interrupted run's theorems and configuration")
        return PassState(uri, None, [], False)
    held = sum(len(p.theorems) for p in parts)
    if not resume:
        raise InputError(f"--trajectories-out {uri} already holds {held} finished theorems of an earlier eval: "
                         "pass --resume to continue it, --force to start it over, or choose another --trajectories-out "
                         "prefix")
    if parts[0].iteration != iteration:
        raise InputError(f"--trajectories-out {uri} holds iteration {parts[0].iteration}, not --iter {iteration}: "
                         "resume with the same --iter")
    names = {t.name for t in theorems}
    done = [r for p in parts for r in p.theorems if r.name in names]
    for result in done:
        marks = [usage.budget for usage in result.usage]
        if str(result.mode) != mode or marks != list(budgets):
            raise InputError(
                f"--trajectories-out {uri}: {result.name} was evaluated in {result.mode} mode at budgets {marks}, this "
                f"eval is in {mode} mode at budgets {list(budgets)}: resume with the same --budgets and search.mode"
            )
    if recorded is not None and identity is not None and (difference := recorded.describe_difference(identity)):
        raise InputError(f"--trajectories-out {uri} holds an eval that differs from this one: {difference}; resume "
                         "with the interrupted run's theorems and configuration, or choose another --trajectories-out")
    foreign = [r.name for p in parts for r in p.theorems if r.name not in names]
    if foreign:
        raise InputError(f"--trajectories-out {uri} holds {len(foreign)} theorems that are not in this benchmark "
                         f"(e.g. {foreign[0]!r}): resume with the interrupted run's --theorems and --split, or "
                         "choose another --trajectories-out")
    return PassState(uri, parts[0].run_id, done, is_complete(uri, store=store))


NOT_RECHECKED = "the committed proof did not check again"  # a resumed result's detail when its recheck failed


async def recheck_committed(done: Sequence[TheoremResult], theorems: Sequence[Theorem], pool: WorkerPool,
                            guard: TacticGuard) -> list[TheoremResult]:
    """The results an interrupted eval committed (`PassState.done`), each proved one compiled again before it counts:
    a trajectory part is a file anyone can edit. A proved result stays as it is only when its stored proof is its
    theorem restated (`lean.soundness.assemble_proof` of the index's theorem, the result's answer filled into an open
    slot, with its tactics and the lemmas the file declares, `stored_lemmas`), the guard allows its answer, tactics
    and lemmas (`check_lemmas`), and `lean.soundness.check_proof_text` verifies it
    on a worker of `pool` (as whole mode's compile); else it is not proved (`recheck_failed`, the detail saying why).
    The checks' Lean calls are the eval's, as the answer checks' are, not the search's: the cost figures stay those the
    search recorded (an honest resume scores what an uninterrupted eval does). A Lean that cannot start raises."""
    by_name = {theorem.name: theorem for theorem in theorems}

    async def recheck(result: TheoremResult) -> TheoremResult:
        if not result.proved:
            return result
        theorem = by_name[result.name]
        reason = await _recheck_reason(result, theorem, pool, guard)
        if reason is None:
            return result
        log.warning("%s: %s (%s); counted as not proved", result.name, NOT_RECHECKED, reason)
        return result.model_copy(update={
            "proved": False, "failure_reason": FailureReason.RECHECK_FAILED, "detail": f"{NOT_RECHECKED}: {reason}",
            "proof": None, "tactics": [], "depth": None, "budget_at_proof": None, "revision_at_proof": None,
            "answer": AnswerSlot(theorem).dropped(result.answer)})

    checked = list(await asyncio.gather(*(recheck(result) for result in done)))
    if any(result.proved for result in done):
        log.info("resumed: %d committed proofs compiled again, %d of them counted", sum(r.proved for r in done),
                 sum(r.proved for r in checked))
    return checked


async def _recheck_reason(result: TheoremResult, theorem: Theorem, pool: WorkerPool, guard: TacticGuard
                          ) -> str | None:
    """Why the proof `result` holds does not count for `theorem` (`recheck_committed`), or None when it does."""
    if not result.proof:
        return "the result is marked proved but holds no proof text"
    compiled = AnswerSlot(theorem).compiled(result.answer, guard)
    if isinstance(compiled, str):
        return compiled
    lemmas = stored_lemmas(result.proof, compiled, result.tactics)  # () when the file declares none
    if lemmas is None:
        return ("its text does not restate this theorem: it is not the index's header" +
                (" (its answer filled in)" if compiled is not theorem else "") +
                " and declaration followed by the result's tactics")
    for allowed in (check_path(result.tactics, guard), check_lemmas(lemmas, compiled, guard)):
        if not allowed.ok:
            return allowed.reason
    async with pool.lease(f"{theorem.name} (recheck)", header=theorem.header) as lean:
        verdict = await check_proof_text(lean, theorem.name, result.proof, index_header=theorem.header,
                                         header=compiled.header, lemmas=lemmas)
    return None if verdict.verified else verdict.reason or "the compile did not verify it"
