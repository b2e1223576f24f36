"""The RL reward is the verifier (docs/training.md, "Reward from Lean's verdict"): against the strict Pantograph double
at 0.3.4 and at the newest supported version, through a Lean pool with verifier workers, in this process
(tests/doubles/line_servers.py); the hung compile and the crashed verifier, and the answer check the watchdog cuts,
over real pipes.

Every exploit of the soundness tests' tables earns exactly 0.0: with the default guard each is refused before Lean
(no compile is sent); with an open guard (as if the deny list missed a spelling) the ones the double emulates as Lean
does (`sorry`, `native_decide`/`+native`, the `by_elab` axiom, the kernel-off route, the stack overflow) are stopped by
the compile, the axioms check, the kernel recheck or the crash. The answer's rules (left `sorry`, another statement,
another theorem, no answer) refuse whatever the guard says. A revision of a failed proof (its repair prompt) is judged
alike: an exploit revision earns 0.0, a correct one 1.0, the file compiled whole mode's; a repair prompt is accepted
only for its own theorem and failed proof. A verified proof earns exactly 1.0; a hung compile and a
crashed verifier earn 0.0 and the next completion still gets its verdict; identical completions compile once; rewards
come back in the completions' order; TRL's own reward step calls it.

Where the double is more lenient than Lean (so a case is tested with the default guard only): it reads no `admit`,
`cheat` or `native := true`, runs no metaprogram, and reads the axioms of a theorem's own command only, not of the
answer definition in its header (tests/search/test_answers.py's strict xfail): past an open guard those would compile.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import re
import threading
import warnings
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from burnqed.config import LeanConfig
from burnqed.errors import InputError
from burnqed.lean.guard import TacticGuard
from burnqed.lean.inprocess import InProcessReplay, InProcessReplayPool
from burnqed.lean.pool import LeanPool
from burnqed.records.enums import DeclarationForm
from burnqed.records.theorem import Theorem
from burnqed.rl.failures import FailedProof
from burnqed.rl.reward import LeanReward, RewardSettings
from burnqed.search.answer_check import check_file, header_digest, judged_header
from burnqed.search.repair import repair_prompt
from burnqed.search.whole import whole_prompt
from burnqed.text.feedback import Feedback, FeedbackMessage
from burnqed.text.prompt import PromptFormat
from leankit.version import SUPPORTED, PantographVersion
from tests.conftest import double_argv
from tests.doubles.line_servers import DoubleServer, MiniLean
from tests.lean.test_guard_soundness import KERNEL_OFF, ONLY_BY, RESOURCE_OPTIONS
from tests.lean.test_kernel_net import STACK
from tests.search.test_answers import DENIED_BY, OPEN, SMUGGLED, THEOREM, completion

DEFAULT_GUARD = TacticGuard.from_config(LeanConfig())
OPEN_GUARD = TacticGuard([], builtin=False)  # as if every rule missed a spelling: only Lean's evidence is left
VERSIONS = ["0.3.4", str(SUPPORTED[-1])]
FMT = PromptFormat.DEEPSEEK_WHOLE
REPAIR = PromptFormat.DEEPSEEK_REPAIR
FALSE = Theorem(name="two_plus_two_is_five", statement="2 + 2 = 5", header="import Mathlib\nopen Nat")
HONEST = Theorem(name="two_plus_two", statement="2 + 2 = 4", header="import Mathlib")
THEOREMS = [FALSE, HONEST, OPEN]
HONEST_PROOF = "  norm_num\n```"
RIGHT_ANSWER = completion("2")
BY_ELAB_AXIOM = ("exact (by_elab do Lean.addDecl (.axiomDecl {name := `f, levelParams := [], type := .const `False [], "
                 "isUnsafe := false}); return .const `f [])")
SORRY = "the proof text compiles only with sorry"
AXIOMS = "the proof depends on axioms beyond Classical.choice, Quot.sound, propext: "
RECHECK = ("the proof text does not compile: (kernel) declaration type mismatch, "
           "'_burnqed_recheck.two_plus_two_is_five.proof_1'")
CRASH = "verification failed: "
# The exploits the double emulates as Lean does, past an open guard, and what stops each (a prefix of the reason).
STOPPED_BY_LEAN: dict[str, str] = {
    "sorry": SORRY, "exact sorry": SORRY, "simp; sorry": SORRY,
    "native_decide": f"{AXIOMS}Lean.ofReduceBool", "decide +native": f"{AXIOMS}Lean.ofReduceBool",
    BY_ELAB_AXIOM: f"{AXIOMS}smuggled_false", "exact (by_elab pure x)": f"{AXIOMS}smuggled_false",
    **dict.fromkeys(KERNEL_OFF, RECHECK),
    **dict.fromkeys(STACK, CRASH),
}
# The answer's exploits, refused by the answer's rules whatever the guard (reasons from tests/search/test_answers.py).
ANSWER_REFUSED: dict[str, str] = {
    completion("sorry"): "the answer is left `sorry`",
    completion("(sorry : ℕ) -- a comment"): "the answer is left `sorry`",
    completion("2", "  norm_num", theorem="theorem putnam_easy : 1 + 1 = 2 := by\n"):
        "the completion states putnam_easy otherwise ('1 + 1 = 2'): only the theorem as given counts",
    completion("2", "  norm_num", theorem="theorem putnam_other : 1 + 1 = putnam_easy_solution := by\n"):
        "no `theorem putnam_easy … :=` in the completion: no proof to read",
    completion(""): "no answer: the completion gives putnam_easy_solution no value",
}


def body(tactic: str) -> str:
    """A completion of FALSE's whole prompt whose proof is `tactic` (indented under `:= by`, the fence after)."""
    return "".join(f"  {line}\n" for line in tactic.split("\n")) + "```"


