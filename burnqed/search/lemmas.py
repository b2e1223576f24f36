"""The lemma library across problems (docs/search.md, "The lemma library"): subgoals sketch search proved in counted
proofs on the training split, kept as lemmas, and offered to later searches as candidates that Lean checks again.

    written = write_lemmas(LemmaWriter(store, uri), results, theorems, environment, iteration=2)   # counted proofs
    library = LemmaLibrary.open(store, uri)                     # frozen: what the folder held when it was opened
    library.digest                                              # names exactly what it can serve
    source = open_library(uri, store, environment, guard, hold)  # frozen now, a `goal_keys.LemmaSource` for one job
    settings = dataclasses.replace(settings, lemmas=source)     # sketch search asks it before a hole's own search
    source.refused, source.stats                                # refusals before Lean (entry → reason), counters

An entry holds the lemma's statement (the subgoal's hypotheses and target as Lean printed them), its proof's tactics,
its environment key (`CacheEnvironment`: the Lean settings, the Lean, Mathlib and Pantograph versions, the toolchain
files; and the header verbatim, its `open`s, options and notations), the axioms bound the counted proof it was part of
was held to, and where it came from (`Provenance`: theorem, split, iteration). Two keys find it (`goal_keys`): the
subgoal cache's exact key (the header, each hypothesis by name and the target, in normal form), whose hit is its
tactics replayed on the hole as they are; and the closed key (the ∀-closure, binder names normalised), whose hit is
its tactics with each hypothesis renamed as the hole names the one in its place (`goal_keys.translate`; in the
assembled file it is a lemma of its own, `search.file_lemmas`). Either is a candidate only: sketch search replays it
on the hole in Lean (its Lean calls counted), it counts only when Lean closes the hole, and the theorem only when its
assembled proof passes the compile every counted proof passes. No `axiom` is ever added and no `.olean` read: a
lemma's proof is re-elaborated wherever it serves.

A library is read once, when it is opened: entries written after that never serve it, and its `digest` names what
it held. Before Lean sees an entry, `refusal` refuses it with its reason: another environment or header, one the
stage holds out (made from a held-out theorem, or restating a benchmark theorem: `held`, derived from the data
stage's decontamination by `burnqed.eval.lemma_library`), axioms beyond the standard three, keys that are not its
own statement's, a statement or proof the tactic guard refuses (`sorry`, `native_decide`, a command such as a local
`notation`). A candidate Lean rejected is never offered again in the job.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

from burnqed import __version__
from burnqed.errors import InputError
from burnqed.lean.guard import TacticGuard
from burnqed.lean.soundness import ALLOWED_AXIOMS, check_path
from burnqed.records.replies import Goal, Variable
from burnqed.records.results import TheoremResult
from burnqed.records.theorem import Theorem
from burnqed.records.versions import Migrations
from burnqed.search.goal_keys import LemmaCandidate, closed_key, translate
from burnqed.search.subgoal_cache import CacheEnvironment, SubgoalKey, subgoal_key
from burnqed.storage import Store, join
from leankit.commands import term_problem
from leankit.normal_form import statement_normal_form

LEMMA_MIGRATIONS = Migrations("lemma library entry", {})  # version 1 is the first; a format change adds a step
LEMMA_PREFIX = "lemma_"  # an entry's name: this and its digest's first 16 digits
MAX_ENTRIES = 100_000  # a library folder holding more entries than this is refused (a snapshot is read whole)
MAX_ENTRY_BYTES = 1_000_000  # a larger file is no entry: never read, refused as unreadable
STATS_KEY = "lemma_library"  # where an output's record keeps what its library served
HELD_OUT_SPLITS = ("test", "valid")  # `data.decontaminate.HELD_OUT_SPLITS` (that layer is above this one)

# The refusals before Lean, word for word (tests/search/test_lemma_poison.py asserts them).
FOREIGN_ENVIRONMENT = "written under another environment (Lean, Mathlib, Pantograph or the Lean settings differ)"
FOREIGN_HEADER = "written under another header (its opens, options or notations differ)"
EXTRA_AXIOMS = "its axioms at insert go beyond propext, Classical.choice, Quot.sound: {axioms}"
KEY_MISMATCH = "its {which} key is not the key of its own statement"
HELD_SPLIT = "made from {theorem}, a {split} theorem: it serves no problem"
RESTATES = "its statement restates {theorem} of {benchmark}: a benchmark theorem is never a lemma"
NO_TRANSLATION = "its context does not line up with the hole's (another number of hypotheses)"


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class LemmaBinder(BaseModel):
    """One hypothesis of a lemma's statement, as Lean printed it in the subgoal's context."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, description="The hypothesis' name.")
    type: str = Field(min_length=1, description="Its type.")
    value: str | None = Field(default=None, description="Its value (a `let`), as Lean printed it.")


