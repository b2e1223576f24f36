"""The lemma library as the search and eval stages use it (docs/search.md, "The lemma library"): which entries are
held out, derived from the data stage's decontamination, the library opened frozen as a job's lemma source, and the
lemmas a search's counted proofs on training theorems used, written into it.

    held = held_lemmas(library, Benchmark(ROUTE_EVAL, index.name, tuple(index.theorems)))   # digest → reason
    source = lemma_source(store, uri, environment, guard, benchmark)   # frozen now; `SketchSettings.lemmas`
    written = write_lemmas(LemmaWriter(store, uri), results, theorems, environment, iteration=2)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pydantic import ValidationError

from burnqed.data.decontaminate import HELD_OUT_SPLITS, Benchmark, Twins, held_out_theorems
from burnqed.lean.guard import TacticGuard
from burnqed.records.replies import Goal
from burnqed.records.results import TheoremResult
from burnqed.records.theorem import Theorem
from burnqed.search.lemmas import LemmaEntry, LemmaLibrary, LemmaWriter, LibrarySource, Provenance, entry_of
from burnqed.search.subgoal_cache import CacheEnvironment
from burnqed.storage import Store

HELD_PROVENANCE = "made from {theorem}, a held-out theorem ({why}): it serves no problem"
RESTATES = "its statement restates {theorem} of {benchmark}: a benchmark theorem is never a lemma"


def _closure(entry: LemmaEntry) -> str:
    """The entry's statement as one ∀ statement (what the decontamination's normal form compares)."""
    if not entry.binders:
        return entry.target
    binders = " ".join(f"({binder.name} : {binder.type})" for binder in entry.binders)
    return f"∀ {binders}, {entry.target}"


def held_lemmas(library: LemmaLibrary, benchmark: Benchmark) -> dict[str, str]:
    """The entries of `library` that serve no hole when `benchmark` is evaluated (digest → reason): those made from a
    held-out theorem (`decontaminate.held_out_theorems`: split `test`, or `valid`, a theorem of `benchmark` by name,
    or one restating a statement of it), and those whose own statement restates one of its statements (`Twins`: the
    theorem being proved, or another benchmark theorem, offered as its own lemma)."""
    made_from = {entry.provenance.theorem: Theorem(name=entry.provenance.theorem, statement=entry.provenance.statement,
                                                   split=entry.provenance.split, source=entry.provenance.source)
                 for entry in library.entries}
    why_held = {held.theorem: held.why for held in held_out_theorems(list(made_from.values()), benchmark)}
    twins = Twins([benchmark])
    held: dict[str, str] = {}
    for entry in library.entries:
        theorem = entry.provenance.theorem
        why = why_held.get(theorem) or (f"{entry.provenance.split} split"
                                        if entry.provenance.split in HELD_OUT_SPLITS else None)
        if why is not None:
            held[entry.digest] = HELD_PROVENANCE.format(theorem=theorem, why=why)
            continue
        try:
            stated = Theorem(name=entry.name, statement=_closure(entry))
        except ValidationError:
            continue  # no statement a theorem can hold: `lemmas.statement_refusal` refuses it before Lean
        overlap = twins.overlap(stated, "lemma library")
        if overlap is not None:
            held[entry.digest] = RESTATES.format(theorem=overlap.benchmark, benchmark=overlap.benchmark_source)
    return held


def lemma_source(store: Store, uri: str, environment: CacheEnvironment, guard: TacticGuard,
                 benchmark: Benchmark) -> LibrarySource:
    """The library at `uri`, frozen now, as the lemma source of a job whose Lean is `environment` and that evaluates
    (or holds out) `benchmark`."""
    library = LemmaLibrary.open(store, uri)
    return library.source(environment, guard, held_lemmas(library, benchmark))


def write_lemmas(writer: LemmaWriter, results: Iterable[TheoremResult], theorems: Mapping[str, Theorem],
                 environment: CacheEnvironment, iteration: int | None) -> int:
    """Write the lemmas of the counted proofs among `results` whose theorem (in `theorems`, by name) is a training
    theorem (its split neither test nor valid): each proved subgoal of the verified sketch, its goal as Lean printed
    it, its proof, the theorem's header and statement. The number of entries written (one already there: none)."""
    written = 0
    for result in results:
        theorem = theorems.get(result.name)
        counted = next((sketch for sketch in result.sketches if sketch.verified), None) if result.proved else None
        if theorem is None or counted is None or theorem.split in HELD_OUT_SPLITS:
            continue
        provenance = Provenance(theorem=theorem.name, statement=theorem.statement, split=theorem.split,
                                source=theorem.source, iteration=iteration)
        for subgoal in counted.subgoals:
            if not subgoal.proved or not subgoal.tactics:
                continue
            try:
                goal = Goal.from_pretty(subgoal.goal)
            except ValueError:
                continue  # not one goal as Lean printed it: nothing to key
            written += writer.add(entry_of(goal, theorem.header, subgoal.tactics, environment, provenance))
    return written
