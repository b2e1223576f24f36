"""The checked world's sketch family (leankit.world.sketches, `data.world_sketches`): off by default and appended
after every other theorem when on; its statements elaborate in minilean as a sketch, through the client's own calls
(start, draft the sketch of a recorded proof, prove each subgoal with the proof's own step, compile the assembled
proof), in-process; the same subgoal, context and all, is a subgoal of several theorems."""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections import Counter, defaultdict

import pytest

from burnqed.config import DEFAULT_DENY, DataConfig
from burnqed.data.index import embedded_index
from burnqed.lean.guard import TacticGuard
from burnqed.lean.inprocess import InProcessReplay
from burnqed.lean.start import start_theorem
from burnqed.records.replies import SketchResult, TacticKind
from burnqed.records.theorem import Theorem
from burnqed.search.subgoal_cache import subgoal_key
from burnqed.text.sketch import Sketch
from leankit.version import PantographVersion
from leankit.world.checked import World, WorldTheorem, embedded_world, world_stats
from leankit.world.sketches import SKETCH_TEMPLATES, STATEMENTS_PER_SITUATION
from minilean.server import Server
from tests.doubles.line_servers import MiniLean
from tests.processes import cli
from tests.world.test_checked import _compiles

# sha256 of the seed-0 embedded world with the sketch family (the default world's digest is pinned in
# test_checked.py and stays what it was: the family only appends).
SKETCH_WORLD_SHA256 = "01897c7e326929fa5511171faf1dc97dce21aec90a06a05f37397e788b63ca42"

DEFAULT = embedded_world(0)
WITH_SKETCHES = embedded_world(0, sketches=True)
FAMILY = WITH_SKETCHES.theorems[len(DEFAULT.theorems):]
HAVE = re.compile(r"have (\S+) : (.+) := by (.+)")
GUARD = TacticGuard(DEFAULT_DENY)


def _digest(world: World) -> str:
    return hashlib.sha256(world.model_dump_json().encode("utf-8")).hexdigest()


def situations(split: str) -> list[list[WorldTheorem]]:
    """The family's theorems of `split`, grouped by situation (consecutive, in threes)."""
    chosen = [t for t in FAMILY if t.split == split]
    return [chosen[k:k + STATEMENTS_PER_SITUATION] for k in range(0, len(chosen), STATEMENTS_PER_SITUATION)]


def sketch_of(proof: list[str]) -> tuple[Sketch, dict[str, str]]:
    """The sketch a recorded proof's `have` structure gives (each `have`'s proof a hole) and each hole's step."""
    steps = {}
    lines = []
    for step in proof:
        found = HAVE.fullmatch(step)
        if found is None:
            lines.append(step)
            continue
        steps[found.group(1)] = found.group(3)
        lines.append(f"have {found.group(1)} : {found.group(2)} := by sorry")
    read = GUARD.check_sketch("\n".join(lines))
    assert isinstance(read, Sketch), read
    return read, steps


def drafted(lean: InProcessReplay, theorem: WorldTheorem, route: str) -> SketchResult:
    record = Theorem.from_recorded(theorem)
    declaration = record.declaration()
    assert declaration is not None
    sketch, _ = sketch_of(theorem.proofs[0])

    async def go() -> SketchResult:
        if route == "draft":
            state, _ = await start_theorem(lean, record)
            return await lean.draft_sketch(state, sketch)
        return await lean.file_sketch(record.header, declaration, sketch)

    return asyncio.run(go())


def test_the_family_is_off_by_default_and_appends_when_on() -> None:
    assert DataConfig().world_sketches is False
    assert WITH_SKETCHES.theorems[:len(DEFAULT.theorems)] == DEFAULT.theorems  # every other theorem as it was
    assert _digest(WITH_SKETCHES) == SKETCH_WORLD_SHA256
    assert {t.role for t in FAMILY} == {"sketch"} and not any(t.role == "sketch" for t in DEFAULT.theorems)
    counts = Counter((t.template, t.split) for t in FAMILY)
    assert counts == {(template.name, split): count * STATEMENTS_PER_SITUATION
                      for template in SKETCH_TEMPLATES for split, count in template.counts.items()}
    assert len(FAMILY) == 54 and Counter(t.split for t in FAMILY) == {"train": 27, "pool": 9, "test": 18}
    assert "traps 5, sketch 3" in world_stats(WITH_SKETCHES) and "sketch" not in world_stats(DEFAULT)


@pytest.mark.slow
def test_the_embedded_benchmark_follows_data_world_sketches() -> None:
    plain, with_sketches = embedded_index("test", 0), embedded_index("test", 0, world_sketches=True)
    assert [t.name for t in with_sketches.theorems] == [
        *(t.name for t in plain.theorems), *(t.name for t in FAMILY if t.split == "test")]


def test_a_situation_s_statements_share_hypotheses_and_their_proofs_establish_facts_first() -> None:
    for split in ("train", "pool", "test"):
        for group in situations(split):
            premises = {t.statement.rsplit(" → ", 1)[0] for t in group}
            assert len(premises) == 1 and len({t.statement for t in group}) == STATEMENTS_PER_SITUATION
            facts = {tuple(step for step in proof if step.startswith("have ")) for t in group for proof in t.proofs}
            assert len(facts) == 1, facts  # the same facts, named alike, in every proof of the situation
            (haves,) = facts
            assert len(haves) == len(group[0].statement.split(" → ")) - 1 >= 2
            assert all(HAVE.fullmatch(step) for step in haves)
            assert all(proof[-1] == "norm_num" for t in group for proof in t.proofs)