class Provenance(BaseModel):
    """Where a lemma was proved: the theorem whose counted proof used it, that theorem's statement (what the
    decontamination compares), its split and source, and the run's iteration."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    theorem: str = Field(min_length=1, description="The theorem whose counted proof used the subgoal.")
    statement: str | None = Field(default=None, description="That theorem's statement (None: it had none).")
    split: str | None = Field(default=None, description="That theorem's split (train, valid, test).")
    source: str | None = Field(default=None, description="That theorem's data source.")
    iteration: int | None = Field(default=None, ge=0, description="The run's iteration (None: outside a run).")


class LemmaEntry(BaseModel):
    """One lemma of the library (`{digest}.json` in its folder), written once and never rewritten."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = Field(default=LEMMA_MIGRATIONS.current, description="Version of this entry format.")
    key: str = Field(min_length=1, description="The exact key of the subgoal (`subgoal_cache.subgoal_key`).")
    closed_key: str = Field(min_length=1, description="Its closed key (`goal_keys.closed_key`).")
    binders: list[LemmaBinder] = Field(description="The subgoal's hypotheses, in order.")
    target: str = Field(min_length=1, description="The subgoal's target.")
    tactics: list[str] = Field(min_length=1, description="The proof Lean accepted on the subgoal, in order.")
    header: str = Field(description="The theorem's header (opens, options, notations), verbatim: part of the "
                        "environment key.")
    environment: CacheEnvironment = Field(description="The Lean facts it was checked under (Lean, Mathlib and "
                                          "Pantograph versions, the Lean settings, the toolchain files).")
    axioms: list[str] = Field(description="The axioms the counted proof it was part of was held to at insert "
                              "(`#print axioms` within them).")
    provenance: Provenance = Field(description="Where it was proved.")
    burnqed_version: str = Field(description="The burnqed that wrote the entry.")
    written_at: AwareDatetime = Field(description="When it was written, UTC (shown, never used to choose).")

    @property
    def digest(self) -> str:
        """SHA-256 of what the lemma is (keys, statement, proof, header, environment, axioms), not of who wrote it
        when: its file's name."""
        fields = self.model_dump(mode="json", include={"key", "closed_key", "binders", "target", "tactics", "header",
                                                       "environment", "axioms"})
        return _sha256(json.dumps(fields, sort_keys=True, ensure_ascii=False))

    @property
    def name(self) -> str:
        """How refusals and origins name it."""
        return f"{LEMMA_PREFIX}{self.digest[:16]}"

    @property
    def goal(self) -> Goal:
        """The subgoal it states."""
        return Goal(self.target, tuple(Variable(b.name, b.type, b.value, "✝" in b.name) for b in self.binders))

    @property
    def origin(self) -> str:
        """Where it came from, in words (a `LemmaCandidate`'s origin: what a counted proof lists)."""
        where = self.provenance
        iteration = "" if where.iteration is None else f", iteration {where.iteration}"
        return f"library {self.name}: theorem {where.theorem}, split {where.split or 'unknown'}{iteration}"


def entry_of(goal: Goal, header: str | None, tactics: Sequence[str], environment: CacheEnvironment,
             provenance: Provenance) -> LemmaEntry:
    """The entry of the subgoal `goal` (as Lean printed it) of a theorem under `header`, proved by `tactics` in a
    counted proof (whose `#print axioms` stayed within the standard three)."""
    return LemmaEntry(key=subgoal_key(goal, header).text, closed_key=closed_key(goal, header).text,
                      binders=[LemmaBinder(name=v.name, type=v.type, value=v.value) for v in goal.variables],
                      target=goal.target, tactics=list(tactics), header=header or "", environment=environment,
                      axioms=sorted(ALLOWED_AXIOMS), provenance=provenance, burnqed_version=__version__,
                      written_at=datetime.now(UTC))


