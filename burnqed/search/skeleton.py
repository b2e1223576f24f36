"""What the search engines share, once (docs/search.md, "One skeleton"): plain functions each engine calls
around its own algorithm, not a base class to inherit, and the one state every engine holds.

    self.core = EngineCore.of(theorem, CountingLean(lean), policy, guard, settings.form, settings.marks, root, value)
    return await run_search(start, loop, finish)     # start errors and a worker that keeps dying, classified
    answer = await ask_within(core, timeout_s, lambda: ask(policy, prompts, sampling, seeds), places=..., new_id=...)
    completions = answer.take_all()   # None above: out of time; tokens counted as taken, refusals recorded
    verdict = await verify_closing(lean, theorem, guard, tactics, final, compile=..., reclose=..., charge=...,
                                    index_header=...)
    proof = proofs.count(edge, verdict, tactics, budget)   # None: the closing row then says why it does not count
    result = final_result(core, mode, ending, Spent.of(core), nodes_expanded=..., ...)

What each function decides (Lean's failures classified, when a closing path counts, the result's labels and proof
shown) is the table of that docs section; only verified proofs count.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from burnqed.errors import LeanError, LeanProtocolError, LeanStartError, LeanStatesLostError
from burnqed.lean.env import LeanEnv
from burnqed.lean.guard import TacticGuard
from burnqed.lean.soundness import Verdict, verify_proof
from burnqed.policy.base import Completion, Policy, prompt_error
from burnqed.records.enums import DeclarationForm, SearchMode
from burnqed.records.replies import TacticKind, TacticResult, first_line
from burnqed.records.results import Edge, EdgeOutcome, FailureReason, TheoremResult
from burnqed.records.theorem import Theorem
from burnqed.search.answer import AnswerSlot
from burnqed.search.rebuild import LeanGone
from burnqed.search.root import Root
from burnqed.search.usage import CountingLean, UsageMeter, Waits
from burnqed.search.value import ValueFn
from burnqed.trajectory.labels import label_edges

EDGE_OUTCOME = {
    TacticKind.SUCCESS: EdgeOutcome.OK,
    TacticKind.ERROR: EdgeOutcome.ERROR,
    TacticKind.PARSE_ERROR: EdgeOutcome.ERROR,
    TacticKind.CRASH: EdgeOutcome.ERROR,
    TacticKind.TIMEOUT: EdgeOutcome.TIMEOUT,
    TacticKind.REFUSED: EdgeOutcome.REFUSED,
}
UNVERIFIED_ROW = "not counted: unverified (compile skipped: search.verify=false)"
LOST_RECLOSE = "the closing step did not replay after the Lean worker was replaced"

Ending = tuple[FailureReason | None, str | None]  # why the search ended (None: a proof) and more on it


@dataclass(slots=True)
class SearchOutcome:
    """A theorem's result and every edge its search tried (labelled)."""

    result: TheoremResult
    edges: list[Edge]
    speculated: int = 0  # nodes the policy was asked about ahead of their expansion (step search only)
    speculation_used: int = 0  # of those, the ones expanded

    @property
    def units(self) -> int:
        """The budget the search spent, in its mode's unit (`TheoremResult.spent`)."""
        return self.result.spent()


# ------------------------------------------------------------------------------------------------ the run


async def run_search(
    start: Callable[[], Awaitable[object]],
    loop: Callable[[], Awaitable[FailureReason | None]],
    finish: Callable[[FailureReason | None, str | None], SearchOutcome],
) -> SearchOutcome:
    """Start the theorem, run the engine's loop and finish, with Lean's failures classified (module docstring)."""
    try:
        await start()
    except LeanProtocolError as exc:
        return finish(FailureReason.START_ERROR, first_line(exc.desc or str(exc)))
    except LeanStartError:
        raise  # the pool cannot start a worker: infrastructure (the run stops), not this theorem's result
    except LeanError as exc:
        return finish(FailureReason.LEAN_ERROR, first_line(str(exc)))
    try:
        return finish(await loop(), None)
    except LeanGone as exc:
        return finish(FailureReason.LEAN_ERROR, str(exc))


# ------------------------------------------------------------------------------------------------ the waits


@dataclass(frozen=True, slots=True)
class Place:
    """Where the row of a prompt the policy refused goes in the trajectory: under the node asked about (`parent_id`),
    one deeper than it (`depth`), from its `state`."""

    parent_id: int
    depth: int
    state: str


