"""What counts as a proof (design §3). The search calls `verify_proof` before it counts anything.

A proof counts only if
1. the last `goal.tactic` returned an integer state id and `goals: []` with `hasSorry`/`hasUnsafe` false
   (null state ids, missing `goals`, `parseError` never parse as such a success);
2. no tactic on the path matches the deny list (sorry/admit/cheat/native_decide, ...);
3. `goal.print rootExpr` of the final state reports no sorry, no unsafe and no metavariables (this is
   what catches a focus bullet that closed only its own sub-goal);
4. when `compile` is on (the default in eval), the assembled proof text compiles through
   `frontend.process` with no error message and no sorry warning.
Each rule is a pure function; `verify_proof` runs them in order and stops at the first failure, so
Lean is asked only when the cheap checks pass. The returned verdict carries the proof text, which is
what gets stored and can be re-checked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from burnqed.errors import LeanError
from burnqed.lean.env import LeanEnv
from burnqed.lean.guard import TacticGuard
from burnqed.prompt import join_tactics
from burnqed.records import CompileResult, RootInfo, TacticResult, Theorem, first_line


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether a proof counts, why not, and the proof text that was (or would be) checked."""

    ok: bool
    reason: str = ""
    proof: str | None = None
    compiled: bool = False


def assemble_proof(theorem: Theorem, tactics: Sequence[str]) -> str | None:
    """The proof as a Lean file: header, `theorem NAME : STATEMENT := by` and the tactics, indented.

    None when the theorem has no statement (started with copyFrom): there is nothing to restate.
    """
    if theorem.statement is None:
        return None
    body = join_tactics(tactics)
    header = f"{theorem.header.rstrip()}\n\n" if theorem.header else ""
    return f"{header}theorem {theorem.name} : {theorem.statement} := by\n{body}\n"


def check_final(final: TacticResult) -> Verdict:
    """Rule 1: Lean itself says every goal is closed, with no sorry and nothing unsafe."""
    if not final.closed_all_goals:
        return Verdict(False, f"the last tactic did not close all goals ({final.kind.value})")
    if final.has_sorry:
        return Verdict(False, "Lean reports sorry in the closing step")
    if final.has_unsafe:
        return Verdict(False, "Lean reports unsafe code in the closing step")
    return Verdict(True)


def check_path(tactics: Sequence[str], guard: TacticGuard) -> Verdict:
    """Rule 2: no tactic on the path is denied."""
    if not tactics:
        return Verdict(False, "empty proof")
    for tactic in tactics:
        reason = guard.check(tactic)
        if reason is not None:
            return Verdict(False, f"tactic {tactic!r} on the path is denied: {reason}")
    return Verdict(True)


def check_root(info: RootInfo) -> Verdict:
    """Rule 3: the assembled proof term is complete and honest."""
    if info.has_sorry:
        return Verdict(False, "the proof term contains sorry")
    if info.has_unsafe:
        return Verdict(False, "the proof term uses unsafe code")
    if info.has_mvar:
        return Verdict(False, "the proof term still has metavariables (a goal was left open)")
    return Verdict(True)


def check_compile(result: CompileResult) -> Verdict:
    """Rule 4: the proof text compiles cleanly."""
    if result.errors:
        return Verdict(False, f"the proof text does not compile: {first_line(result.errors[0].text)}")
    if result.has_sorry:
        return Verdict(False, "the proof text compiles only with sorry")
    return Verdict(True)


async def verify_proof(
    lean: LeanEnv,
    theorem: Theorem,
    tactics: Sequence[str],
    final: TacticResult,
    guard: TacticGuard,
    *,
    compile: bool = True,
) -> Verdict:
    """Apply all four rules; `final` is the result of the last tactic of `tactics`."""
    proof = assemble_proof(theorem, tactics)
    for verdict in (check_final(final), check_path(tactics, guard)):
        if not verdict.ok:
            return Verdict(False, verdict.reason, proof)
    assert final.state_id is not None  # check_final guarantees it
    try:
        root = check_root(await lean.root_info(final.state_id))
        if not root.ok:
            return Verdict(False, root.reason, proof)
        if not compile:
            return Verdict(True, proof=proof)
        if proof is None:
            return Verdict(False, "cannot compile: the theorem has no statement to restate", proof)
        compiled = check_compile(await lean.compile(proof))
    except LeanError as exc:
        return Verdict(False, f"verification failed: {exc}", proof)
    return Verdict(compiled.ok, compiled.reason, proof, compiled=True)