def read_entry(data: bytes) -> LemmaEntry | None:
    """An entry from its file (an earlier version upgraded, `LEMMA_MIGRATIONS`); None when it does not parse."""
    try:
        raw = json.loads(data)
        return LemmaEntry.model_validate(LEMMA_MIGRATIONS.upgrade(raw) if isinstance(raw, dict) else raw)
    except (ValueError, ValidationError):
        return None


class LemmaWriter:
    """Writes lemmas into a library folder, each once (`{digest}.json`; an entry already there stands)."""

    def __init__(self, store: Store, uri: str) -> None:
        self.store, self.uri = store, uri
        self.written: set[str] = set()

    def add(self, entry: LemmaEntry) -> bool:
        """Write `entry`; False when this writer or an earlier one wrote the same lemma already."""
        path = join(self.uri, f"{entry.digest}.json")
        if entry.digest in self.written or self.store.exists(path):
            return False
        self.written.add(entry.digest)
        self.store.write_bytes(path, entry.model_dump_json(indent=1).encode())
        return True


# ------------------------------------------------------------------------------------------- before Lean


def statement_refusal(entry: LemmaEntry, guard: TacticGuard) -> str | None:
    """Why the entry's statement or proof may not reach Lean: a hypothesis' type or value or the target that is not
    one term or that the tactic guard refuses (a command such as a local `notation`, `sorry`, `native_decide`), a
    proof the guard refuses on its path (`lean.soundness.check_path`)."""
    parts = [(f"hypothesis {b.name}", text) for b in entry.binders for text in (b.type, b.value) if text is not None]
    for what, text in [*parts, ("target", entry.target)]:
        problem = guard.check_in_proof(text) or term_problem(text)  # the guard first: it bounds what is read
        if problem is not None:
            return f"its statement's {what} is refused: {problem}"
    path = check_path(entry.tactics, guard)
    return None if path.ok else f"its proof is refused: {path.reason}"


def refusal(entry: LemmaEntry, environment: CacheEnvironment, guard: TacticGuard,
            held: Mapping[str, str]) -> str | None:
    """Why `entry` may serve no hole of a job whose Lean is `environment`, decided before Lean, or None. `held`:
    the entries the stage holds out (entry digest → the reason)."""
    if entry.environment != environment:
        return FOREIGN_ENVIRONMENT
    why = held.get(entry.digest)
    if why is not None:
        return why
    extra = sorted(set(entry.axioms) - ALLOWED_AXIOMS)
    if extra:
        return EXTRA_AXIOMS.format(axioms=", ".join(extra))
    refused = statement_refusal(entry, guard)  # before the keys are formed: it bounds the text they read
    if refused is not None:
        return refused
    goal = entry.goal
    header = entry.header or None
    if entry.key != subgoal_key(goal, header).text:
        return KEY_MISMATCH.format(which="exact")
    if entry.closed_key != closed_key(goal, header).text:
        return KEY_MISMATCH.format(which="closed")
    return None


def _header_of(key: str) -> str:
    """The header line a key starts with (both keys' first line: `header …`)."""
    return key.split("\n", 1)[0]


def _body(key: str) -> str:
    """A key without its header line: what an entry under another header shares with the hole."""
    return key.split("\n", 1)[1] if "\n" in key else ""


# --------------------------------------------------------------------------------------------- the library