@dataclass(frozen=True, slots=True)
class Answer:
    """The policy's answer to one request asked before the search's deadline (`ask_within`): per prompt its
    completions, whose tokens the search's meter counts as the engine takes them (`take`, `take_all`), why the policy
    refused it (None: answered; recorded already), and the seconds waited."""

    meter: UsageMeter
    asked: list[list[Completion]]
    refusals: list[str | None]
    rows: list[Edge | None]  # a refused prompt's row, when it has a place in the trajectory
    seconds: float

    def refusal(self, index: int = 0) -> str | None:
        """Why the policy could not take prompt `index` (its prompt does not fit), or None."""
        return self.refusals[index]

    def gen_ms(self) -> float:
        """Each prompt's share of the wait, in milliseconds."""
        return self.seconds * 1000 / max(len(self.asked), 1)

    def take(self, index: int = 0) -> Iterator[Completion]:
        """Prompt `index`'s completions in sample order, each one's tokens counted on the meter as it is taken (a
        mark reached between two of them records the tokens of those taken so far)."""
        for completion in self.asked[index]:
            self.meter.add_tokens(completion.n_tokens)
            yield completion

    def take_all(self) -> list[list[Completion]]:
        """Every prompt's completions, every token counted now."""
        return [list(self.take(index)) for index in range(len(self.asked))]


async def ask_within(core: EngineCore[Any], timeout_s: float,
                     asking: Callable[[], Awaitable[list[list[Completion]]]], *,
                     places: Sequence[Place] = (), new_id: Callable[[], int] | None = None) -> Answer | None:
    """The one way every engine asks the policy: `asking()` (a request, or several gathered, one list of completions
    a prompt) awaited until the search has run `timeout_s` seconds (`core.meter.elapsed()`; none left: it times out
    at once), the wait charged to `core.waits.policy_s`; None when the time ran out first. Each prompt the policy
    refused is recorded in `core.refusals`, and, when the prompt has a place (`places[index]`), as a refusal row
    (`refusal_row`, its id from `new_id`, its share of the wait) in `core.edges`, in prompt order."""
    started = time.perf_counter()
    try:
        async with asyncio.timeout(max(timeout_s - core.meter.elapsed(), 0.0)):
            completions = await asking()
    except TimeoutError:
        completions = None
    seconds = time.perf_counter() - started
    core.waits.policy_s += seconds
    if completions is None:
        return None
    refusals = [prompt_error(prompt) for prompt in completions]
    rows: list[Edge | None] = []
    for index, refusal in enumerate(refusals):
        row = None
        if refusal is not None:
            core.refusals.append(refusal)
            if index < len(places) and new_id is not None:
                place = places[index]
                row = refusal_row(new_id(), place.parent_id, place.depth, place.state, refusal,
                                  seconds * 1000 / len(completions))
                core.edges.append(row)
        rows.append(row)
    return Answer(core.meter, completions, refusals, rows, seconds)


# ---------------------------------------------------------------------------------------------- closing paths


async def verify_closing(
    lean: LeanEnv,
    theorem: Theorem,
    guard: TacticGuard,
    tactics: list[str],
    final: TacticResult,
    *,
    compile: bool,
    reclose: Callable[[], Awaitable[TacticResult | None]],
    charge: Callable[[float], None],
    index_header: str | None,
) -> Verdict:
    """The soundness verdict on `tactics`, whose last step gave `final` (every goal closed). `reclose` applies the
    last step again (on the rebuilt parent) after the worker was replaced; `charge` books the time spent in Lean;
    `index_header`: the theorem's header as the index gives it (`theorem`'s may hold a filled answer)."""
    while True:
        started = time.perf_counter()
        try:
            return await verify_proof(lean, theorem, tactics, final, guard, compile=compile,
                                      index_header=index_header)
        except LeanStatesLostError:
            pass
        finally:
            charge(time.perf_counter() - started)
        # The worker was replaced before the root could be printed: close the goal again on the new one.
        again = await reclose()
        if again is None or not again.closed_all_goals:
            return Verdict(False, LOST_RECLOSE)
        final = again


@dataclass(frozen=True, slots=True)
class Stop:
    """A search stops: why (None: with a proof)."""

    reason: FailureReason | None


@dataclass(slots=True)
class Proof:
    """A closing path that passed the soundness rules: its closing row's id, the proof text, its tactics and the
    budget spent when it was found (in the engine's unit)."""

    edge: int
    proof: str | None
    tactics: list[str]
    budget: int
    revision: int = 0  # its place in a repair chain: 0 a fresh attempt, k its k-th revision (docs/search.md, "Repair")
    answer: str | None = None  # the answer it gives an open answer slot (whole, hybrid: `search.answer`)


