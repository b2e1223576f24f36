"""An adversarial generator (issue 67): command keywords × spellings × the places model text lands in a compiled
file, each run to the verdict on the strict Pantograph double (which splits commands where Lean's parser does: at any
column, after a term on the same line, on an indented line; in the test's process, the RL completions through the
reward's pool of double processes) and asserted NOT counted, with one honest control per place that must count.
Made-up problems in PutnamBench's form only.

Places: the answer slot's value (whole mode), a tactic (step's final compile, `verify_proof`), a whole proof (whole
mode), a sketch skeleton (sketch mode's assembled proof, `check_whole` as `search.sketching` calls it), a repair
revision (the repair reader, `read_whole` in the repair format, then `check_whole`) and an RL completion (the
reward, 0.0). Each runs past the default guard and past an open one (no deny list, no built-in token rules): in a
tactic, a proof, a sketch or a repair the compile's pinned shape is what stops a smuggled command, whatever the guard
says; an answer is refused before Lean as no single term by a rule no guard switches off, and the pin alone refuses the
same answers written into the header past that rule. The issue's own example, a global `infixl`, `axiom«x»` and
`2 open Real` after a value are also run through the hybrid forest and minilean.

    .venv/bin/python -m pytest -n 0 -q -s tests/lean/test_adversarial.py   # prints the generator's count
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from burnqed.config import LeanConfig
from burnqed.lean.client import LeanWorker
from burnqed.lean.guard import TacticGuard
from burnqed.lean.inprocess import InProcessReplay
from burnqed.lean.pool import LeanPool
from burnqed.lean.soundness import check_path, check_proof_text, verify_proof
from burnqed.lean.start import start_theorem
from burnqed.policy.base import Sampling
from burnqed.records.replies import TacticKind
from burnqed.records.results import EdgeOutcome
from burnqed.records.theorem import Answer, AnswerTask, Theorem
from burnqed.rl.reward import LeanReward, RewardSettings
from burnqed.search.hybrid import prove_hybrid
from burnqed.search.hybrid_settings import HybridSettings
from burnqed.search.step import SearchOutcome
from burnqed.search.whole import WholeAttempt, WholeSettings, check_whole, prove_whole, read_whole
from burnqed.text.completion import split_proof
from burnqed.text.prompt import PromptFormat
from burnqed.text.sketch import Sketch, read_sketch
from tests.conftest import double_argv
from tests.doubles.line_servers import DoubleServer
from tests.doubles.policy_double import ScriptedPolicy

DEFAULT_GUARD = TacticGuard.from_config(LeanConfig())
OPEN_GUARD = TacticGuard([], builtin=False)  # no deny list, no built-in token rules: only the pinned shape is left
GUARDS = {"default guard": DEFAULT_GUARD, "open guard": OPEN_GUARD}
SLOT = "putnam_mock_a_solution"
HEADER = f"abbrev {SLOT} : ℕ := sorry\n-- 2"
OPEN = Theorem(name="putnam_mock_a", signature=f": 1 + 1 = {SLOT}", header=HEADER, source="putnam",
               answer=Answer(name=SLOT, type="ℕ", task=AnswerTask.PRODUCED, reference="2"))
PLAIN = Theorem(name="putnam_mock_b", signature=": (2 : ℕ) + 2 = 4", header="open Nat", source="putnam")
THEOREM = f"theorem putnam_mock_a : 1 + 1 = {SLOT} := by\n"
ISSUE_EXAMPLE = "1\n  instance(priority:=high)evil:HAdd ℕ ℕ ℕ:=⟨fun a b=>a*b⟩"

# Command keywords, each in a spelling a line-anchored deny pattern misses (no blank, `«»`, a priority).
COMMANDS: dict[str, str] = {
    "instance, no blank, a priority": "instance(priority:=high)evil:HAdd ℕ ℕ ℕ:=⟨fun a b=>a*b⟩",
    "instance:, no name": "instance:HAdd ℕ ℕ ℕ:=⟨fun a b=>a*b⟩",
    "infixl, a priority": 'infixl:65 (priority := high) " + " => HMul.hMul',
    "axiom«x»": "axiom«x» : False",
    "def«x»": "def«x» : ℕ := 1",
    "notation3": 'notation3 "evil" => (2 : ℕ)',
    "binder_predicate": 'binder_predicate x " > " y:term => `($x > $y)',
    "unif_hint": "unif_hint (n : ℕ) where n =?= 2 ⊢ n + 0 =?= 2",
    "export": "export Nat (succ)",
    "alias": "alias evil := Nat.add_comm",
    "irreducible_def": "irreducible_def evil : ℕ := 1",
    "open": "open Real",
    "namespace": "namespace Evil",
    "variable": "variable (k : ℕ)",
    "attribute": "attribute [simp] Nat.add_comm",
    "#eval": "#eval 1",
}
# Where the command stands after the honest text X (a value, a tactic).
PLACEMENTS: dict[str, Callable[[str, str], str]] = {
    "same line": lambda honest, command: f"{honest} {command}",
    "next line, indented": lambda honest, command: f"{honest}\n  {command}",
    "after a line comment": lambda honest, command: f"{honest} -- fine\n  {command}",
    "after a block comment": lambda honest, command: f"{honest} /- fine -/{command}",
}
ATTEMPTS = [(f"{keyword}, {where}", command, where) for keyword, command in COMMANDS.items() for where in PLACEMENTS]
PLACES = ("answer slot", "tactic", "whole proof", "sketch skeleton", "repair revision", "RL completion")
TALLY: dict[tuple[str, str], tuple[int, int, bool]] = {}  # (place, guard) → (attempts, counted, control counted)


def attacks(honest: str) -> list[str]:
    """Every attempt with `honest` as the text the command follows."""
    return [PLACEMENTS[where](honest, command) for _, command, where in ATTEMPTS]


@contextlib.asynccontextmanager
async def double() -> AsyncIterator[InProcessReplay]:
    """The strict double at 0.3.4 in this process (tests/doubles/line_servers.py): what it splits and answers is the
    subject, not its pipe (the RL completions below reach it through the reward's pool of processes)."""
    lean = InProcessReplay(DoubleServer("0.3.4"))
    await lean.start()
    try:
        yield lean
    finally:
        await lean.close()


def answer_completion(value: str, proof: str = "  decide") -> str:
    """What a model writes after the answer prompt's prime (`… :=`): the value, the theorem again, the proof."""
    return f" {value}\n\n{THEOREM}{proof}\n```"


def record(place: str, guard: str, verdicts: list[bool], control: bool) -> None:
    """The verdicts on every attempt at a place (True: counted) and whether its honest control counted."""
    TALLY[(place, guard)] = (len(ATTEMPTS), sum(verdicts), control)
    assert verdicts == [False] * len(verdicts), [ATTEMPTS[at][0] for at, ok in enumerate(verdicts) if ok]
    assert control, f"{place}: the honest control did not count"


def searched(outcome: SearchOutcome, completions: int) -> list[bool]:
    """Whether each attempt of a whole search over `completions` attempts then its control counted: a search stops at
    its first proof and judges a repeated attempt once (an answer whose comment is masked away repeats another), so
    every edge but the last must be no proof, the last the control's, and then every attempt was judged."""
    closed = [edge.outcome is EdgeOutcome.CLOSED for edge in outcome.edges]
    assert closed[-1] and outcome.result.proved and outcome.result.proofs_sampled == completions + 1, (
        outcome.result.proofs_sampled, [edge.error for edge in outcome.edges])
    return [*closed[:-1], *[False] * (completions - len(closed) + 1)]


def whole_search(theorem: Theorem, completions: list[str], fmt: PromptFormat, guard: TacticGuard) -> SearchOutcome:
    stream = iter(completions)

    async def go() -> SearchOutcome:
        async with double() as worker:
            settings = WholeSettings(fmt=fmt, sampling=Sampling(n=1, max_new_tokens=256, stop=("```",)),
                                     max_proofs=len(completions), timeout_s=120.0)
            policy = ScriptedPolicy(lambda _: [(next(stream), -0.1)], key=lambda prompt: prompt)
            return await prove_whole(theorem, worker, policy, settings, guard)

    return asyncio.run(go())


@pytest.mark.slow
@pytest.mark.parametrize("guard", sorted(GUARDS))
def test_an_answer_that_smuggles_a_command_never_counts_and_the_honest_answer_does(guard: str) -> None:
    # Whole mode reads each completion's answer and compiles the theorem with it; the control comes last: a search
    # stops at its first proof, so any attempt that counted would be the proof found.
    completions = [answer_completion(value) for value in attacks("2")] + [answer_completion("2")]
    outcome = whole_search(OPEN, completions, PromptFormat.DEEPSEEK_WHOLE, GUARDS[guard])
    record("answer slot", guard, searched(outcome, len(ATTEMPTS)), outcome.result.answer == "2")
    assert outcome.result.proof == f"abbrev {SLOT} : ℕ := (2)\n-- 2\n\n{THEOREM}  decide\n"


@pytest.mark.slow
@pytest.mark.parametrize("guard", sorted(GUARDS))
def test_a_whole_proof_that_smuggles_a_command_never_counts(guard: str) -> None:
    completions = [f"{body}\n```" for body in attacks("norm_num")] + ["norm_num\n```"]
    outcome = whole_search(PLAIN, completions, PromptFormat.PLAIN_WHOLE, GUARDS[guard])
    record("whole proof", guard, searched(outcome, len(ATTEMPTS)), outcome.result.proof == (
        "open Nat\n\ntheorem putnam_mock_b : (2 : ℕ) + 2 = 4 := by\n  norm_num\n"))


@pytest.mark.slow
@pytest.mark.parametrize("guard", sorted(GUARDS))
def test_a_tactic_that_smuggles_a_command_never_counts_at_steps_final_compile(guard: str) -> None:
    # `done` closes every goal on the double; the rest of the tactic is the smuggled command, compiled after the
    # theorem's tactic block by step's final compile (`verify_proof`), its shape pinned to the index's header.

    async def go() -> list[bool]:
        verdicts: list[bool] = []
        async with double() as worker:
            for tactic in [*attacks("done"), "done"]:
                state, _ = await start_theorem(worker, PLAIN)
                final = await worker.tactic(state, tactic)
                if final.kind is not TacticKind.SUCCESS or final.goals:
                    verdicts.append(False)  # the double refused it (a parse error): nothing to count
                    continue
                verdict = await verify_proof(worker, PLAIN, [tactic], final, GUARDS[guard],
                                             index_header=PLAIN.header)
                verdicts.append(verdict.verified)
        return verdicts

    verdicts = asyncio.run(go())
    record("tactic", guard, verdicts[:-1], verdicts[-1])


def sketched(body: str, guard: TacticGuard) -> WholeAttempt | None:
    """The attempt sketch mode compiles once every hole of the sketch `body` is proved by `norm_num`
    (`search.sketching`'s `_count`: the filled sketch, split, guarded, then `check_whole`); None when sketch mode's
    reader refuses the sketch."""
    sketch = read_sketch(body)
    if not isinstance(sketch, Sketch):
        return None
    filled = sketch.filled([["norm_num"]] * len(sketch.holes))
    tactics = split_proof(filled, split_have=False)
    allowed = check_path(tactics, guard)
    return WholeAttempt(filled, tactics, PLAIN, None if allowed.ok else allowed.reason)


@pytest.mark.slow
@pytest.mark.parametrize("guard", sorted(GUARDS))
def test_a_sketch_skeleton_that_smuggles_a_command_never_counts(guard: str) -> None:
    skeleton = "have h : (2 : ℕ) + 2 = 4 := by sorry\n"

    async def go() -> list[bool]:
        verdicts = []
        async with double() as worker:
            for body in [*attacks("exact h"), "exact h"]:
                attempt = sketched(f"{skeleton}{body}", GUARDS[guard])
                verdicts.append(attempt is not None and (await check_whole(worker, PLAIN, attempt)).verified)
        return verdicts

    verdicts = asyncio.run(go())
    record("sketch skeleton", guard, verdicts[:-1], verdicts[-1])


@pytest.mark.slow
@pytest.mark.parametrize("guard", sorted(GUARDS))
def test_a_repair_revision_that_smuggles_a_command_never_counts(guard: str) -> None:
    # A revision (its last lean4 block) is read in the repair format (`read_whole`, the answer it revises kept) and
    # compiled as any attempt.
    revisions = [f"```lean4\nabbrev {SLOT} : ℕ := {value}\n\n{THEOREM}  decide\n```"
                 for value in [*attacks("2"), "2"]]

    async def go() -> list[bool]:
        async with double() as worker:
            verdicts = []
            for raw in revisions:
                attempt = read_whole(OPEN, PromptFormat.DEEPSEEK_REPAIR_COT, raw, GUARDS[guard], kept="3")
                verdicts.append((await check_whole(worker, OPEN, attempt)).verified)
            return verdicts

    verdicts = asyncio.run(go())
    record("repair revision", guard, verdicts[:-1], verdicts[-1])


@pytest.fixture
def reward(tmp_path: Path) -> Iterator[Callable[[TacticGuard], LeanReward]]:
    made: list[LeanReward] = []

    def build(guard: TacticGuard) -> LeanReward:
        lean = LeanConfig(command=double_argv("--pantograph-version", "0.3.4"), pantograph_version="0.3.4",
                          tactic_timeout_s=5.0, compile_timeout_s=5.0, watchdog_grace_s=0.5, ready_timeout_s=10.0)
        made.append(LeanReward([OPEN, PLAIN], lambda: LeanPool.from_config(lean, 1, theorems_per_worker=4), guard,
                               RewardSettings(fmt=PromptFormat.DEEPSEEK_WHOLE)))
        return made[-1]

    yield build
    for made_reward in made:
        made_reward.close()


@pytest.mark.slow
@pytest.mark.parametrize("guard", sorted(GUARDS))
def test_an_rl_completion_that_smuggles_a_command_earns_zero_and_the_honest_one_one(
        guard: str, reward: Callable[[TacticGuard], LeanReward]) -> None:
    judge = reward(GUARDS[guard])
    completions = [answer_completion(value) for value in [*attacks("2"), "2"]]
    rewards = judge(prompts=[judge.prompts[OPEN.name]] * len(completions), completions=completions,
                    theorem=[OPEN.name] * len(completions))
    assert rewards == [0.0] * (len(completions) - 1) + [1.0]
    record("RL completion", guard, [r > 0 for r in rewards[:-1]], rewards[-1] == 1.0)


# The issue's must-show cases, each as the answer a completion gives the slot.
MUST_SHOW = {
    "the issue's example": ISSUE_EXAMPLE,
    "a global infixl": '2\n  infixl:65 (priority := high) " + " => HMul.hMul',
    "axiom«x»": "2\n  axiom«x» : False",
    "2 open Real": "2 open Real",
}


@pytest.mark.slow
@pytest.mark.parametrize("guard", sorted(GUARDS))
def test_the_must_show_cases_are_refused_in_whole_mode_and_the_rl_reward_with_the_honest_answer_beside_them(
        guard: str, reward: Callable[[TacticGuard], LeanReward]) -> None:
    completions = [answer_completion(value) for value in MUST_SHOW.values()] + [answer_completion("2")]
    outcome = whole_search(OPEN, completions, PromptFormat.DEEPSEEK_WHOLE, GUARDS[guard])
    assert [edge.outcome is EdgeOutcome.CLOSED for edge in outcome.edges] == [False] * len(MUST_SHOW) + [True]
    assert outcome.result.answer == "2"
    # An answer is one term whatever the guard says (`check_answer`): each is refused before Lean, past an open guard
    # too. The pinned shape's own refusal of the same files is `test_the_pin_alone_refuses_the_must_show_answers…`.
    assert all(edge.error is not None and "is not one term: it holds the command keyword" in edge.error
               for edge in outcome.edges[:-1]), [edge.error for edge in outcome.edges]
    judge = reward(GUARDS[guard])
    rewards = judge(prompts=[judge.prompts[OPEN.name]] * len(completions), completions=completions,
                    theorem=[OPEN.name] * len(completions))
    assert rewards == [0.0, 0.0, 0.0, 0.0, 1.0]


@pytest.mark.slow
@pytest.mark.parametrize("guard", sorted(GUARDS))
def test_the_must_show_cases_are_refused_in_the_hybrid_forest_and_the_honest_answer_counts(guard: str) -> None:
    answer_prompt_key = "```lean4\nabbrev putnam_mock_a_solution : ℕ :="
    answers = [answer_completion(value, "  done") for value in MUST_SHOW.values()]
    honest = answer_completion("2", "  done")
    rounds = iter([answers, [honest]])

    def script(prompt: str) -> list[tuple[str, float]]:
        return [(text, -0.3) for text in (next(rounds, []) if prompt.endswith(answer_prompt_key) else [])]

    settings = HybridSettings(fmt=PromptFormat.DEEPSEEK_PROOF, sampling=Sampling(stop=("```",)), num_proofs=4,
                              min_proofs=1, max_tokens=256, min_tokens=128, max_proofs=16, timeout_s=60.0)

    async def go() -> SearchOutcome:
        async with double() as worker:
            return await prove_hybrid(OPEN, worker, ScriptedPolicy(script, key=lambda p: p), settings, GUARDS[guard])

    outcome = asyncio.run(go())
    assert outcome.result.proved and outcome.result.answer == "2"
    assert outcome.result.proof == f"abbrev {SLOT} : ℕ := (2)\n-- 2\n\n{THEOREM}  done\n"
    refused = [edge for edge in outcome.edges if edge.outcome is not EdgeOutcome.CLOSED]
    assert len(refused) == len(MUST_SHOW)
    assert all(edge.error is not None and "is not one term: it holds the command keyword" in edge.error
               for edge in refused), [edge.error for edge in refused]  # before the forest starts a filled theorem


@pytest.mark.slow
def test_on_minilean_the_must_show_cases_are_refused_and_the_honest_answer_proved_by_decide_counts() -> None:
    """minilean (the embedded Lean) decides `1 + 1 = SOL` under the filled answer `(2)`; the must-show answers are
    refused before it, as no single term (whatever the guard)."""
    completions = [answer_completion(value) for value in MUST_SHOW.values()] + [answer_completion("2")]
    stream = iter(completions)

    async def go() -> SearchOutcome:
        async with LeanWorker([sys.executable, "-m", "minilean"], tactic_timeout_s=5, ready_timeout_s=10) as worker:
            settings = WholeSettings(fmt=PromptFormat.DEEPSEEK_WHOLE, sampling=Sampling(n=1, stop=("```",)),
                                     max_proofs=len(completions), timeout_s=60.0)
            policy = ScriptedPolicy(lambda _: [(next(stream), -0.1)], key=lambda prompt: prompt)
            return await prove_whole(OPEN, worker, policy, settings, OPEN_GUARD)

    outcome = asyncio.run(go())
    assert [edge.outcome for edge in outcome.edges] == [EdgeOutcome.REFUSED] * 4 + [EdgeOutcome.CLOSED]
    assert [(edge.error or "").endswith(f"is not one term: it holds the command keyword {keyword!r} (Lean ends the "
                                        "term there and runs a command)")
            for edge, keyword in zip(outcome.edges, ("instance", "infixl", "axiom", "open"), strict=False)
            ] == [True] * 4
    assert outcome.result.answer == "2"


@pytest.mark.slow
def test_the_pin_alone_refuses_the_must_show_answers_written_into_the_header_on_minilean() -> None:
    """Past the answer's one-term rule (each value written in place of the slot's `sorry`, as a line reader did),
    minilean splits commands as Lean does: a command it does not have is its error, one it has (`open`) a unit the
    pinned shape does not have; the honest `2` counts the same way."""
    header = OPEN.header or ""

    async def go() -> list[tuple[bool, str]]:
        async with LeanWorker([sys.executable, "-m", "minilean"], tactic_timeout_s=5, ready_timeout_s=10) as worker:
            verdicts = []
            for value in [*MUST_SHOW.values(), "2"]:
                filled = header.replace("sorry", value, 1)
                proof = f"{filled}\n\n{THEOREM}  decide\n"
                verdict = await check_proof_text(worker, OPEN.name, proof, index_header=header, header=filled)
                verdicts.append((verdict.verified, verdict.reason[:47]))
            return verdicts

    assert asyncio.run(go()) == [
        (False, "the proof text does not compile: minilean: only"),
        (False, "the proof text does not compile: minilean: only"),
        (False, "the proof text does not compile: minilean: only"),
        (False, "Lean reports 5 compilation units where the file"),
        (True, ""),
    ]


@pytest.mark.slow
def test_the_generators_count() -> None:
    """attempts × places, for each guard, printed for the issue's note (run with -s): the runs above, earlier in this
    module, fill TALLY (one module runs on one worker, in order)."""
    assert len(COMMANDS) == 16 and len(PLACEMENTS) == 4 and len(ATTEMPTS) == 64 and len(PLACES) == 6
    assert ISSUE_EXAMPLE in attacks("1")  # the issue's example is one of the attempts
    assert sorted(TALLY) == sorted((place, guard) for place in PLACES for guard in GUARDS)
    done = sorted(TALLY.items())
    attempts = sum(count for count, _, _ in TALLY.values())
    counted = sum(hits for _, hits, _ in TALLY.values())
    controls = sum(control for _, _, control in TALLY.values())
    print(f"\nadversarial generator: {len(ATTEMPTS)} attempts × {len(PLACES)} places × {len(GUARDS)} guards; "
          f"run here: {attempts} attempts in {len(done)} (place, guard) runs, {counted} counted, "
          f"{controls}/{len(done)} controls counted")
    assert counted == 0 and controls == len(done)