@dataclass(frozen=True, slots=True)
class LemmaLibrary:
    """A library as it was when opened: its entries, the files it could not read (named), and its digest (over both:
    what an eval records of it)."""

    uri: str | None
    entries: tuple[LemmaEntry, ...]
    unreadable: tuple[str, ...]
    digest: str

    @classmethod
    def of(cls, entries: Sequence[LemmaEntry], unreadable: Sequence[str] = (), uri: str | None = None
           ) -> LemmaLibrary:
        """A library of these entries (`open` reads a folder's)."""
        parts = sorted([f"entry {entry.digest}" for entry in entries] + [f"unreadable {name}" for name in unreadable])
        return cls(uri, tuple(entries), tuple(unreadable), _sha256("\n".join(parts)))

    @classmethod
    def open(cls, store: Store, uri: str) -> LemmaLibrary:
        """The library folder `uri` frozen now: every `*.json` file at its top read once (none there: empty); an
        entry written later never serves it. A file that does not parse, or whose name is not its digest, is kept by
        name as unreadable and serves nothing."""
        files = {name: size for name, size in store.output_files(uri).items()
                 if name.endswith(".json") and "/" not in name}
        if len(files) > MAX_ENTRIES:
            raise InputError(f"the lemma library {uri} holds {len(files)} entries, more than {MAX_ENTRIES}: name "
                             "another folder (search.lemma_library)")
        entries: list[LemmaEntry] = []
        unreadable: list[str] = []
        for name, size in sorted(files.items()):
            entry = read_entry(store.read_bytes(join(uri, name))) if size <= MAX_ENTRY_BYTES else None
            if entry is None or name != f"{entry.digest}.json":
                unreadable.append(name)
            else:
                entries.append(entry)
        return cls.of(entries, unreadable, uri)

    def source(self, environment: CacheEnvironment, guard: TacticGuard,
               held: Mapping[str, str] | None = None) -> LibrarySource:
        """The lemma source of one job (`SketchSettings.lemmas`) whose Lean is `environment`: `held` names the
        entries the stage holds out (digest → reason)."""
        return LibrarySource(self, environment, guard, dict(held or {}))


@dataclass(slots=True)
class LibraryStats:
    """What one job asked of its library: lookups, candidates offered, hits (Lean closed the hole), rejected (Lean
    did not), refused (entries refused before Lean, each counted once)."""

    lookups: int = 0
    offered: int = 0
    hits: int = 0
    rejected: int = 0
    refused: int = 0

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in ("lookups", "offered", "hits", "rejected", "refused")}


@dataclass(slots=True)
class LibrarySource:
    """A frozen library as sketch search's lemma source (`goal_keys.LemmaSource`), for one job: by a hole's exact
    key its entries' tactics as they are, then by its closed key their tactics renamed to the hole's hypotheses;
    every entry checked by `refusal` first (`refused`: entry name → reason), none Lean rejected offered again.
    Thread-safe (sketch search calls it off the event loop)."""

    library: LemmaLibrary
    environment: CacheEnvironment
    guard: TacticGuard
    held: dict[str, str]
    refused: dict[str, str] = field(default_factory=dict)
    stats: LibraryStats = field(default_factory=LibraryStats)
    by_exact: dict[str, list[LemmaEntry]] = field(default_factory=dict)
    by_closed: dict[str, list[LemmaEntry]] = field(default_factory=dict)
    by_body: dict[str, list[LemmaEntry]] = field(default_factory=dict)
    rejected: set[LemmaCandidate] = field(default_factory=set)
    used: list[str] = field(default_factory=list)  # origins of the candidates Lean accepted, in order
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        for entry in self.library.entries:
            self.by_exact.setdefault(entry.key, []).append(entry)
            self.by_closed.setdefault(entry.closed_key, []).append(entry)
            self.by_body.setdefault(_body(entry.key), []).append(entry)
        for name in self.library.unreadable:
            self.refused[name] = "the entry does not parse as a lemma library entry (or its name is not its digest)"

    def fresh(self) -> LibrarySource:
        """A source over the same frozen library with nothing offered, rejected or counted yet (an eval's next pass:
        pass@n's passes stay independent searches)."""
        return self.library.source(self.environment, self.guard, self.held)

    def record(self) -> dict[str, object]:
        """What an output records of the library it asked: its folder, digest and entries, and the counters."""
        return {"uri": self.library.uri, "digest": self.library.digest, "entries": len(self.library.entries),
                **self.stats.as_dict()}

    def lemma_candidates(self, exact: SubgoalKey, closed: SubgoalKey, goal: Goal,
                         limit: int) -> Sequence[LemmaCandidate]:
        """At most `limit` candidates for the hole `goal`: entries under its exact key (tactics as they are), then
        under its closed key (renamed, `goal_keys.translate`); shortest proof first, then by digest. An entry under
        the same hypotheses and target but another header is refused (`FOREIGN_HEADER`), never offered."""
        with self.lock:
            self.stats.lookups += 1
            for entry in self.by_body.get(_body(exact.text), []):
                if _header_of(entry.key) != _header_of(exact.text):
                    self._refuse(entry, FOREIGN_HEADER)
            found: list[LemmaCandidate] = []
            exact_entries = _ordered(self.by_exact.get(exact.text, []))
            around = [e for e in _ordered(self.by_closed.get(closed.text, [])) if e not in exact_entries]
            for entry, renamed in [*((e, False) for e in exact_entries), *((e, True) for e in around)]:
                candidate = self._candidate(entry, goal, renamed)
                if candidate is not None and candidate not in self.rejected and candidate not in found:
                    found.append(candidate)
                if len(found) >= limit:
                    break
            self.stats.offered += len(found)
            return found

    def _candidate(self, entry: LemmaEntry, goal: Goal, renamed: bool) -> LemmaCandidate | None:
        why = self.refused.get(entry.name) or refusal(entry, self.environment, self.guard, self.held)
        if why is None and renamed:
            tactics = translate(entry.tactics, entry.goal, goal)
            why = NO_TRANSLATION if tactics is None else None
        else:
            tactics = entry.tactics
        if why is not None or tactics is None:
            self._refuse(entry, why or NO_TRANSLATION)
            return None
        return LemmaCandidate(tuple(tactics), entry.origin, renamed)

    def _refuse(self, entry: LemmaEntry, why: str) -> None:
        if entry.name not in self.refused:
            self.refused[entry.name] = why
            self.stats.refused += 1

    def lemma_outcome(self, candidate: LemmaCandidate, exact: SubgoalKey, accepted: bool) -> None:
        """Lean closed the hole with `candidate` (a hit: its origin is listed in `used`) or did not (never offered
        again in this job)."""
        with self.lock:
            if accepted:
                self.stats.hits += 1
                self.used.append(candidate.origin)
            else:
                self.stats.rejected += 1
                self.rejected.add(candidate)


