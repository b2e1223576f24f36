"""RL's rollouts kept as a whole-mode trajectory (docs/trajectories.md, "RL rollouts"), so that the next iteration's
SFT reads a verified rollout as a whole-proof example and a failed one with Lean's messages as a repair example, as it
reads whole search's rows.

    feedback = rollout_feedback(theorem, fmt, completion, guard, verdict, repair)  # a failed rollout's messages or None
    searches, left_out = rollout_searches(rollouts, theorems, fmt=fmt, form=form, guard=guard)
    write_rollouts(uri, searches, run_id="iter0-rl", iteration=0, left_out=left_out, store=store)

One search per theorem prompted: its rollouts of the theorem's whole prompt in the order they were sampled, each
distinct proof a row (a child of the root, as whole search writes it: `closed` when it earned 1.0, `refused` when the
reader refused it before Lean, else `error` with `not counted: ` and the reward's reason). What a rollout does not
record is not invented: the root state, log-prob and times of a row are empty (`""`, NaN, 0), the result's times 0.
Rollouts of another prompt (a repair prompt) are left out and counted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Protocol

from burnqed.lean.guard import TacticGuard
from burnqed.lean.soundness import Verdict
from burnqed.records.enums import DeclarationForm, SearchMode
from burnqed.records.replies import first_line
from burnqed.records.results import Edge, EdgeOutcome, FailureReason, TheoremResult
from burnqed.records.theorem import Theorem
from burnqed.search.answer import AnswerSlot
from burnqed.search.repair import RepairSettings, compile_messages, failed_proof_feedback
from burnqed.search.skeleton import Proof
from burnqed.search.whole import read_whole, whole_prompt
from burnqed.storage import Store
from burnqed.text.prompt import PromptFormat
from burnqed.trajectory.labels import label_edges
from burnqed.trajectory.writer import TrajectoryWriter

NOT_RECORDED = math.nan  # a row's log-prob and times: TRL's reward function sees none of them per completion


class RolloutRecord(Protocol):
    """What a rollout holds (`rl.records.Rollout`)."""

    @property
    def theorem(self) -> str: ...
    @property
    def prompt(self) -> str: ...
    @property
    def completion(self) -> str: ...
    @property
    def reward(self) -> float: ...
    @property
    def reason(self) -> str: ...
    @property
    def tokens(self) -> int: ...
    @property
    def feedback(self) -> str | None: ...


def rollout_feedback(theorem: Theorem, fmt: PromptFormat, completion: str, guard: TacticGuard, verdict: Verdict,
                     repair: RepairSettings) -> str | None:
    """Lean's messages on a failed rollout as whole search records them on its row with repair on
    (`search.repair_rounds` > 0: `repair.on`; capped at `repair.message_tokens`, cut at the first error with
    `repair.cut`), as JSON (`text.feedback.Feedback`); None when repair is off, the rollout verified, was never
    compiled, or the compile gave no error on the proof. The goal at the first error is not shown: the reward does not
    replay the proof."""
    if not repair.on or verdict.verified or verdict.proof is None or verdict.result is None:
        return None
    tactics = read_whole(theorem, fmt, completion, guard).tactics
    messages = compile_messages(verdict.proof, tactics, theorem.name, verdict.result)
    if messages is None:
        return None
    return failed_proof_feedback(tactics, messages, repair, None).to_json()


def rollout_searches(rollouts: Sequence[RolloutRecord], theorems: Mapping[str, Theorem], *, fmt: PromptFormat,
                     form: DeclarationForm, guard: TacticGuard) -> tuple[list[tuple[TheoremResult, list[Edge]]], int]:
    """Each theorem's rollouts as one whole search (module docstring), in the order of `theorems`; and how many
    rollouts were left out (of another prompt than the theorem's whole prompt)."""
    by_theorem: dict[str, list[RolloutRecord]] = {}
    for rollout in rollouts:
        by_theorem.setdefault(rollout.theorem, []).append(rollout)
    searches: list[tuple[TheoremResult, list[Edge]]] = []
    left_out = 0
    for name, theorem in theorems.items():
        prompt = whole_prompt(theorem, fmt, form)
        mine = [r for r in by_theorem.get(name, []) if r.prompt == prompt]
        left_out += len(by_theorem.get(name, [])) - len(mine)
        if mine:
            searches.append(_search(theorem, mine, fmt, form, guard))
    return searches, left_out


def _search(theorem: Theorem, rollouts: Sequence[RolloutRecord], fmt: PromptFormat, form: DeclarationForm,
            guard: TacticGuard) -> tuple[TheoremResult, list[Edge]]:
    edges: list[Edge] = []
    rows: dict[str, Edge] = {}  # the normalised proof (`WholeAttempt.key`) → its row
    verified: list[Proof] = []
    for sampled, rollout in enumerate(rollouts, start=1):
        attempt = read_whole(theorem, fmt, rollout.completion, guard)
        if not attempt.key.strip("\0"):
            continue
        edge = rows.get(attempt.key)
        if edge is None:
            edge = Edge(node_id=len(edges) + 1, parent_id=0, depth=1, state_before="", tactic=attempt.body,
                        state_after=None, outcome=EdgeOutcome.ERROR, error=None, logprob=NOT_RECORDED,
                        n_tokens=rollout.tokens, score=None, energy=None, lean_ms=NOT_RECORDED, gen_ms=NOT_RECORDED,
                        timestamp_ms=0)
            rows[attempt.key] = edge
            edges.append(edge)
            if attempt.refusal is not None:
                edge.outcome, edge.error = EdgeOutcome.REFUSED, first_line(attempt.refusal)
                continue
            edge.error, edge.feedback = f"not counted: {rollout.reason}", rollout.feedback
        # A proof's first rollout may have had no verdict (a timeout: asked again later); a later one's 1.0 counts.
        if rollout.reward == 1.0 and edge.outcome is EdgeOutcome.ERROR:
            edge.outcome, edge.state_after, edge.error, edge.feedback = EdgeOutcome.CLOSED, "", None, None
            verified.append(Proof(edge.node_id, attempt.proof, attempt.tactics, sampled, 0, attempt.answer))
    proved = bool(verified)
    label_edges(edges, [proof.edge for proof in verified], proved)
    best = verified[0] if verified else None
    result = TheoremResult(
        name=theorem.name, mode=SearchMode.WHOLE, proved=proved, declaration=theorem.declaration(form),
        header=theorem.header,
        answer=AnswerSlot(theorem).stored(best.answer if best else None),
        proof=best.proof if best else None, tactics=best.tactics if best else [],
        failure_reason=None if proved else FailureReason.MAX_PROOFS,
        detail=None if proved else f"no rollout of {len(rollouts)} verified",
        proofs_sampled=len(rollouts), budget_at_proof=best.budget if best else None, edges=len(edges),
        depth=len(best.tactics) if best else None,
        rejected_proofs=sum(1 for edge in edges if edge.outcome is not EdgeOutcome.CLOSED),
        tokens=sum(rollout.tokens for rollout in rollouts),
    )
    return result, edges


def write_rollouts(uri: str, searches: Sequence[tuple[TheoremResult, Sequence[Edge]]], *, run_id: str, iteration: int,
                   left_out: int, store: Store) -> None:
    """`searches` as one complete trajectory prefix at `uri` (one part; its `_SUCCESS.json` records the rollouts left
    out)."""
    with TrajectoryWriter(uri, run_id=run_id, iteration=iteration, checkpoint_every=max(1, len(searches)),
                          store=store) as writer:
        for result, edges in searches:
            writer.add(result, edges)
        writer.finish({"source": "rl rollouts", "rollouts left out (another prompt)": left_out})


__all__ = ["RolloutRecord", "rollout_feedback", "rollout_searches", "write_rollouts"]
