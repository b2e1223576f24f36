"""The lemma library as an eval uses it (docs/search.md, "The lemma library"): the entries held out, derived from the
data stage's decontamination, and the library opened once at the eval's start as its sketch search's lemma source.

    held = held_lemmas(library, Benchmark(ROUTE_EVAL, index.name, tuple(index.theorems)))   # digest → reason
    settings = attach_library(settings, index, pantograph_version, store=store)   # frozen now, every arm and pass
"""

from __future__ import annotations

import dataclasses

from pydantic import ValidationError

from burnqed.data.decontaminate import HELD_OUT_SPLITS, ROUTE_EVAL, Benchmark, Twins, held_out_theorems
from burnqed.eval.identity import EvalJobSettings
from burnqed.records.theorem import Theorem, TheoremIndex
from burnqed.search.lemmas import HELD_SPLIT, RESTATES, LemmaLibrary, closure, open_library
from burnqed.search.sketch_settings import SketchSettings
from burnqed.search.subgoal_cache import cache_environment
from burnqed.storage import Store

HELD_PROVENANCE = "made from {theorem}, a held-out theorem ({why}): it serves no problem"


def held_lemmas(library: LemmaLibrary, benchmark: Benchmark) -> dict[str, str]:
    """The entries of `library` that serve no hole when `benchmark` is evaluated (digest → reason): those made from a
    held-out theorem (`decontaminate.held_out_theorems`: split `test`, a theorem of `benchmark` by name, or one
    restating a statement of it; or split `valid`), and those whose own statement restates one of its statements
    (`Twins`: the theorem being proved, or another benchmark theorem, offered as a lemma)."""
    made_from: dict[str, Theorem] = {}
    unnamed: set[str] = set()  # provenances no theorem record can hold (a name Lean has no rule for, …)
    for entry in library.entries:
        where = entry.provenance
        try:
            made_from[where.theorem] = Theorem(name=where.theorem, statement=where.statement, split=where.split,
                                               source=where.source)
        except ValidationError:
            unnamed.add(where.theorem)
    why_held = {held.theorem: held.why for held in held_out_theorems(list(made_from.values()), benchmark)}
    why_held |= {theorem: "its provenance is no theorem the decontamination can read" for theorem in unnamed}
    twins = Twins([benchmark])
    held: dict[str, str] = {}
    for entry in library.entries:
        theorem, split = entry.provenance.theorem, entry.provenance.split
        if theorem in why_held:
            held[entry.digest] = HELD_PROVENANCE.format(theorem=theorem, why=why_held[theorem])
            continue
        if split in HELD_OUT_SPLITS:
            held[entry.digest] = HELD_SPLIT.format(theorem=theorem, split=split)
            continue
        try:
            stated = Theorem(name=entry.name, statement=closure(entry))
        except ValidationError:
            continue  # no statement a theorem can hold: `lemmas.statement_refusal` refuses it before Lean
        overlap = twins.overlap(stated, "lemma library")
        if overlap is not None:
            held[entry.digest] = RESTATES.format(theorem=overlap.benchmark, benchmark=overlap.benchmark_source)
    return held


def attach_library(settings: EvalJobSettings, index: TheoremIndex, pantograph_version: str | None, *,
                   store: Store) -> EvalJobSettings:
    """`settings` with sketch mode's lemma library (`search.lemma_library`) opened now, once for every arm and pass
    (`eval.run.pass_engine` gives each pass a fresh source over it): frozen at the eval's start, its entries made from
    held-out theorems or restating a theorem of `index` held out (`held_lemmas`). `settings` as they are in another
    mode or without a library."""
    job = settings.job
    if not isinstance(job.engine, SketchSettings) or job.lemma_library is None:
        return settings
    benchmark = Benchmark(ROUTE_EVAL, index.name, tuple(index.theorems))
    source = open_library(job.lemma_library, store, cache_environment(job.lean, pantograph_version), job.guard,
                          lambda library: held_lemmas(library, benchmark))
    engine = dataclasses.replace(job.engine, lemmas=source)
    return dataclasses.replace(settings, job=dataclasses.replace(job, engine=engine))