def test_the_family_s_statements_are_new_up_to_renaming() -> None:
    from leankit.normal_form import statement_normal_form

    forms = [statement_normal_form(t.statement) for t in WITH_SKETCHES.theorems]
    assert len(forms) == len(set(forms))


@pytest.mark.parametrize(("version", "route"), [("0.3.4", "draft"), ("0.3.4", "file"), ("0.3.6", "file")])
@pytest.mark.parametrize("template", [template.name for template in SKETCH_TEMPLATES])
def test_a_sketch_elaborates_in_minilean_and_its_subgoals_take_the_proof_s_steps(template: str, version: str,
                                                                                  route: str) -> None:
    """A test theorem of each template: start, draft the sketch, each hole's context the binders, the hypotheses
    and the holes before it; each subgoal proved by its recorded step; the assembled proof compiles."""
    lean = InProcessReplay(MiniLean(version=PantographVersion.parse(version)))
    compiler = Server(version=PantographVersion.parse(version))
    theorem = next(t for t in FAMILY if t.template == template and t.split == "test")
    result = drafted(lean, theorem, route)
    assert result.kind is TacticKind.SUCCESS, (theorem.name, result.errors)
    assert result.route == {"draft": "draft", "file": "distil" if version == "0.3.6" else "process"}[route]
    sketch, steps = sketch_of(theorem.proofs[0])
    binders = theorem.statement.removeprefix("∀ (").split(")")[0].split(" : ")[0].split()
    hyps = [f"h{chr(0x2080 + k)}" for k in range(len(sketch.holes))]
    for index, subgoal in enumerate(result.subgoals):
        names = [v.name for v in subgoal.goal.variables]
        assert names == [*binders, *hyps, *(h.name for h in sketch.holes[:index])], (theorem.name, names)
        assert subgoal.goal.target == sketch.holes[index].statement
        assert all(v.value is None for v in subgoal.goal.variables)  # Lean ≤ v4.21: `have` is no `let`
    # distil lists the holes last first, draft and process in source order
    ids = [s.goal_id for s in result.subgoals]
    assert ids == (sorted(ids, reverse=True) if result.route == "distil" else sorted(ids))
    for subgoal in result.subgoals:
        proved = asyncio.run(lean.tactic(subgoal.state_id, steps[subgoal.name], subgoal.goal_id))
        assert proved.kind is TacticKind.SUCCESS, (theorem.name, subgoal.name, proved.errors)
        assert subgoal.goal.target not in [g.target for g in proved.goals]
    # the assembled proof: the sketch with each hole's `sorry` replaced by its subgoal's proof
    assembled = [line.strip() for line in sketch.draft_term().removeprefix("by\n").split("\n")]
    for hole in sketch.holes:
        at = assembled.index(f"have {hole.name} : {hole.statement} := by sorry")
        assembled[at] = f"have {hole.name} : {hole.statement} := by {steps[hole.name]}"
    assert assembled == theorem.proofs[0]
    assert _compiles(compiler, theorem, assembled)
    assert not _compiles(compiler, theorem, assembled[:-1])  # the closing step is needed


def test_a_subgoal_recurs_across_the_theorems_of_a_situation() -> None:
    """The cache's key (context and target) of each drafted subgoal is a subgoal of every theorem of its situation:
    the subgoal cache can hit on the test split alone."""
    lean = InProcessReplay(MiniLean(version=PantographVersion.parse("0.3.4")))
    theorems_of: dict[str, set[str]] = defaultdict(set)
    for group in situations("test")[:2]:
        for theorem in group:
            result = drafted(lean, theorem, "draft")
            assert result.kind is TacticKind.SUCCESS, result.errors
            for subgoal in result.subgoals:
                theorems_of[subgoal_key(subgoal.goal, theorem.header).digest].add(theorem.name)
    assert sorted(len(names) for names in theorems_of.values()) == [3] * len(theorems_of)
    assert len(theorems_of) == 2 + 2  # two situations of two facts each (sketch_real_pair)


@pytest.mark.slow
def test_no_decision_tactic_closes_a_sketch_statement_after_intro() -> None:
    server = Server()
    for template in SKETCH_TEMPLATES:
        theorem = next(t for t in FAMILY if t.template == template.name and t.split == "test")
        intro = theorem.proofs[0][0]
        for tactic in ("nlinarith", "linarith", "omega", "positivity", "norm_num", "simp", "nlinarith [h₀, h₁]"):
            assert not _compiles(server, theorem, [intro, tactic]), (theorem.statement, tactic)
        server.reset({})


@pytest.mark.slow
def test_every_recorded_proof_of_the_family_is_accepted_by_minilean() -> None:
    server = Server()
    for theorem in FAMILY:
        for proof in theorem.proofs:
            assert _compiles(server, theorem, proof), (theorem.name, proof)
        server.reset({})


@pytest.mark.slow
def test_world_stats_follows_data_world_sketches() -> None:


    plain = cli("world", "stats")
    on = cli("world", "stats", "--set", "data.world_sketches=true")
    assert (plain.returncode, on.returncode) == (0, 0)
    assert plain.stdout.startswith("burnqed-world (seed 0, version 3): 245 theorems")
    assert on.stdout.startswith("burnqed-world (seed 0, version 3): 299 theorems — train 167, pool 58, test 74")
