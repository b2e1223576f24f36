"""`burnqed lean selftest`: a one-minute conformance run of this build against the configured Lean (docs/lean.md,
"`burnqed lean selftest`").

    report = await run_selftest(pool, guard)       # a started LeanPool and the configured tactic guard, or with
    report = await run_selftest(pool, guard, TripleSources(version_source="`repl --version`", lean_probe=probe,
                                                           image_triple="lean-4.29", triples=lean_triples()))
    report.ok                                      # True only when every item conforms
    report.triple                                  # "Pantograph 0.3.15, Lean 4.29.1, Mathlib v4.29.1"
    for item in report.items: print(item.name, item.ok, item.detail, item.ms)

Each item is a positive check. The theorems are named `burnqed_selftest_*`: in no index, never trained on.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from burnqed.errors import BurnqedError, LeanStartError
from burnqed.lean.comparator import ComparatorSettings, JudgeCase, judge
from burnqed.lean.guard import TacticGuard
from burnqed.lean.pool import LeanPool
from burnqed.lean.soundness import verify_proof
from burnqed.lean.start import start_theorem
from burnqed.records.replies import Goal, TacticKind, first_line
from burnqed.records.theorem import Theorem
from leankit.version import SUPPORTED, SUPPORTED_TEXT, PantographVersion


class LeanTriple(Protocol):
    """What the triple item reads of a declared triple (`burnqed.cluster.images.LeanTriple`, which the command
    passes in: the Lean edge does not import the cluster layer)."""

    @property
    def name(self) -> str: ...
    @property
    def pantograph(self) -> str: ...
    @property
    def mathlib(self) -> str: ...
    @property
    def lean(self) -> str: ...
    def describe(self) -> str: ...

# miniF2F's header as its files carry it (DeepSeek-Prover's and miniF2F-lean4's), imports included: the start
# drops them, as it does for every theorem.
MINIF2F_HEADER = ("import Mathlib\nimport Aesop\n\nset_option maxHeartbeats 400000\n\n"
                  "open BigOperators Real Nat Topology Rat")
PI = Theorem(name="burnqed_selftest_pi", signature=": 0 < π", header=MINIF2F_HEADER, source="selftest")
FACTORIAL = Theorem(name="burnqed_selftest_factorial", signature="(n : ℕ) (h₀ : 0 < n) : 0 < n !",
                    header=MINIF2F_HEADER, source="selftest")
FALSE = Theorem(name="burnqed_selftest_false", signature=": (2 : ℕ) + 2 = 5", header=MINIF2F_HEADER,
                source="selftest")
SELFTEST_THEOREMS = (PI, FACTORIAL, FALSE)
# Tactics that switch the kernel off or trust the compiler: each closes a false goal in a Lean that lets it.
KNOWN_EXPLOITS: tuple[str, ...] = (
    "exfalso; set_option «debug».skipKernelTC true in decide +kernel",
    "set_option debug.skipKernelTC true in decide +kernel",
    "set_option «debug».«skipKernelTC» true in decide (config := { kernel := true })",
    "set_option debug.skipKernelTC true in decide!",
    "native_decide",
    "decide +native",
    "exact (by_elab return Lean.mkConst ``True.intro)",
)
PI_PROOF = "exact pi_pos"  # Real.pi_pos, reachable unqualified only under `open Real`
FACTORIAL_PROOF = "exact factorial_pos n"  # Nat.factorial_pos, on the binder `n` with no `intro`


@dataclass(frozen=True, slots=True)
class Item:
    """One conformance check: its name, whether it conforms, what was seen, and how long it took."""

    name: str
    ok: bool
    detail: str
    ms: float


@dataclass(frozen=True, slots=True)
class TripleSources:
    """Where the triple item learns what it names: how the Pantograph version was learned, how to ask Lean its
    version (`detect_lean_version` bound to the workers' cwd, environment and user; None: not asked), and the triple
    the image declares (its name, and the triples of this burnqed's images.toml)."""

    version_source: str = "`repl --version`"
    version_asked: bool = True  # False: the version is lean.pantograph_version's, so its `/vLEAN` is no evidence
    lean_probe: Callable[[], Awaitable[str]] | None = None
    image_triple: str | None = None
    triples: Mapping[str, LeanTriple] = field(default_factory=dict)


@dataclass(slots=True)
class SelftestReport:
    """Every item, in the order run; `triple` names the Pantograph, Lean and Mathlib met ("unknown" where none)."""

    version: str
    items: list[Item] = field(default_factory=list)
    triple: str = ""

    @property
    def ok(self) -> bool:
        return bool(self.items) and all(item.ok for item in self.items)

    @property
    def failed(self) -> list[Item]:
        return [item for item in self.items if not item.ok]


class _Failed(Exception):
    """An item does not conform; the message says what was seen."""


async def _timed(report: SelftestReport, name: str, check: Callable[[], Awaitable[str]]) -> None:
    started = time.perf_counter()
    try:
        detail, ok = await check(), True
    except _Failed as exc:
        detail, ok = str(exc), False
    except BurnqedError as exc:  # Lean failed, crashed or timed out: this item does not conform
        detail, ok = f"{type(exc).__name__}: {first_line(str(exc))}", False
    report.items.append(Item(name, ok, detail, (time.perf_counter() - started) * 1000))


def _one_goal(goals: tuple[Goal, ...], target: str, hyps: tuple[str, ...]) -> str:
    if len(goals) != 1:
        raise _Failed(f"expected one goal, Lean gave {len(goals)}")
    goal = goals[0]
    names = tuple(variable.name for variable in goal.variables)
    if goal.target != target or names != hyps:
        raise _Failed(f"expected {' '.join(hyps) + ' ' if hyps else ''}⊢ {target}, Lean gave "
                      f"{first_line(goal.pretty().replace(chr(10), ' | '))}")
    return goal.pretty().replace("\n", " | ")


async def run_selftest(pool: LeanPool, guard: TacticGuard, sources: TripleSources | None = None,
                       comparator: ComparatorSettings | None = None) -> SelftestReport:
    """Run every item against `pool` (started) with the configured `guard` (see the module docstring); `sources`
    say where the triple item learns Lean's version and what the image declares (default: nothing declared, Lean's
    version not asked); with `comparator` (lean.judge = "comparator"), its section too (`comparator_items`)."""
    sources = sources or TripleSources()
    report = SelftestReport(version=str(pool.version))

    async def version() -> str:
        if pool.version not in SUPPORTED:
            raise _Failed(f"Pantograph {pool.version} is not supported (supported: {SUPPORTED_TEXT})")
        return f"Pantograph {pool.version}"

    await _timed(report, "version", version)

    async def triple() -> str:
        assert pool.version is not None
        lean, problem = None, "`lean --version` not asked"
        if sources.lean_probe is not None:
            try:
                lean = await sources.lean_probe()
            except LeanStartError as exc:
                problem = first_line(str(exc))
        ok, detail, report.triple = name_triple(pool.version, sources, lean, problem)
        if not ok:
            raise _Failed(detail)
        return detail

    await _timed(report, "the Lean triple met", triple)
    await _proves(report, pool, guard, PI, PI_PROOF, "0 < π", ())
    await _proves(report, pool, guard, FACTORIAL, FACTORIAL_PROOF, "0 < n !", ("n", "h₀"))

    async def refused() -> str:
        passed = [exploit for exploit in KNOWN_EXPLOITS if guard.check(exploit) is None]
        if passed:
            raise _Failed(f"{len(passed)} of {len(KNOWN_EXPLOITS)} reach Lean, first: {passed[0]!r}")
        return f"all {len(KNOWN_EXPLOITS)} refused"

    await _timed(report, "known exploits refused by the tactic guard", refused)
    await _timed(report, "known exploits not counted past an open guard", lambda: _not_counted(pool))
    if comparator is not None:
        await comparator_items(report, comparator)
    return report


def name_triple(version: PantographVersion, sources: TripleSources, probed: str | None,
                problem: str) -> tuple[bool, str, str]:
    """(conforms, detail, the triple named) of the triple item: the Pantograph `version` (learned as
    `sources.version_source` says), the Lean `probed` by `lean --version` (None: not learned, `problem` says why),
    checked against the triple the image declares, if any (docs/lean.md, "The triple met"). Mathlib is named only as
    a conforming image declares it."""
    from_line = version.lean.removeprefix("v") if version.lean and sources.version_asked else None
    lean, where = (from_line, "the version line") if from_line else (probed, "`lean --version`")
    declared = sources.triples.get(sources.image_triple) if sources.image_triple else None
    met = f"Lean {lean} ({where})" if lean else f"Lean not learned ({problem})"
    why = None
    if from_line and probed and probed != from_line:
        why = f"the version line {version} names Lean {from_line}, `lean --version` {probed}"
    elif sources.image_triple is not None and declared is None:
        known = ", ".join(sources.triples) or "none"
        why = (f"the image declares the triple {sources.image_triple!r}, which this burnqed's "
               f"burnqed/cluster/images.toml does not list (known: {known})")
    elif declared is not None and str(version) != declared.pantograph:
        why = (f"the image declares {declared.name} ({declared.describe()}), but Pantograph says {version} "
               f"({sources.version_source})")
    elif declared is not None and lean != declared.lean:
        why = (f"the image declares {declared.name} ({declared.describe()}), but met "
               f"{met if lean else f'no Lean version ({problem})'}")
    mathlib = declared.mathlib if declared is not None and why is None else "unknown"
    named = f"Pantograph {version}, Lean {lean or 'unknown'}, Mathlib {mathlib}"
    if why is not None:
        return False, why, named
    detail = "; ".join([f"Pantograph {version} ({sources.version_source})", met,
                        f"Mathlib {mathlib} (declared by the image's triple {declared.name})" if declared
                        else "Mathlib not declared"])
    return True, detail, named


async def _proves(report: SelftestReport, pool: LeanPool, guard: TacticGuard, theorem: Theorem, tactic: str,
                  target: str, hyps: tuple[str, ...]) -> None:
    """Two items: `theorem` starts with the goal `hyps ⊢ target`, and `tactic` proves it (compiled, counted)."""
    async with pool.lease(theorem.name, header=theorem.header) as lean:

        async def start() -> str:
            _, goals = await start_theorem(lean, theorem)
            return _one_goal(goals, target, hyps)

        await _timed(report, f"start {theorem.declaration()} under miniF2F's header", start)

        async def prove() -> str:
            state, _ = await start_theorem(lean, theorem)
            result = await lean.tactic(state, tactic)
            if result.kind is not TacticKind.SUCCESS or result.goals:
                errors = "; ".join(first_line(e) for e in result.errors) or f"{len(result.goals)} goals left"
                raise _Failed(f"`{tactic}`: {result.kind.value}: {errors}")
            verdict = await verify_proof(lean, theorem, [tactic], result, guard, index_header=theorem.header)
            if not verdict.verified:
                raise _Failed(f"`{tactic}` closed the goal but the proof does not count: {verdict.reason}")
            return f"`{tactic}` closes it; the compile and #print axioms count it"

        await _timed(report, f"prove it with `{tactic}` and compile", prove)


async def _not_counted(pool: LeanPool) -> str:
    """Every known exploit that closes the false goal in Lean, sent past an open guard, is not counted."""
    open_guard = TacticGuard((), builtin=False)
    closed = 0
    async with pool.lease(FALSE.name, header=FALSE.header) as lean:
        for exploit in KNOWN_EXPLOITS:
            state, _ = await start_theorem(lean, FALSE)
            result = await lean.tactic(state, exploit)
            if result.kind is not TacticKind.SUCCESS or result.goals:
                continue  # Lean itself refused it: nothing to count
            closed += 1
            verdict = await verify_proof(lean, FALSE, [exploit], result, open_guard, index_header=FALSE.header)
            if verdict.ok:
                raise _Failed(f"{exploit!r} proves 2 + 2 = 5 and counts: the kernel net is missing")
    return (f"{closed} of {len(KNOWN_EXPLOITS)} close the false goal in Lean; none counts"
            if closed else f"Lean refuses all {len(KNOWN_EXPLOITS)}")


# The comparator section (lean.judge = "comparator"): core Lean only, no header but each case's own. Each refused case
# is something burnqed's own checks refuse too; here the question is whether the configured comparator does.
SLOT = "burnqed_judge_slot"
_SUM, _FALSE = "(2 : Nat) + 2 = 4", "(2 : Nat) + 2 = 5"
COMPARATOR_CASES: tuple[tuple[str, bool, JudgeCase], ...] = tuple(
    (what, accept, JudgeCase(name, challenge, f"theorem {name} : {statement}", solution,
                             f"theorem {name} : {statement} := by\n  {tactic}\n", hole))
    for what, accept, name, statement, challenge, solution, tactic, hole in (
        ("an honest proof", True, "burnqed_judge_honest", _SUM, "", "", "decide", None),
        ("a statement changed by a local notation", False, "burnqed_judge_notation", _SUM, "",
         'local infix:65 " + " => Nat.mul', "decide", None),
        ("a sorryAx", False, "burnqed_judge_sorry", _FALSE, "", "", "exact sorryAx _ false", None),
        ("a custom axiom", False, "burnqed_judge_axiom", _FALSE, "", f"axiom burnqed_judge_cheat : {_FALSE}",
         "exact burnqed_judge_cheat", None),
        ("native_decide", False, "burnqed_judge_native", _SUM, "", "", "native_decide", None),
        ("debug.skipKernelTC", False, "burnqed_judge_skip", _FALSE, "", "",
         "set_option debug.skipKernelTC true in decide +kernel", None),
        ("a filled answer slot of the wrong type", False, "burnqed_judge_answer", f"3 ≤ {SLOT}",
         f"def {SLOT} : Nat := sorry", f"def {SLOT} : Int := 5", "decide", SLOT),
    ))


async def comparator_items(report: SelftestReport, settings: ComparatorSettings) -> None:
    """One item per `COMPARATOR_CASES` entry, judged by the configured comparator in one call (batched per header):
    the honest proof must be accepted, every other case refused; each item says comparator's category and reason."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="burnqed-selftest-judge-") as work:
        verdicts = await judge([case for _, _, case in COMPARATOR_CASES], settings, Path(work))
    ms = (time.perf_counter() - started) * 1000 / len(COMPARATOR_CASES)
    for (what, accept, _), verdict in zip(COMPARATOR_CASES, verdicts, strict=True):
        said = "accepted" if verdict.accepted else f"refused ({verdict.category}): {first_line(verdict.reason or '')}"
        name = f"comparator: {what} {'accepted' if accept else 'refused'}"
        report.items.append(Item(name, verdict.accepted == accept, said, ms))


EVIDENCE = ("an honest proof", "a sorryAx")  # the cases `comparator_evidence` runs: one accepted, one refused


async def comparator_evidence(settings: ComparatorSettings) -> str | None:
    """Positive evidence that the configured comparator judges (before a judged eval or the judge step): of
    `COMPARATOR_CASES`, the honest proof accepted and the sorryAx refused. None when both hold, else why not, in one
    line (a comparator that accepts everything, or refuses everything, judges nothing)."""
    cases = [(what, accept, case) for what, accept, case in COMPARATOR_CASES if what in EVIDENCE]
    with tempfile.TemporaryDirectory(prefix="burnqed-judge-evidence-") as work:
        verdicts = await judge([case for _, _, case in cases], settings, Path(work))
    for (what, accept, _), verdict in zip(cases, verdicts, strict=True):
        if verdict.accepted != accept:
            said = "accepted it" if verdict.accepted else (f"refused it ({verdict.category}: "
                                                           f"{first_line(verdict.reason or '')})")
            wanted = "accepted" if accept else "refused"
            return f"comparator ({' '.join(settings.command)}) {said}: {what} must be {wanted}"
    return None
