"""The checked world: the generated world the embedded defaults run on, served by minilean, which checks every
tactic itself (docs/replay-corpus.md, "The checked world").

    world = build_world(seed=0)              # a `World`: theorems with split, template, statement, proofs
    embedded_world(0)                        # the embedded defaults' world: no bundled statement, built once
    print(world_stats(world))                # splits, depths, template overlap (`burnqed world stats`)

Templates (`leankit.world.templates`) are taught (train and pool), explored (pool only), held out (test only) or
traps (false, in every split); `build_world(seed, sketches=True)` adds the sketch family (`leankit.world.sketches`,
`data.world_sketches`: facts first with `have`, in every split) after them. No two statements are equal up to
renaming (`leankit.normal_form`). The world is a pure function of the seed, the choice and `CHECKED_VERSION`; its
proofs start from the binder-form start, and tests/world checks each one with minilean and each trap with its
counterexample.
"""

from __future__ import annotations

import functools
import hashlib
from collections import Counter

from pydantic import BaseModel, ConfigDict, Field

from leankit.corpus import Split, Topic
from leankit.normal_form import statement_normal_form
from leankit.world.deep_sketches import DEEP_TEMPLATES, SHARED_TEMPLATES
from leankit.world.draft import WORLD_SOURCE, Dice
from leankit.world.sketches import SKETCH_TEMPLATES, SketchTemplate
from leankit.world.templates import TEMPLATES, Role, Template

# Bump when a change to the templates or counts changes the generated world (a test pins seed 0's digest).
CHECKED_VERSION = 3
CHECKED_NAME = "burnqed-world"
HEADER = "import Mathlib"
MAX_REDRAWS = 200

TRAPS_PER_SPLIT = 2  # trap templates take turns: every split gets this many false statements


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class WorldTheorem(_Strict):
    """One theorem of the checked world."""

    name: str
    split: Split
    template: str
    role: Role = Field(description="'taught' (train and pool), 'explored' (a template only pool has), 'held_out' (a "
                       "template only test has), 'trap' (false: no proof) or 'sketch' (the sketch family: facts "
                       "first, in every split; only with data.world_sketches).")
    topic: Topic
    statement: str = Field(description="The ∀-form statement; it starts in binder form (its leading ∀ binders).")
    proofs: list[list[str]] = Field(description="Tactic scripts from the binder-form start; [] for a trap.")
    counterexample: dict[str, str] = Field(
        default_factory=dict, description="A trap's values of its ∀ binders refuting it ({} for a true theorem).")

    @property
    def depth(self) -> int:
        """The length of the shortest recorded proof (0 for a trap)."""
        return min((len(proof) for proof in self.proofs), default=0)

    @property
    def header(self) -> str:
        """The header its statement is read under (every world theorem's)."""
        return HEADER

    @property
    def source(self) -> str:
        """Where it comes from, as its index entry names it."""
        return WORLD_SOURCE


class World(_Strict):
    name: str
    seed: int
    version: int
    theorems: list[WorldTheorem]


def build_world(seed: int = 0, *, reserved: tuple[str, ...] = (), sketches: bool = False,
                deep_sketches: bool = False, deep_shared: bool = False) -> World:
    """Every template's instances for `seed`. `reserved`: statements (e.g. the bundled corpus') that no world
    statement may equal up to renaming. `sketches`: the sketch family (`leankit.world.sketches`) after them;
    `deep_sketches`: the deep sketch family (`leankit.world.deep_sketches`) next; `deep_shared`: its situations
    shared across the train and test splits last; every other theorem unchanged."""
    seen = {statement_normal_form(statement) for statement in reserved}
    theorems: list[WorldTheorem] = []
    traps = [template for template in TEMPLATES if template.role == "trap"]
    trap_splits: dict[str, list[Split]] = {template.name: [] for template in traps}
    for number in range(TRAPS_PER_SPLIT * 3):
        split: Split = ("train", "pool", "test")[number % 3]
        trap_splits[traps[number % len(traps)].name].append(split)
    for template in TEMPLATES:
        dice = Dice(seed * 1_000_003 + CHECKED_VERSION, f"checked:{template.name}")
        for number, split in enumerate(_splits(template, trap_splits)):
            theorems.append(_draw(template, dice, theorem_name(template, number), split, seen))
    if sketches:
        theorems += [theorem for template in SKETCH_TEMPLATES for theorem in _situations(template, seed, seen)]
    if deep_sketches:
        theorems += [theorem for template in DEEP_TEMPLATES for theorem in _situations(template, seed, seen)]
    if deep_shared:
        theorems += [theorem for template in SHARED_TEMPLATES for theorem in _situations(template, seed, seen)]
    if len({t.name for t in theorems}) != len(theorems):  # pragma: no cover - 24-bit names, a few hundred theorems
        raise ValueError("two world theorems drew the same name")
    return World(name=CHECKED_NAME, seed=seed, version=CHECKED_VERSION, theorems=theorems)


def theorem_name(template: Template | SketchTemplate, number: int) -> str:
    """`world_<topic>_<6 hex digits>`: the topic, and nothing of the template. A prompt shows the theorem's name, so
    a name spelling its template's pieces (`world_mod_lin_00`) would tell the policy a held-out theorem's steps.
    The same for every seed, like the world's layout."""
    digest = hashlib.blake2b(f"{CHECKED_VERSION}\0{template.name}\0{number}".encode(), digest_size=3)
    return f"world_{template.topic}_{digest.hexdigest()}"