def config(version: str, log: Path, verifiers: int = 2) -> LeanConfig:
    return LeanConfig(command=double_argv("--pantograph-version", version, "--log", str(log)),
                      pantograph_version=version, tactic_timeout_s=5.0, compile_timeout_s=1.0, watchdog_grace_s=0.5,
                      ready_timeout_s=10.0, verifier_workers=verifiers)


def in_process(version: str, log: Path, verifiers: int) -> LeanPool:
    """`config`'s pool with the double in this process (tests/doubles/line_servers.py), its verifier workers too."""
    def worker() -> InProcessReplay:
        return InProcessReplay(DoubleServer(version, log=log))

    return LeanPool(worker, 1, theorems_per_worker=4, recycle_requests=10**12, recycle_seconds=float("inf"),
                    verifier_factory=worker, verifiers=verifiers)


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Callable[..., LeanReward]]:
    """A reward over THEOREMS on the double (at `version`, `verifiers` verifier workers, logging to tmp_path/log), in
    this process unless `process`; closed after the test."""
    made: list[LeanReward] = []

    def build(version: str, guard: TacticGuard = DEFAULT_GUARD, verifiers: int = 2,
              failed: tuple[FailedProof, ...] = (), process: bool = False) -> LeanReward:
        lean = config(version, tmp_path / "log", verifiers)
        settings = RewardSettings(fmt=FMT, repair=REPAIR if failed else None)
        pool = ((lambda: LeanPool.from_config(lean, 1, theorems_per_worker=4)) if process else
                (lambda: in_process(version, tmp_path / "log", verifiers)))
        reward = LeanReward(THEOREMS, pool, guard, settings, failed)
        made.append(reward)
        return reward

    yield build
    for reward in made:
        reward.close()


def compiled(log: Path) -> list[str]:
    """The proof files the double was asked to compile (`frontend.process` with `#print axioms`), in order."""
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    sent = [json.loads(line.split(" ", 1)[1]) for line in lines if line.startswith("frontend.process ")]
    return [str(payload["file"]) for payload in sent if "#print axioms" in str(payload.get("file"))]


def call(reward: LeanReward, batch: list[tuple[Theorem, str]]) -> list[float]:
    """The reward called as TRL calls it, on (theorem, completion) pairs."""
    return reward(prompts=[reward.prompts[t.name] for t, _ in batch], completions=[c for _, c in batch],
                  theorem=[t.name for t, _ in batch])


def marked(tactic: str) -> str:
    """An exploit of the guard's table with its honest `simp` (there so that only one rule refuses it) made a step Lean
    rejects on FALSE: the double, which has no semantics, accepts any honest tactic (FAILCOMPILE stands for Lean's
    rejection, as in tests/search/test_answers.py)."""
    return re.sub(r"\bsimp\b", "FAILCOMPILE", tactic)


# The guard table's cases that whole mode's reader cuts before the guard sees them: a command after the proof ends it.
CUT_BY_THE_READER = {"#check x": "empty proof", "simp\nend": "the proof text does not compile: unsolved goals",
                     "simp; instance foo : Inhabited Nat := ⟨0⟩": "the proof text does not compile: unsolved goals"}


@pytest.mark.slow
@pytest.mark.parametrize("version", VERSIONS)
def test_with_the_default_guard_every_exploit_earns_zero_before_lean(version: str, make, tmp_path: Path) -> None:
    reward = make(version)
    tactics = [*ONLY_BY.values(), *CUT_BY_THE_READER, *KERNEL_OFF, *RESOURCE_OPTIONS, *STOPPED_BY_LEAN]
    exploits = [(FALSE, body(marked(t))) for t in tactics]
    exploits += [(OPEN, c) for c in (*ANSWER_REFUSED, *(completion(a) for a in SMUGGLED.values()))]
    assert call(reward, exploits) == [0.0] * len(exploits)
    stats = reward.last
    assert stats is not None
    reasons = dict(zip(tactics, stats.reasons, strict=False))
    denied = {t for t, reason in reasons.items()
              if reason.startswith("tactic ") and " is denied: " in reason}  # a deny pattern or a built-in rule
    assert set(tactics) - denied == set(CUT_BY_THE_READER)
    assert {t: reasons[t] for t in CUT_BY_THE_READER} == CUT_BY_THE_READER
    assert stats.reasons[len(tactics):] == (*ANSWER_REFUSED.values(), *(
        f"the answer {answer!r} is denied: matches deny pattern {DENIED_BY[name]!r}"
        for name, answer in SMUGGLED.items()))
    # Only the honest step the reader kept reached Lean, once (both cut cases read to it): never the exploit.
    assert [file.split("\n#print axioms")[0] for file in compiled(tmp_path / "log")] == [
        "open Nat\n\ntheorem two_plus_two_is_five : 2 + 2 = 5 := by\n  FAILCOMPILE\n"]
    assert (stats.verified, stats.compiles, stats.cache_hits) == (0, 1, 1)