def _ordered(entries: Sequence[LemmaEntry]) -> list[LemmaEntry]:
    """Shortest proof first, then by digest: nothing an entry's writer states decides the order."""
    return sorted(entries, key=lambda entry: (len("\n".join(entry.tactics)), entry.digest))


# ------------------------------------------------------------------------------------------- the stages' side


def closure(entry: LemmaEntry) -> str:
    """The entry's statement as one ∀ statement (what the decontamination's normal form compares)."""
    if not entry.binders:
        return entry.target
    binders = " ".join(f"({binder.name} : {binder.type})" for binder in entry.binders)
    return f"∀ {binders}, {entry.target}"


def training_held(library: LemmaLibrary, theorems: Sequence[Theorem]) -> dict[str, str]:
    """The entries held out of a search of the training theorems `theorems` (digest → reason): those made from a test
    or valid theorem, and those restating a theorem searched (its statement's normal form, as the decontamination
    compares: the theorem offered as its own lemma). An eval holds out more (`eval.lemma_library.held_lemmas`)."""
    forms = {statement_normal_form(theorem.statement): theorem.name for theorem in theorems if theorem.statement}
    held: dict[str, str] = {}
    for entry in library.entries:
        split = entry.provenance.split
        restated = forms.get(statement_normal_form(closure(entry)))
        if split in HELD_OUT_SPLITS:
            held[entry.digest] = HELD_SPLIT.format(theorem=entry.provenance.theorem, split=split)
        elif restated is not None:
            held[entry.digest] = RESTATES.format(theorem=restated, benchmark="the theorems searched")
    return held


def open_library(uri: str | None, store: Store, environment: CacheEnvironment, guard: TacticGuard,
                 hold: Callable[[LemmaLibrary], Mapping[str, str]]) -> LibrarySource | None:
    """The library at `uri`, frozen now, as the lemma source of a job whose Lean is `environment`, the entries `hold`
    names held out (digest → reason); None when `uri` is None."""
    if uri is None:
        return None
    library = LemmaLibrary.open(store, uri)
    return library.source(environment, guard, hold(library))


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
