"""The generated world: determinism, splits, Lean-shaped goals and tactics, and that every theorem replays and
compiles through the replay server (step by step, and as whole proofs with bullets and `<;>`)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections import Counter
from itertools import pairwise
from pathlib import Path

import pytest

from burnqed.data.index import theorem_index
from burnqed.lean.payloads import frontend_process
from leankit.corpus import (
    Corpus,
    TheoremSpec,
    load_corpus,
    normalize_expr,
    split_hypothesis,
)
from leankit.world import FAMILIES, WORLD_SOURCE, embedded_corpus, generate_world, world_json
from leankit.world.catalog import Family
from leankit.world.draft import Dice, context
from minilean.replay.replay_server import ReplayServer

# sha256 of world_json(generate_world(0, reserved=<bundled statements>)). A change to the families that changes
# the world must bump WORLD_VERSION and update this digest (and the figures in README and docs/replay-corpus.md).
# The world as written out, its theorems' binder-start goals included (leankit.corpus.TheoremSpec).
DEFAULT_WORLD_SHA256 = "bbcc3a65882e5046d919b6bea6551402d911437cac588625432b16db26f76328"

WORLD = embedded_corpus()
WORLD_THEOREMS = [t for t in WORLD.theorems if t.source == WORLD_SOURCE]
LEAN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def default_world_text() -> str:
    return world_json(generate_world(reserved=[t.statement for t in load_corpus().theorems]))


# -- determinism ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_same_seed_gives_a_byte_identical_world_and_the_default_is_pinned() -> None:
    text = default_world_text()
    assert text == default_world_text()
    assert hashlib.sha256(text.encode()).hexdigest() == DEFAULT_WORLD_SHA256


@pytest.mark.slow
def test_another_process_with_another_hash_seed_writes_the_same_bytes(tmp_path: Path) -> None:
    out = tmp_path / "world.json"
    done = subprocess.run([sys.executable, "-m", "leankit.world", "--output", str(out)], capture_output=True,
                          text=True, timeout=120, check=False, env={**os.environ, "PYTHONHASHSEED": "12345"})
    assert done.returncode == 0, done.stderr
    assert out.read_text(encoding="utf-8") == default_world_text()
    assert load_corpus(out).name == "burnqed-world"  # a valid corpus file for `--corpus`


def test_another_seed_gives_another_world_with_the_same_shape() -> None:
    other = generate_world(seed=7)
    default = generate_world()
    assert [t.name for t in other.theorems] == [t.name for t in default.theorems]
    assert [t.statement for t in other.theorems] != [t.statement for t in default.theorems]
    shape = Counter((t.family, t.split) for t in default.theorems)
    assert Counter((t.family, t.split) for t in other.theorems) == shape


def test_the_dice_is_deterministic_and_in_range() -> None:
    draws = [Dice(3, "x").randint(1, 6) for _ in range(3)]
    assert len(set(draws)) == 1  # a fresh dice starts the same stream
    dice = Dice(3, "x")
    values = [dice.randint(1, 6) for _ in range(600)]
    assert set(values) == {1, 2, 3, 4, 5, 6}
    assert sorted(Dice(0, "s").sample(range(10), 10)) == list(range(10))
    with pytest.raises(ValueError, match="empty range"):
        dice.randint(2, 1)


# -- splits and families --------------------------------------------------------------------------------------


def test_splits_families_and_the_search_only_families() -> None:
    per = Counter((t.family, t.split) for t in WORLD_THEOREMS)
    tests = sum(1 for t in WORLD_THEOREMS if t.split == "test")
    assert tests >= 60
    for family in FAMILIES:
        assert per[(family.name, "test")] == family.test >= 5
        assert per[(family.name, "pool")] == family.pool >= 1
        assert per[(family.name, "train")] == family.train
    search_only = [family.name for family in FAMILIES if not family.taught]
    assert len(search_only) >= 4
    # Only search can teach these: no train theorem of theirs, so no proof of theirs in the SFT data.
    assert not any(t.split == "train" and t.family in search_only for t in WORLD_THEOREMS)
    assert {t.topic for t in WORLD_THEOREMS} == {"algebra", "number_theory", "inequality", "logic", "sets"}


def test_the_embedded_corpus_is_the_bundled_corpus_then_the_world_with_unique_names_and_statements() -> None:
    bundled = load_corpus()
    assert [t.name for t in WORLD.theorems[: len(bundled.theorems)]] == [t.name for t in bundled.theorems]
    names = [t.name for t in WORLD.theorems]
    statements = [normalize_expr(t.statement) for t in WORLD.theorems]
    assert len(set(names)) == len(names) and len(set(statements)) == len(statements)
    assert all(LEAN_NAME.match(name) for name in names)
    test = theorem_index(WORLD, "test")
    assert Counter(t.source for t in test.theorems) == {WORLD_SOURCE: 75, "burnqed-bundled": 15}


# -- Lean shape ------------------------------------------------------------------------------------------------


def test_goals_print_like_lean() -> None:
    for theorem in WORLD_THEOREMS:
        for goal in theorem.goals.values():
            assert "⊢" not in goal.target and not goal.target.startswith(" ")
            names = [name for hyp in goal.hyps for name, _ in split_hypothesis(hyp)]
            assert len(set(names)) == len(names), (theorem.name, goal)
            types = [hyp.partition(" : ")[2] for hyp in goal.hyps]
            # Lean groups consecutive hypotheses of one type on one line.
            assert all(a != b for a, b in pairwise(types)), (theorem.name, goal.hyps)
            assert goal.case in (None, "inl", "inr", "left", "right")
    assert context(("x", "ℝ"), ("y", "ℝ"), ("h₀", "x = y")) == ["x y : ℝ", "h₀ : x = y"]


def test_proofs_are_one_to_six_tactics_with_branching_and_several_tactics_per_goal() -> None:
    lengths = Counter(len(p) for t in WORLD_THEOREMS for p in t.proofs)
    assert min(lengths) == 1 and max(lengths) == 6
    branching = {t.family for t in WORLD_THEOREMS if any(len(tr.result or ()) >= 2 for tr in t.transitions)}
    assert {"lin_sys", "or_cases", "and_logic", "or_comm"} <= branching
    for theorem in WORLD_THEOREMS:
        accepted = Counter(tr.goal for tr in theorem.transitions if tr.result is not None)
        # The root and the goal after the first step of the first proof each accept several tactics.
        assert accepted[theorem.root] >= 2, theorem.name
        first = theorem.lookup(theorem.root, theorem.proofs[0][0])
        assert first is not None and first.result is not None
        for child in first.result:
            assert accepted[child] >= 2, (theorem.name, child)


def test_wrong_tactics_are_recorded_with_lean_messages() -> None:
    known = ("linarith failed to find a contradiction", "Expected type must not contain free variables",
             "type mismatch", "omega could not prove the goal", "not a positivity goal", "unknown identifier",
             "tactic 'introN' failed", "tactic 'constructor' failed", "tactic 'assumption' failed")
    messages = [tr.error for t in WORLD_THEOREMS for tr in t.transitions if tr.error is not None]
    assert len(messages) >= 3 * len(WORLD_THEOREMS)
    assert all(message.startswith(known) for message in messages), {m.split("\n")[0] for m in messages
                                                                     if not m.startswith(known)}
    assert {m.split("\n")[0] for m in messages} >= {"linarith failed to find a contradiction", "type mismatch",
                                                    "Expected type must not contain free variables"}


def test_a_family_with_too_few_statements_is_refused() -> None:
    def constant(dice: Dice, name: str, split: str) -> object:
        from leankit.world.algebra import arith

        return arith(Dice(0, "fixed"), name, split)  # type: ignore[arg-type]

    with pytest.raises(ValueError, match="no new statement"):
        generate_world(families=[Family("fixed", constant, train=2, pool=0, test=0)])  # type: ignore[arg-type]


# -- through the replay server -----------------------------------------------------------------------------


def _request(server: ReplayServer, command: str, payload: dict[str, object]) -> dict[str, object]:
    reply = json.loads(server.handle(f"{command} {json.dumps(payload, ensure_ascii=False)}"))
    assert isinstance(reply, dict)
    return reply


def _replay(server: ReplayServer, theorem: TheoremSpec, proof: list[str]) -> None:
    state = _request(server, "goal.start", {"expr": theorem.statement})["stateId"]
    goals: list[object] = ["root"]
    for tactic in proof:
        reply = _request(server, "goal.tactic", {"stateId": state, "tactic": tactic})
        assert "goals" in reply, (theorem.name, tactic, reply)
        state, goals = reply["nextStateId"], reply["goals"]  # type: ignore[assignment]
    assert goals == [], (theorem.name, proof)


@pytest.mark.slow
def test_every_world_proof_replays_through_the_server_step_by_step() -> None:
    server = ReplayServer(WORLD)
    for theorem in WORLD_THEOREMS:
        for proof in theorem.proofs:
            _replay(server, theorem, proof)
        server.reset({})


def _compile(server: ReplayServer, name: str, statement: str, body: str) -> list[object]:
    # As search compiles a found proof: no import lines (the REPL has them), then `#print axioms`.
    file = f"theorem {name} : {statement} := by\n{body}\n\n#print axioms {name}\n"
    reply = _request(server, "frontend.process", frontend_process(server.version, file))  # the request search sends
    units = reply["units"]
    assert isinstance(units, list) and units and units[0]["newConstants"] == [name], reply
    return list(units[0]["messages"])


@pytest.mark.parametrize("family", [family.name for family in FAMILIES])
def test_every_family_compiles_as_a_whole_proof_file(family: str) -> None:
    server = ReplayServer(WORLD)
    for theorem in [t for t in WORLD_THEOREMS if t.family == family][:3]:
        for proof in theorem.proofs:
            body = "\n".join("  " + line for tactic in proof for line in tactic.split("\n"))
            assert _compile(server, theorem.name, theorem.statement, body) == [], (theorem.name, proof)


def test_whole_proofs_with_bullets_and_all_goals_combinators_compile() -> None:
    server = ReplayServer(WORLD)
    or_cases = next(t for t in WORLD_THEOREMS if t.family == "or_cases")
    var = or_cases.statement.split("(")[1].split(" ")[0]
    bullets = (f"  intro {var} h₀\n  rcases h₀ with h | h\n  · rw [h]\n    norm_num\n  · subst h\n    norm_num")
    assert _compile(server, or_cases.name, or_cases.statement, bullets) == []
    combined = f"  intro {var} h₀\n  cases' h₀ with h h <;> norm_num [h]"
    assert _compile(server, or_cases.name, or_cases.statement, combined) == []
    lin_sys = next(t for t in WORLD_THEOREMS if t.family == "lin_sys")
    x, y = lin_sys.statement.split("(")[1].split(" : ")[0].split()
    assert _compile(server, lin_sys.name, lin_sys.statement,
                    f"  intro {x} {y} h₀ h₁\n  constructor\n  · linarith\n  · linarith [h₀, h₁]") == []
    assert _compile(server, lin_sys.name, lin_sys.statement, f"  intro {x} {y} h₀ h₁\n  constructor <;> linarith") == []
    wrong = _compile(server, lin_sys.name, lin_sys.statement, f"  intro {x} {y} h₀ h₁\n  constructor\n  · omega")
    assert len(wrong) == 1 and "omega could not prove the goal" in str(wrong[0])


def test_a_world_corpus_file_serves_a_replay_server_process(tmp_path: Path) -> None:
    world = tmp_path / "world.json"
    small = Corpus(name="small", theorems=[t for t in WORLD_THEOREMS if t.family == "nat_lin"][:2])
    world.write_text(world_json(small), encoding="utf-8")
    theorem = small.theorems[0]
    lines = [f"goal.start {json.dumps({'copyFrom': theorem.name})}",
             f"goal.tactic {json.dumps({'stateId': 0, 'tactic': theorem.proofs[0][0]}, ensure_ascii=False)}", ""]
    done = subprocess.run([sys.executable, "-m", "minilean.replay", "--corpus", str(world)],
                          input="\n".join(lines), capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    replies = done.stdout.splitlines()
    assert replies[0] == "ready." and json.loads(replies[1]) == {"stateId": 0, "root": "_uniq.1"}
    assert json.loads(replies[2])["nextStateId"] == 1