@pytest.mark.slow
@pytest.mark.parametrize("version", VERSIONS)
def test_past_an_open_guard_lean_stops_every_exploit_and_a_proof_still_earns_one(version: str, make,
                                                                                 tmp_path: Path) -> None:
    reward = make(version, OPEN_GUARD)
    batch = [(FALSE, body(t)) for t in STOPPED_BY_LEAN] + [(OPEN, c) for c in ANSWER_REFUSED]
    batch += [(HONEST, HONEST_PROOF), (OPEN, RIGHT_ANSWER)]
    assert call(reward, batch) == [0.0] * (len(STOPPED_BY_LEAN) + len(ANSWER_REFUSED)) + [1.0, 1.0]
    stats = reward.last
    assert stats is not None
    reasons = dict(zip(STOPPED_BY_LEAN, stats.reasons, strict=False))
    assert {t: r[:len(STOPPED_BY_LEAN[t])] for t, r in reasons.items()} == STOPPED_BY_LEAN
    assert stats.reasons[len(STOPPED_BY_LEAN):-2] == tuple(ANSWER_REFUSED.values())
    assert stats.reasons[-2:] == ("", "")
    assert (stats.verified, stats.refused, stats.compiles, stats.failures) == (
        2, len(ANSWER_REFUSED), len(STOPPED_BY_LEAN) + 2, len(STACK))
    # and the right answer's check against the reference (search.answer_check), one compile more
    assert len(compiled(tmp_path / "log")) == len(STOPPED_BY_LEAN) + 3


@pytest.mark.slow
@pytest.mark.parametrize("version", VERSIONS)
def test_a_verified_proof_earns_one_and_the_file_compiled_is_whole_modes(version: str, make, tmp_path: Path) -> None:
    reward = make(version)
    assert call(reward, [(HONEST, HONEST_PROOF), (OPEN, RIGHT_ANSWER), (FALSE, body("norm_num\nFAILCOMPILE"))]) == [
        1.0, 1.0, 0.0]
    stats = reward.last
    assert stats is not None and stats.reasons[2] == "the proof text does not compile: unsolved goals"
    files = compiled(tmp_path / "log")
    # The restated theorem as given, the answer in its slot, the axioms report and the recheck: whole mode's file; and,
    # the answer's proof verified, its check against the reference under the header the proof compiled under.
    assert sorted(file.split("\n#print axioms")[0] for file in files) == sorted([
        "theorem two_plus_two : 2 + 2 = 4 := by\n  norm_num\n",
        f"abbrev putnam_easy_solution : ℕ := (2)\n-- 2\n\n{THEOREM}  norm_num [putnam_easy_solution]\n",
        check_file(OPEN, "2", "="),
        "open Nat\n\ntheorem two_plus_two_is_five : 2 + 2 = 5 := by\n  norm_num\n  FAILCOMPILE\n"])


@pytest.mark.slow
@pytest.mark.parametrize("version", VERSIONS)
def test_a_hung_compile_and_a_crashed_verifier_earn_zero_and_the_next_completion_its_verdict(
        version: str, make, tmp_path: Path) -> None:
    # one verifier: the compiles queue behind the hang and the crash; the double's process: the client's watchdog
    reward = make(version, OPEN_GUARD, verifiers=1, process=True)
    batch = [(FALSE, body("compilehang")), (FALSE, body(STACK[0])), (HONEST, HONEST_PROOF)]
    assert call(reward, batch) == [0.0, 0.0, 1.0]
    stats = reward.last
    assert stats is not None and stats.compiles == 3
    # From 0.3.4 Lean cuts the hung compile short (nothing declared: Lean's verdict); the crash is no verdict.
    assert stats.reasons[0].startswith("the unit before `#print axioms` does not declare two_plus_two_is_five")
    assert stats.reasons[1].startswith(CRASH) and stats.failures == 1
    # The next call still gets verdicts; the crash's completion is asked again (no verdict was cached for it).
    assert call(reward, [(FALSE, body(STACK[0])), (OPEN, RIGHT_ANSWER)]) == [0.0, 1.0]
    assert reward.last is not None and (reward.last.compiles, reward.last.cache_hits) == (2, 0)