@dataclass(slots=True)
class Proofs:
    """The proofs a search found (verified, and unverified when the compile is skipped) and the closing paths the
    soundness rules rejected."""

    verified: list[Proof] = field(default_factory=list)
    unverified: list[Proof] = field(default_factory=list)
    rejected: int = 0

    def found(self) -> bool:
        """A proof to report: verified, or unverified when the compile is skipped."""
        return bool(self.verified or self.unverified)

    def ending(self, reason: FailureReason) -> FailureReason | None:
        """Why a search that stops for `reason` ended: no failure once a verified proof was found."""
        return None if self.verified else reason

    def limit(self, stop_at_first: bool, elapsed_s: float, timeout_s: float, spent: int, budget: int,
              over_budget: FailureReason) -> Stop | None:
        """The limits every engine checks before its next step, in order: the first proof (`stop_at_first`), the
        time, the budget (`spent` of `budget` in the engine's unit, `over_budget` when it is used up)."""
        if self.found() and stop_at_first:
            return Stop(None)
        if elapsed_s >= timeout_s:
            return Stop(self.ending(FailureReason.TIMEOUT))
        if spent >= budget:
            return Stop(self.ending(over_budget))
        return None

    def count(self, edge: Edge, verdict: Verdict, tactics: list[str], budget: int, revision: int = 0) -> Proof | None:
        """Record `verdict` on the closing path ending at `edge`: the proof (verified or not), or None when it was
        rejected. A closing row that does not count says why in its error."""
        if not verdict.ok:
            self.rejected += 1
            edge.error = f"not counted: {verdict.reason}"
            return None
        proof = Proof(edge.node_id, verdict.proof, tactics, budget, revision)
        if verdict.verified:
            self.verified.append(proof)
        else:
            self.unverified.append(proof)
            edge.error = UNVERIFIED_ROW
        return proof

    def accept(self, edge: Edge, verdict: Verdict, tactics: list[str], budget: int,
               revision: int = 0) -> Proof | None:
        """Record a sketch subgoal's closing path ending at `edge` as `search.root.accept_subgoal` judged it: a proof
        with no text (what counts is the assembled proof's compile), or None, the row then saying why not."""
        if not verdict.ok:
            self.rejected += 1
            edge.error = f"not counted: {verdict.reason}"
            return None
        proof = Proof(edge.node_id, None, tactics, budget, revision)
        self.verified.append(proof)
        return proof


# ------------------------------------------------------------------------------------------ the state

L = TypeVar("L", bound=CountingLean)


@dataclass(slots=True)
class EngineCore(Generic[L]):
    """One theorem's search as every engine holds it (`EngineCore.of`, once in its constructor): what it searches
    and with what, and what it has spent and found so far. The engine adds only its own algorithm's fields.

        self.core = EngineCore.of(theorem, CountingLean(lean), policy, guard, settings.form, settings.marks,
                                  root, value)
        self.core.waits.policy_s          # its one set of timers: the policy, Lean, the value model
        self.core.proofs.count(...)       # its proofs, refusals, rows and meter, read by `final_result`

    `lean` counts this search's Lean requests (a sketch search's also its elaborations: `CountingLean.counted`).
    `start_generation` is the worker generation of its root (set again once the root exists) and `own_restarts`
    the worker crashes or hangs its own requests caused (`search.rebuild`)."""

    theorem: Theorem
    slot: AnswerSlot  # where its answer slot stands
    declaration: str | None  # what the prompts show; recorded in the result
    lean: L
    policy: Policy
    guard: TacticGuard
    value: ValueFn | None
    root: Root  # the theorem's start, or a sketch's subgoal
    seed_key: str  # what the sampling seeds are keyed on
    meter: UsageMeter  # its clock is the search's
    start_generation: int
    waits: Waits = field(default_factory=Waits)
    proofs: Proofs = field(default_factory=Proofs)
    refusals: list[str] = field(default_factory=list)  # why the policy could not answer, one entry per refused prompt
    edges: list[Edge] = field(default_factory=list)
    own_restarts: int = 0

    @classmethod
    def of(cls, theorem: Theorem, lean: L, policy: Policy, guard: TacticGuard, form: DeclarationForm,
           marks: tuple[int, ...], root: Root | None = None, value: ValueFn | None = None) -> EngineCore[L]:
        """The state of a search of `theorem` not started yet, from `root` (None: the theorem's start), its meter
        marked at the budgets `marks` (the root's meter when it brings one)."""
        root = root if root is not None else Root()
        return cls(theorem, AnswerSlot(theorem), theorem.declaration(form), lean, policy, guard, value, root,
                   root.seed_key or theorem.name, root.meter_for(marks, lean), lean.generation)


# ------------------------------------------------------------------------------------------------- rows