def _splits(template: Template, trap_splits: dict[str, list[Split]]) -> list[Split]:
    if template.role == "trap":
        return trap_splits[template.name]
    return [split for split, count in template.counts.items() for _ in range(count)]


def _draw(template: Template, dice: Dice, name: str, split: Split, seen: set[str]) -> WorldTheorem:
    for _ in range(MAX_REDRAWS):
        instance = template.build(dice)
        key = statement_normal_form(instance.statement)
        if key not in seen:
            seen.add(key)
            return WorldTheorem(name=name, split=split, template=template.name, role=template.role,
                                topic=template.topic, statement=instance.statement,
                                proofs=[list(proof) for proof in instance.proofs],
                                counterexample=instance.counterexample)
    raise ValueError(f"template {template.name}: no new statement after {MAX_REDRAWS} draws")  # pragma: no cover


def _situations(template: SketchTemplate, seed: int, seen: set[str]) -> list[WorldTheorem]:
    """A sketch template's situations for `seed`, split by split, each situation's statements (three in the sketch
    family, four in the deep one) theorems of one split (or of the template's `splits`, statement by statement); a
    situation with a statement already seen is drawn again whole (its statements share its facts)."""
    dice = Dice(seed * 1_000_003 + CHECKED_VERSION, f"checked:{template.name}")
    theorems: list[WorldTheorem] = []
    splits = [split for split, count in template.counts.items() for _ in range(count)]
    for number, split in enumerate(splits):
        for _ in range(MAX_REDRAWS):
            situation = template.build(dice)
            keys = [statement_normal_form(instance.statement) for instance in situation.instances]
            if not set(keys) & seen and len(set(keys)) == len(keys):
                break
        else:  # pragma: no cover - a template with too few distinct statements is a programming error
            raise ValueError(f"template {template.name}: no new situation after {MAX_REDRAWS} draws")
        seen.update(keys)
        for index, instance in enumerate(situation.instances):  # a template's situations have one count of them
            name = theorem_name(template, number * len(situation.instances) + index)
            own = template.splits[index] if template.splits is not None else split
            theorems.append(WorldTheorem(name=name, split=own, template=template.name, role="sketch",
                                         topic=template.topic, statement=instance.statement,
                                         proofs=[list(proof) for proof in instance.proofs]))
    return theorems


@functools.cache
def embedded_world(seed: int = 0, sketches: bool = False, deep_sketches: bool = False) -> World:
    """The checked world the embedded defaults use for `seed` (`data.world_seed`; with `sketches`,
    `data.world_sketches`, the sketch family too; with `deep_sketches`, the deep sketch family): no statement equal,
    up to renaming, to one of the bundled hand-written corpus. Built once per process, seed and choice."""
    from leankit.corpus import load_corpus

    return build_world(seed, reserved=tuple(t.statement for t in load_corpus().theorems), sketches=sketches,
                       deep_sketches=deep_sketches)


@functools.cache
def trap_names() -> frozenset[str]:
    """The names of the world's traps (its false statements): the same for every seed, like every theorem's name
    and split (`theorem_name`), so a theorem's name says whether it is a trap whichever seed drew the world."""
    return frozenset(t.name for t in build_world(0).theorems if t.role == "trap")


def world_stats(world: World) -> str:
    """Splits, proof depths and template overlap: what `burnqed world stats` prints."""
    splits = Counter(t.split for t in world.theorems)
    lines = [f"{world.name} (seed {world.seed}, version {world.version}): {len(world.theorems)} theorems — "
             f"train {splits['train']}, pool {splits['pool']}, test {splits['test']}"]
    roles = Counter(t.role for t in world.theorems)
    templates = {role: len({t.template for t in world.theorems if t.role == role}) for role in roles}
    sketch = f", sketch {templates['sketch']}" if "sketch" in templates else ""
    lines.append(f"templates: {sum(templates.values())} — taught {templates.get('taught', 0)}, explored (pool "
                 f"only) {templates.get('explored', 0)}, held out {templates.get('held_out', 0)}, traps "
                 f"{templates.get('trap', 0)}{sketch}")
    for split in ("train", "pool", "test"):
        members = [t for t in world.theorems if t.split == split]
        depths = Counter(t.depth for t in members if t.role != "trap")
        depth_text = " ".join(f"{depth}:{count}" for depth, count in sorted(depths.items()))
        traps = sum(t.role == "trap" for t in members)
        lines.append(f"{split:<5} {len(members):>3} theorems, {traps} traps, shortest proof depth {depth_text}")
    seen = {t.template for t in world.theorems if t.split in ("train", "pool")}
    test = [t for t in world.theorems if t.split == "test" and t.role != "trap"]
    fresh = [t for t in test if t.template not in seen]
    lines.append(f"test (traps aside): {len(fresh)}/{len(test)} from templates absent from train and pool "
                 f"({len({t.template for t in fresh})} templates), {len(test) - len(fresh)} from taught templates")
    seen_forms = {statement_normal_form(t.statement) for t in world.theorems if t.split != "test"}
    clashes = sum(statement_normal_form(t.statement) in seen_forms for t in test)
    lines.append(f"test statements equal to a train/pool statement up to renaming: {clashes}")
    return "\n".join(lines)



__all__ = ["CHECKED_NAME", "CHECKED_VERSION", "World", "WorldTheorem", "build_world", "embedded_world", "world_stats"]
