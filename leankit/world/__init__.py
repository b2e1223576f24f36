"""The recorded world: theorem families in the replay corpus format, the replay server's default corpus after the
bundled theorems (docs/replay-corpus.md, "The recorded world").

    corpus = generate_world(seed=0)                 # a validated `Corpus` ("burnqed-world")
    text = world_json(corpus)                       # its canonical JSON text (byte-identical per seed)
    corpus = embedded_corpus()                      # the bundled corpus followed by the world: the server's default

    python -m leankit.world [--seed N] [--output FILE] [--summary]

Families (`leankit.world.catalog`) vary names, constants and hypotheses; instances go to train, pool and test. The
generator is pure: the same seed and `WORLD_VERSION` give the same corpus, byte for byte, with nothing cached.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import Iterable

from leankit.corpus import Corpus, Split, TheoremSpec, load_corpus, normalize_expr, theorem_problem
from leankit.failures import BadInput
from leankit.world.catalog import FAMILIES, Family
from leankit.world.draft import WORLD_SOURCE, Dice

# Bump when a change to the families changes the generated corpus (a test pins the default world's digest).
WORLD_VERSION = 1
DEFAULT_SEED = 0
WORLD_NAME = "burnqed-world"
EMBEDDED_NAME = "embedded"  # the corpus and theorem index of the embedded defaults
MAX_REDRAWS = 200

__all__ = ["DEFAULT_SEED", "EMBEDDED_NAME", "FAMILIES", "WORLD_NAME", "WORLD_SOURCE", "WORLD_VERSION", "Family",
           "embedded_corpus", "generate_world", "world_json", "world_summary"]


def generate_world(seed: int = DEFAULT_SEED, *, reserved: Iterable[str] = (),
                   families: Iterable[Family] = FAMILIES) -> Corpus:
    """Every family's instances for `seed`, in catalog order. `reserved`: statements that must not be
    generated (the hand-written corpus' own), so no statement appears twice in the embedded corpus."""
    seen = {normalize_expr(statement) for statement in reserved}
    theorems: list[TheoremSpec] = []
    for family in families:
        dice = Dice(seed * 1_000_003 + WORLD_VERSION, family.name)
        counts: tuple[tuple[Split, int], ...] = (("train", family.train), ("pool", family.pool), ("test", family.test))
        splits = [split for split, count in counts for _ in range(count)]
        for number, split in enumerate(dice.shuffle(splits)):
            name = f"world_{family.name}_{number:03d}"
            for _ in range(MAX_REDRAWS):
                draft = family.build(dice, name, split)
                key = normalize_expr(draft.statement)
                if key not in seen:
                    break
            else:  # pragma: no cover - a family with too few distinct statements is a programming error
                raise ValueError(f"family {family.name}: no new statement after {MAX_REDRAWS} draws")
            seen.add(key)
            theorem = draft.build()
            problem = theorem_problem(theorem)
            if problem is not None:
                raise ValueError(f"family {family.name}: theorem {name}: {problem}")
            theorems.append(theorem)
    return Corpus(name=WORLD_NAME, theorems=theorems)


def world_json(corpus: Corpus) -> str:
    """The canonical text of a corpus file: indented JSON, raw UTF-8, a final newline."""
    return json.dumps(corpus.model_dump(mode="json", exclude_defaults=False), ensure_ascii=False, indent=1) + "\n"


def world_summary(corpus: Corpus) -> str:
    """One line per family: instances per split, goals, transitions, proofs and the longest proof."""
    lines = []
    by_family: dict[str, list[TheoremSpec]] = {}
    for theorem in corpus.theorems:
        by_family.setdefault(theorem.family or "-", []).append(theorem)
    for family, theorems in by_family.items():
        splits = Counter(t.split for t in theorems)
        goals = sum(len(t.goals) for t in theorems)
        transitions = sum(len(t.transitions) for t in theorems)
        proofs = sum(len(t.proofs) for t in theorems)
        longest = max(len(p) for t in theorems for p in t.proofs)
        lines.append(
            f"{family:<11} train {splits['train']:>3}  pool {splits['pool']:>3}  test {splits['test']:>3}  "
            f"goals {goals:>4}  transitions {transitions:>5}  proofs {proofs:>4}  longest {longest}"
        )
    splits = Counter(t.split for t in corpus.theorems)
    lines.append(f"{corpus.name}: {len(corpus.theorems)} theorems (train {splits['train']}, pool {splits['pool']}, "
                 f"test {splits['test']}), {sum(len(t.transitions) for t in corpus.theorems)} transitions")
    return "\n".join(lines)


@functools.cache
def embedded_corpus() -> Corpus:
    """The corpus the embedded defaults run on: the hand-written bundled corpus followed by the generated world
    (`leankit.world`, default seed), which never repeats a bundled statement. Built once per process."""
    bundled = load_corpus()
    world = generate_world(reserved=[theorem.statement for theorem in bundled.theorems])
    clash = {t.name for t in bundled.theorems} & {t.name for t in world.theorems}
    if clash:  # pragma: no cover - world names all start with `world_`
        raise BadInput(f"the generated world reuses bundled theorem names: {sorted(clash)}")
    return Corpus(name=EMBEDDED_NAME, theorems=[*bundled.theorems, *world.theorems])