@pytest.mark.slow
def test_identical_completions_compile_once_and_rewards_keep_the_completions_order(make, tmp_path: Path) -> None:
    reward = make("0.3.4", OPEN_GUARD)
    batch = [(FALSE, body("sorry")), (HONEST, HONEST_PROOF), (HONEST, "  norm_num   -- the same proof\n```"),
             (FALSE, body("sorry")), (HONEST, HONEST_PROOF), (FALSE, ""), (HONEST, HONEST_PROOF)]
    assert call(reward, batch) == [0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    stats = reward.last
    assert stats is not None
    assert (stats.compiles, stats.cache_hits, stats.refused, stats.verified) == (2, 4, 1, 4)
    assert stats.reasons[5] == "empty proof"
    assert len(compiled(tmp_path / "log")) == 2
    again = call(reward, batch)
    assert again == [0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    assert reward.last is not None and (reward.last.compiles, reward.last.cache_hits) == (0, 6)
    assert len(compiled(tmp_path / "log")) == 2


def test_the_prompts_are_whole_modes_byte_for_byte() -> None:
    reward = LeanReward(THEOREMS, lambda: pytest.fail("no pool is opened"), DEFAULT_GUARD, RewardSettings(fmt=FMT))
    assert reward.rows() == [{"prompt": whole_prompt(t, FMT, DeclarationForm.BINDER), "theorem": t.name}
                             for t in THEOREMS]
    assert reward.rows()[2]["prompt"] == (
        "<｜User｜>Complete the following Lean 4 code:\n\n```lean4\nabbrev putnam_easy_solution : ℕ := sorry\n\n"
        f"{THEOREM}  sorry\n```<｜Assistant｜>```lean4\nabbrev putnam_easy_solution : ℕ :=")
    assert reward.rows()[1]["prompt"] == (
        "<｜User｜>Complete the following Lean 4 code:\n\n```lean4\nimport Mathlib\n\ntheorem two_plus_two : 2 + 2 = 4 "
        ":= by\n  sorry\n```<｜Assistant｜>```lean4\nimport Mathlib\n\ntheorem two_plus_two : 2 + 2 = 4 := by\n")


def test_bad_input_is_refused_before_lean() -> None:
    reward = LeanReward(THEOREMS, lambda: pytest.fail("no pool is opened"), DEFAULT_GUARD, RewardSettings(fmt=FMT))
    with reward:
        prompt = reward.prompts[HONEST.name]
        with pytest.raises(InputError, match="needs the dataset column 'theorem'"):
            reward(prompts=[prompt], completions=[HONEST_PROOF])
        with pytest.raises(InputError, match="names theorem 'nope', which the reward was not given"):
            reward(prompts=[prompt], completions=[HONEST_PROOF], theorem=["nope"])
        with pytest.raises(InputError, match="the prompt of completion 0 is not the whole prompt of two_plus_two"):
            reward(prompts=[prompt + " "], completions=[HONEST_PROOF], theorem=[HONEST.name])
        with pytest.raises(InputError, match="1 completions with 2 prompts and 1 theorem names"):
            reward(prompts=[prompt, prompt], completions=[HONEST_PROOF], theorem=[HONEST.name])
    with pytest.raises(InputError, match="prompt format plain-tactic is not a whole format"):
        LeanReward(THEOREMS, lambda: pytest.fail("no pool"), DEFAULT_GUARD,
                   RewardSettings(fmt=PromptFormat.PLAIN_TACTIC))
    with pytest.raises(InputError, match="theorem copied has no statement"):
        LeanReward([Theorem(name="copied")], lambda: pytest.fail("no pool"), DEFAULT_GUARD)


@pytest.mark.slow
def test_trls_reward_step_calls_it(make, tmp_path: Path) -> None:
    # TRL 1.16's own `GRPOTrainer._calculate_rewards`, on a stand-in for the trainer's state (no model, no training):
    # the dataset's extra column arrives as a keyword, the reward is synchronous, its metrics and reasons are logged.
    import torch
    from trl.trainer.grpo_trainer import GRPOTrainer
    from trl.trainer.utils import is_async_callable

    reward = make("0.3.4")
    assert not is_async_callable(reward)
    metrics: dict[str, list[float]] = {}
    extra: dict[str, list[str]] = {}

    class StandIn:
        accelerator = type("Accelerator", (), {"device": torch.device("cpu"), "is_main_process": True})()
        args = type("Args", (), {"report_to": []})()
        state = type("State", (), {"global_step": 0})()
        environments = None

        def __init__(self) -> None:
            self.reward_funcs = [reward]
            self.reward_processing_classes = [None]
            self.reward_func_names = ["lean_verdict"]

        def _log_metric(self, name: str, value: float) -> None:
            metrics.setdefault(name, []).append(value)

        def _log_completion_extra(self, column: str, values: list[str]) -> None:
            extra.setdefault(column, []).extend(values)

    rows = reward.rows()
    inputs = [rows[1], rows[1], rows[0], rows[2]]
    completions = [HONEST_PROOF, HONEST_PROOF, body("sorry"), RIGHT_ANSWER]
    out = GRPOTrainer._calculate_rewards(StandIn(), inputs, [r["prompt"] for r in inputs], completions,
                                         [[1]] * len(inputs))
    assert out.tolist() == [[1.0], [1.0], [0.0], [1.0]]
    assert metrics["lean/verified"] == [3.0] and metrics["lean/cache_hits"] == [1.0]
    assert metrics["lean/compiles"] == [2.0] and metrics["lean/refused"] == [1.0]
    assert extra == {"lean_verdict": ["", "", "tactic 'sorry' on the path is denied: matches deny pattern "
                                      "'\\\\bsorry\\\\b'", ""]}


@pytest.mark.slow
@pytest.mark.timeout(600)  # the tiny model and a trainer on 2 shared cores
@pytest.mark.parametrize("engine", ["trainer", "continuous", "served"])
def test_under_each_rollout_engine_the_trainers_reward_step_gives_the_rewards_verdicts(
        engine: str, make, tiny_model_dir: Path, tmp_path: Path) -> None:
    # The trainer `burnqed rl` builds for the engine (`rl.grpo_trainer.build_trainer`), its reward the stage's recorder
    # over the reward: the default guard's exploits earn 0.0 with the reasons the reward alone gives them, the verified
    # proofs 1.0, and a proof cut at rl.max_completion_tokens before its closing fence 0.0 (unfinished, never compiled)
    # where the same text ended by the model is judged. Served: the rollout_func's columns (weights version, the two
    # log-probs) reach the reward as TRL passes them and are kept with each rollout, the rewards unchanged.
    from trl.trainer.utils import is_async_callable

    from burnqed.config import RlConfig, SftConfig
    from burnqed.rl.grpo_step import TRUNCATED, Journal, RecordingReward
    from burnqed.rl.grpo_trainer import build_trainer
    from burnqed.rl.served import ServedRollouts
    from burnqed.sft.model import load_for_training

    reward = make("0.3.4")
    policy = load_for_training("full", tiny_model_dir, None, SftConfig(), "cpu", False)
    rl = RlConfig(rollout_engine=engine, max_completion_tokens=8)
    journal = Journal()
    recorder = RecordingReward(reward, journal, cut_at=rl.max_completion_tokens, stops=["```"])
    served = engine == "served"
    engine_func = ServedRollouts("http://127.0.0.1:9", tmp_path / "weights", tokenizer_source=tiny_model_dir,
                                 rl=rl) if served else None
    trainer = build_trainer(policy.model, policy.tokenizer, reward.rows(), recorder, rl, device="cpu", bf16=False,
                            output_dir=tmp_path / "trainer", rollout_func=engine_func)
    recorder.end_ids = frozenset(trainer.eos_token_ids)
    assert trainer.args.use_transformers_continuous_batching is (engine == "continuous")
    assert trainer.rollout_func is engine_func
    assert is_async_callable(recorder)  # awaited on TRL's own event loop, where the reward's pool then lives
    exploits = [(FALSE, body(marked(t))) for t in [*ONLY_BY.values(), *KERNEL_OFF, *RESOURCE_OPTIONS]]
    exploits += [(OPEN, c) for c in (*ANSWER_REFUSED, *(completion(a) for a in SMUGGLED.values()))]
    unfenced = HONEST_PROOF.removesuffix("```")
    batch = [*exploits, (HONEST, HONEST_PROOF), (OPEN, RIGHT_ANSWER), (HONEST, unfenced), (HONEST, unfenced),
             (HONEST, HONEST_PROOF)]
    end = trainer.eos_token_ids[0]
    # the unfenced proof ended by the model, then cut (8 tokens, no end-of-sequence token, no fence); the fenced one
    # at the bound too, which the fence finished
    ids = [[5, end]] * (len(batch) - 2) + [[5] * 8] * 2
    columns = {"weights_version": 4, "served_logprob": -2.0, "trainer_logprob": -2.5} if served else {}
    inputs = [{"prompt": reward.prompts[t.name], "theorem": t.name, **columns} for t, _ in batch]
    out = trainer._calculate_rewards(inputs, [i["prompt"] for i in inputs], [c for _, c in batch], ids)
    assert out[:, 0].tolist() == [0.0] * len(exploits) + [1.0, 1.0, 1.0, 0.0, 1.0]
    alone = call(reward, exploits)
    stats = reward.last
    assert stats is not None and alone == [0.0] * len(exploits)
    assert [r.reason for r in journal.rollouts] == [*stats.reasons, "", "", "", TRUNCATED, ""]
    assert [r.truncated for r in journal.rollouts] == [False] * (len(batch) - 2) + [True, False]
    kept = {(r.weights_version, r.served_logprob, r.trainer_logprob) for r in journal.rollouts}
    assert kept == ({(4, -2.0, -2.5)} if served else {(None, None, None)})


# ------------------------------------------------------------------------------------------------ repair prompts

# Failed proofs as trajectory rows record them (search.repair_rounds > 0): FALSE's fresh attempt, HONEST's revision.
FAILED_FALSE = FailedProof(FALSE.name, Feedback("norm_num", (FeedbackMessage("error", "unsolved goals\n⊢ False", 1,
                                                                             0),), goal="⊢ 2 + 2 = 5"), 0)
FAILED_HONEST = FailedProof(HONEST.name, Feedback("simp\nrfl", (FeedbackMessage("error", "no goals", 2, 0),)), 1)
FAILED = (FAILED_FALSE, FAILED_HONEST)
# A revision of FALSE's failed proof for each kind of exploit, past an open guard, and what stops it (reason prefixes).
EXPLOIT_REVISIONS = {"sorry": SORRY, "native_decide": f"{AXIOMS}Lean.ofReduceBool",
                     BY_ELAB_AXIOM: f"{AXIOMS}smuggled_false", KERNEL_OFF[1]: RECHECK}


def revision_of(failure: FailedProof) -> str:
    """The repair prompt search sends to revise `failure` (built here from search's own function)."""
    theorem = next(t for t in THEOREMS if t.name == failure.theorem)
    return repair_prompt(REPAIR, theorem, theorem.declaration(DeclarationForm.BINDER), failure.feedback,
                         failure.revision)


def call_revisions(reward: LeanReward, batch: list[tuple[FailedProof, str]]) -> list[float]:
    """The reward called as TRL calls it on revisions: (failed proof, completion of its repair prompt) pairs."""
    return reward(prompts=[revision_of(f) for f, _ in batch], completions=[c for _, c in batch],
                  theorem=[f.theorem for f, _ in batch])


@pytest.mark.slow
@pytest.mark.parametrize("version", VERSIONS)
def test_a_revision_earns_one_when_it_verifies_and_zero_for_an_exploit_as_whole_search_counts_it(
        version: str, make, tmp_path: Path) -> None:
    reward = make(version, OPEN_GUARD, failed=FAILED)
    assert [row["prompt"] for row in reward.rows()[len(THEOREMS):]] == [revision_of(f) for f in FAILED]
    batch = [(FAILED_FALSE, body(t)) for t in EXPLOIT_REVISIONS] + [(FAILED_HONEST, HONEST_PROOF)]
    assert call_revisions(reward, batch) == [0.0] * len(EXPLOIT_REVISIONS) + [1.0]
    stats = reward.last
    assert stats is not None and (stats.verified, stats.compiles) == (1, len(EXPLOIT_REVISIONS) + 1)
    assert {t: r[:len(EXPLOIT_REVISIONS[t])] for t, r in zip(EXPLOIT_REVISIONS, stats.reasons, strict=False)} == (
        EXPLOIT_REVISIONS)
    # The revision's file is whole mode's: the whole prompt's same proof is the cached verdict, never a new compile.
    assert call(reward, [(HONEST, HONEST_PROOF)]) == [1.0]
    assert reward.last is not None and (reward.last.compiles, reward.last.cache_hits) == (0, 1)
    # (the compiles ran in parallel on the verifier workers: the honest one is any of the log's, not its last)
    assert any("theorem two_plus_two : 2 + 2 = 4 := by\n  norm_num\n\n#print axioms" in file
               for file in compiled(tmp_path / "log"))


@pytest.mark.slow
@pytest.mark.parametrize("version", VERSIONS)
def test_with_the_default_guard_an_exploit_revision_earns_zero_before_lean(version: str, make,
                                                                            tmp_path: Path) -> None:
    reward = make(version, failed=FAILED)
    batch = [(FAILED_FALSE, body(t)) for t in EXPLOIT_REVISIONS] + [(FAILED_HONEST, HONEST_PROOF)]
    assert call_revisions(reward, batch) == [0.0] * len(EXPLOIT_REVISIONS) + [1.0]
    stats = reward.last
    assert stats is not None and (stats.refused, stats.compiles) == (len(EXPLOIT_REVISIONS), 1)
    assert all(" is denied: " in reason for reason in stats.reasons[:-1])
    assert len(compiled(tmp_path / "log")) == 1


def test_a_repair_prompt_is_accepted_only_for_its_own_theorem_and_failed_proof() -> None:
    reward = LeanReward(THEOREMS, lambda: pytest.fail("no pool is opened"), DEFAULT_GUARD,
                        RewardSettings(fmt=FMT, repair=REPAIR), FAILED)
    with reward:
        with pytest.raises(InputError, match=re.escape(
                "the prompt of completion 0 is not the whole prompt of two_plus_two (format deepseek-whole) nor the "
                "repair prompt of one of its 1 failed proofs (deepseek-repair): its completion would be read in "
                "another format")):
            reward(prompts=[revision_of(FAILED_FALSE)], completions=[HONEST_PROOF], theorem=[HONEST.name])
        other = FailedProof(FALSE.name, Feedback("simp", FAILED_FALSE.feedback.messages), 0)  # not given
        with pytest.raises(InputError, match="not the whole prompt of two_plus_two_is_five"):
            reward(prompts=[revision_of(other)], completions=[HONEST_PROOF], theorem=[FALSE.name])
        later = FailedProof(FALSE.name, FAILED_FALSE.feedback, 1)  # the same failed proof at another round
        with pytest.raises(InputError, match="not the whole prompt of two_plus_two_is_five"):
            reward(prompts=[revision_of(later)], completions=[HONEST_PROOF], theorem=[FALSE.name])
    with pytest.raises(InputError, match="prompt format plain-repair is not the repair format of deepseek-whole"):
        LeanReward(THEOREMS, lambda: pytest.fail("no pool"), DEFAULT_GUARD,
                   RewardSettings(fmt=FMT, repair=PromptFormat.PLAIN_REPAIR), FAILED)


def test_a_theorem_given_twice_is_refused_and_nothing_is_judged_before_the_first_call() -> None:
    with pytest.raises(InputError, match=r"^theorem two_plus_two_is_five is given twice: the reward names each "
                                         r"theorem once$"):
        LeanReward([*THEOREMS, THEOREMS[0]], lambda: pytest.fail("no pool"), DEFAULT_GUARD, RewardSettings(fmt=FMT))
    reward = LeanReward(THEOREMS, lambda: pytest.fail("no pool is opened"), DEFAULT_GUARD, RewardSettings(fmt=FMT))
    assert reward.last is None  # no call's statistics before the first call


def recorded_pool(events: list[str]) -> Callable[[], contextlib.AbstractAsyncContextManager[Any]]:
    """A pool that records its entry and exit in `events`; never asked (an empty completion is refused before Lean)."""

    @contextlib.asynccontextmanager
    async def pool() -> AsyncIterator[Any]:
        events.append("enter")
        yield None
        events.append("exit")

    return pool


def test_a_call_from_the_rewards_own_event_loop_is_refused_not_waited_on_forever() -> None:
    reward = LeanReward(THEOREMS, lambda: pytest.fail("no pool is opened"), DEFAULT_GUARD, RewardSettings(fmt=FMT))

    async def nested() -> None:  # on the reward's loop thread: waiting there for the loop itself would never end
        inner = asyncio.sleep(0)
        try:
            reward.run(inner)
        finally:
            inner.close()

    with reward, pytest.raises(RuntimeError, match=r"^LeanReward was called from its own event loop: await score\(\)"):
        reward.run(nested())


def test_once_its_pool_lives_on_a_loop_a_score_awaited_on_another_loop_is_refused() -> None:
    events: list[str] = []
    pool = recorded_pool(events)
    reward = LeanReward(THEOREMS, pool, DEFAULT_GUARD, RewardSettings(fmt=FMT))
    prompt = reward.prompts[HONEST.name]
    loop = asyncio.new_event_loop()  # the caller's loop, running on its own thread as TRL's does
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:  # the pool is entered on `loop`: its connections belong there, so another loop may not use them
        first = asyncio.run_coroutine_threadsafe(reward.score([prompt], [""], [HONEST.name]), loop).result()
        assert (first.rewards, events) == ((0.0,), ["enter"])
        with pytest.raises(RuntimeError, match=r"^LeanReward was awaited on another event loop than its pool's"):
            asyncio.run(reward.score([prompt], [""], [HONEST.name]))
        reward.close()  # left on the loop it was entered on
        assert events == ["enter", "exit"]
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


def test_a_call_after_the_pools_loop_stopped_is_refused_not_waited_on_forever() -> None:
    events: list[str] = []
    reward = LeanReward(THEOREMS, recorded_pool(events), DEFAULT_GUARD, RewardSettings(fmt=FMT))
    prompt = reward.prompts[HONEST.name]
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(reward.score([prompt], [""], [HONEST.name]), loop).result()
    loop.call_soon_threadsafe(loop.stop)  # the caller's loop ends, the reward still open
    thread.join()
    outcome: list[BaseException | None] = []

    def call() -> None:  # on a thread of its own: a call waiting on the stopped loop would never return
        inner = asyncio.sleep(0)
        try:
            reward.run(inner)
            outcome.append(None)
        except RuntimeError as exc:
            outcome.append(exc)
        finally:
            inner.close()

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    caller.join(timeout=10)
    assert [str(exc) for exc in outcome if exc is not None] == [
        "LeanReward's pool lives on an event loop that no longer runs: close the reward first"]
    thread = threading.Thread(target=loop.run_forever, daemon=True)  # the loop again, to leave the pool on it
    thread.start()
    try:
        reward.close()
        assert events == ["enter", "exit"]
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


def test_close_is_idempotent_and_a_reward_never_called_closes_at_once() -> None:
    reward = LeanReward(THEOREMS, lambda: pytest.fail("no pool is opened"), DEFAULT_GUARD, RewardSettings(fmt=FMT))
    reward.close()
    reward.close()  # nothing was started
    gc.collect()  # what earlier tests left is collected first: below, only this reward's loop could warn
    with warnings.catch_warnings(record=True) as caught:  # its loop is closed, not left to the collector
        warnings.simplefilter("always")
        with reward:
            assert reward.run(asyncio.sleep(0, result=7)) == 7  # the loop thread starts
            # a daemon: a reward nobody closed cannot keep the interpreter from exiting
            assert [t.daemon for t in threading.enumerate() if t.name == "burnqed-reward"] == [True]
        reward.close()  # after the context's own close
        del reward
        gc.collect()
    assert [t for t in threading.enumerate() if t.name == "burnqed-reward"] == []
    assert [str(w.message) for w in caught if "unclosed event loop" in str(w.message)] == []


def test_a_reward_called_again_after_close_enters_a_new_pool_on_a_new_loop() -> None:
    events: list[str] = []
    reward = LeanReward(THEOREMS, recorded_pool(events), DEFAULT_GUARD, RewardSettings(fmt=FMT))
    prompt = reward.prompts[HONEST.name]
    for _ in range(2):  # close forgets the loop the pool was entered on: the next call starts afresh
        assert reward(prompts=[prompt], completions=[""], theorem=[HONEST.name]) == [0.0]
        reward.close()
    assert events == ["enter", "exit", "enter", "exit"]


def test_the_pool_is_entered_at_the_first_call_and_left_by_close_and_a_conversation_is_refused() -> None:
    events: list[str] = []
    pool = recorded_pool(events)
    with LeanReward(THEOREMS, pool, DEFAULT_GUARD, RewardSettings(fmt=FMT)) as reward:
        assert events == []
        prompt = reward.prompts[HONEST.name]
        assert reward(prompts=[prompt], completions=[""], theorem=[HONEST.name]) == [0.0]
        assert events == ["enter"]
        with pytest.raises(InputError, match=r"^completion 0 is a list, not text: the reward reads completions of a "
                                             r"standard \(text\) dataset"):
            reward(prompts=[prompt], completions=[[{"role": "assistant", "content": "norm_num"}]],  # type: ignore[list-item]
                   theorem=[HONEST.name])
    assert events == ["enter", "exit"]


@pytest.mark.slow
def test_an_answer_task_pays_only_an_answer_lean_shows_equal_to_the_reference() -> None:
    """On minilean (which decides these as Lean does), a made-up problem in PutnamBench's form: `100` proves
    `3 ≤ SOL` but is not the reference 5 (0.0); `2 + 3` is (1.0); a theorem with no reference pays nothing."""
    from tests.eval.test_answers import AT_LEAST_THREE

    unreferenced = AT_LEAST_THREE.model_copy(update={
        "name": "putnam_mock_unreferenced", "answer": AT_LEAST_THREE.answer.model_copy(  # type: ignore[union-attr]
            update={"reference": None})})
    theorem = "theorem {} : 3 ≤ putnam_mock_solution := by\n"
    proof = "  norm_num [putnam_mock_solution]"
    minilean = PantographVersion.parse("0.3.4")
    with LeanReward([AT_LEAST_THREE, unreferenced],
                    lambda: InProcessReplayPool(lambda: MiniLean(version=minilean), 1, theorems_per_worker=4),
                    DEFAULT_GUARD, RewardSettings(fmt=FMT)) as reward:
        batch = [(AT_LEAST_THREE, completion("100", proof, theorem.format("putnam_mock"))),
                 (AT_LEAST_THREE, completion("2 + 3", proof, theorem.format("putnam_mock"))),
                 (unreferenced, completion("5", proof, theorem.format("putnam_mock_unreferenced")))]
        assert call(reward, batch) == [0.0, 1.0, 0.0]
        stats = reward.last
        assert stats is not None
        assert stats.reasons == (
            "the answer '100' is not shown to be the reference answer (different) (header sha256 "
            f"{header_digest(judged_header(AT_LEAST_THREE, '100'))}): Lean proved the answer different "
            "from the reference", "",
            "the answer '5' is not shown to be the reference answer (no reference): the benchmark records no "
            "reference answer for putnam_mock_solution")
        assert (stats.verified, stats.compiles, stats.failures) == (1, 3, 0)


@pytest.mark.slow
def test_an_answer_that_reads_the_reference_only_outside_its_slot_earns_zero() -> None:
    """On minilean, `3 ≤ SOL` (reference 5) proved by `decide`: the value `if decl_name% == `SOL then 100 else 5` is
    100 in the slot the proof compiled under (5 in any other declaration), so the check of the slot's constant, under
    that header, says `different` and it earns 0.0, as the plain 100 does; the honest 5 earns 1.0."""
    from tests.eval.test_answers import AT_LEAST_THREE, NAMED

    minilean = PantographVersion.parse("0.3.4")
    theorem = "theorem putnam_mock : 3 ≤ putnam_mock_solution := by\n"
    with LeanReward([AT_LEAST_THREE], lambda: InProcessReplayPool(lambda: MiniLean(version=minilean), 1,
                                                                  theorems_per_worker=4),
                    DEFAULT_GUARD, RewardSettings(fmt=FMT)) as reward:
        batch = [(AT_LEAST_THREE, completion(answer, "  decide", theorem)) for answer in (NAMED, "100", "5")]
        assert call(reward, batch) == [0.0, 0.0, 1.0]
        stats = reward.last
        assert stats is not None and (stats.verified, stats.compiles, stats.failures) == (1, 3, 0)
        assert stats.reasons == (
            f"the answer {NAMED!r} is not shown to be the reference answer (different) (header sha256 "
            f"{header_digest(judged_header(AT_LEAST_THREE, NAMED))}): Lean proved the answer different from the "
            "reference",
            "the answer '100' is not shown to be the reference answer (different) (header sha256 "
            f"{header_digest(judged_header(AT_LEAST_THREE, '100'))}): Lean proved the answer different from the "
            "reference", "")


@pytest.mark.slow
def test_an_answer_check_lean_gave_no_verdict_on_earns_zero_uncached_and_is_asked_again(tmp_path: Path) -> None:
    """The reference `compilehang` (the record's, not in the header: the proof's file does not hold it) makes the
    check's compile hang; before 0.3.4 the double never answers it, so the watchdog kills the verifier: no verdict of
    Lean's on the answer (a failure, not cached), unlike a check Lean answered."""
    hanging = OPEN.model_copy(update={"header": "abbrev putnam_easy_solution : ℕ := sorry",
                                      "answer": OPEN.answer.model_copy(  # type: ignore[union-attr]
                                          update={"reference": "compilehang"})})
    lean = config("0.3.3", tmp_path / "log", verifiers=1)
    with LeanReward([hanging], lambda: LeanPool.from_config(lean, 1, theorems_per_worker=4), DEFAULT_GUARD,
                    RewardSettings(fmt=FMT)) as reward:
        for _ in range(2):
            assert call(reward, [(hanging, RIGHT_ANSWER)]) == [0.0]
            stats = reward.last
            assert stats is not None and (stats.compiles, stats.failures, stats.cache_hits) == (1, 1, 0)
            assert stats.reasons[0].startswith(
                "the answer '2' is not shown to be the reference answer (undecided) (header sha256 "
                f"{header_digest(judged_header(hanging, '2'))}): neither side proved: `=`: verification failed: ")