def tactic_row(
    node_id: int, parent_id: int, depth: int, state_before: str, tactic: str, result: TacticResult,
    *, logprob: float = 0.0, n_tokens: int = 0, gen_ms: float = 0.0,
) -> Edge:
    """The trajectory row of one tactic Lean answered (or the guard refused); `state_after` is set by the caller."""
    return Edge(
        node_id=node_id, parent_id=parent_id, depth=depth, state_before=state_before, tactic=tactic,
        state_after=None, outcome=EDGE_OUTCOME[result.kind],
        error=first_line(result.reason) if result.kind is not TacticKind.SUCCESS else None, logprob=logprob,
        n_tokens=n_tokens, score=None, energy=None, lean_ms=result.elapsed_ms, gen_ms=gen_ms,
        timestamp_ms=int(time.time() * 1000),
    )


def refusal_row(node_id: int, parent_id: int, depth: int, state_before: str, reason: str, gen_ms: float) -> Edge:
    """A failed expansion as a trajectory row: the policy could not be asked (its prompt does not fit)."""
    return Edge(
        node_id=node_id, parent_id=parent_id, depth=depth, state_before=state_before, tactic="",
        state_after=None, outcome=EdgeOutcome.PROMPT_REJECTED, error=first_line(reason), logprob=0.0, n_tokens=0,
        score=None, energy=None, lean_ms=0.0, gen_ms=gen_ms, timestamp_ms=int(time.time() * 1000),
    )


# ----------------------------------------------------------------------------------------------- the result


def refused_ending(reason: FailureReason | None, detail: str | None, proved: bool, refusals: list[str]) -> Ending:
    """Nothing left to expand because the policy could not be asked: say so, not "exhausted"."""
    if not proved and reason in (None, FailureReason.EXHAUSTED) and refusals:
        return (FailureReason.PROMPT_REJECTED,
                f"the policy refused {len(refusals)} prompt(s); first: {first_line(refusals[0])}")
    return reason, detail


@dataclass(frozen=True, slots=True)
class Spent:
    """The search's wall time and its waits, in seconds."""

    time_s: float
    policy_s: float
    lean_s: float
    value_s: float = 0.0

    @classmethod
    def of(cls, core: EngineCore[Any]) -> Spent:
        """The result's clocks: the search's wall time (its meter's) and its waits, now."""
        waits = core.waits
        return cls(core.meter.elapsed(), waits.policy_s, waits.lean_s, waits.value_s)


def final_result(
    core: EngineCore[Any],
    mode: SearchMode,
    ending: Ending,
    spent: Spent,
    *,
    nodes_expanded: int = 0,
    proofs_sampled: int = 0,
    repaired: int = 0,
    revisions: int = 0,
) -> TheoremResult:
    """Label `core`'s rows (only verified proofs' paths positive; an unverified path stays unknown, never trained on)
    and build the theorem's result from `core` (its proofs, rows, refused prompts and meter) and the engine's counts."""
    theorem, proofs, edges, meter = core.theorem, core.proofs, core.edges, core.meter
    proved = bool(proofs.verified)
    reason, detail = ending
    label_edges(edges, [proof.edge for proof in proofs.verified], proved)
    best = min(proofs.verified, key=lambda p: p.budget) if proved else None
    unverified = min(proofs.unverified, key=lambda p: p.budget) if not proved and proofs.unverified else None
    shown = best or unverified
    if unverified is not None:
        reason = FailureReason.UNVERIFIED
        detail = "a proof passed the step-level rules; search.verify=false skipped the compile"
    return TheoremResult(
        name=theorem.name,
        declaration=core.declaration,
        header=theorem.header,
        answer=core.slot.stored(shown.answer if shown else None),
        mode=mode,
        proved=proved,
        unverified=unverified is not None,
        proof=shown.proof if shown else None,
        tactics=shown.tactics if shown else [],
        failure_reason=None if proved else (reason or FailureReason.EXHAUSTED),
        detail=None if proved else detail,
        nodes_expanded=nodes_expanded,
        proofs_sampled=proofs_sampled,
        budget_at_proof=best.budget if best else None,
        edges=len(edges),
        depth=len(shown.tactics) if shown else None,
        rejected_proofs=proofs.rejected,
        rejected_prompts=len(core.refusals),
        time_s=round(spent.time_s, 6),
        policy_s=round(spent.policy_s, 6),
        lean_s=round(spent.lean_s, 6),
        value_s=round(spent.value_s, 6),
        tokens=meter.tokens,
        lean_calls=meter.lean_calls,
        usage=meter.finish(),
        curve=meter.curve(),
        repaired=repaired,
        revisions=revisions,
        revision_at_proof=best.revision if best else None,
    )
