"""Sources → deduplicated, filtered, split theorem candidates (the part of data preparation before Lean).

    collection = collect(cfg.data, store=store)  # reads every source in order
    collection.candidates                   # kept theorems with their proofs to replay / recorded steps
    collection.reports                      # one SourceReport per source (counts so far)

Rules, in order, per source: rows of other splits are skipped (local files, when `SourceSpec.split` is set
and the row has a `split`); each row is converted (`burnqed.data.sources`) or rejected with a reason; rows
are grouped into theorems by name (a row restating a name with another statement is rejected); a theorem
any of whose tactics uses `sorry`/`admit`/`cheat` is dropped whole; then, across sources, the earlier
theorem wins: a later theorem with the same name and a different statement is dropped
(`duplicate_name`), one with the same name and statement, or the same statement under another name, is
merged (its proofs and steps are added to the earlier theorem's, its index entry is not). Finally each
theorem gets its split: the one a source fixes (miniF2F's test/valid, the bundled test split, `pairs`
rows marked test; when merged theorems disagree, test wins over valid over none, so a benchmark theorem
restated by a training source stays held out), else `pairs.stable_split` of its name.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from burnqed.config import DataConfig, SourceSpec
from burnqed.data import rows as rows_mod
from burnqed.data.declaration import uses_sorry
from burnqed.data.pairs import PAIRS_FILE, THEOREMS_FILE, stable_split
from burnqed.data.report import MAX_EXAMPLES, SourceReport
from burnqed.data.sources import REQUIRED_COLUMNS, Item, Reject, TracedStep, convert_row, normalize_split
from burnqed.errors import InputError
from burnqed.storage import Store
from burnqed.tactic_text import normalize_tactic

if TYPE_CHECKING:
    from burnqed.lean.corpus import Corpus


@dataclass(frozen=True, slots=True)
class ProofRef:
    """A whole proof to replay, and the source (index) that gave it."""

    tactics: tuple[str, ...]
    source: int


@dataclass(frozen=True, slots=True)
class StepRef:
    """A recorded step, and the source (index) that gave it."""

    step: TracedStep
    source: int


@dataclass(slots=True)
class Candidate:
    """A kept theorem: its index entry and where its pairs will come from."""

    name: str
    statement: str | None
    header: str | None
    source: int  # index of the source that added it
    label: str  # that source's name
    fixed_split: str | None
    split: str = "train"
    proofs: list[ProofRef] = field(default_factory=list)
    traced: list[StepRef] = field(default_factory=list)


@dataclass(slots=True)
class Collection:
    """Everything read from the sources, before Lean."""

    candidates: list[Candidate]
    reports: list[SourceReport]
    warnings: list[str]


def source_label(spec: SourceSpec) -> str:
    """The name recorded for a source: `SourceSpec.name`, else its kind."""
    return spec.name or spec.kind


def collect(
    config: DataConfig, on_source: Callable[[SourceReport], None] = lambda _: None, *, store: Store
) -> Collection:
    """Read, convert, filter, deduplicate and split every source of `config`, in order (`on_source` is
    called after each source, for progress)."""
    registry = _Registry()
    reports: list[SourceReport] = []
    warnings: list[str] = []
    for index, spec in enumerate(config.sources):
        report = SourceReport(index=index, kind=spec.kind, name=source_label(spec), path=spec.path)
        reports.append(report)
        reader = _SourceReader(index, spec, report, replay=config.replay, store=store)
        for item in reader.theorems():
            registry.admit(item, index, report, reports)
        warnings.extend(reader.warnings())
        on_source(report)
    for candidate in registry.candidates:
        candidate.split = candidate.fixed_split or stable_split(
            candidate.name, config.valid_fraction, config.split_salt
        )
    kept = Counter(candidate.source for candidate in registry.candidates)
    for report in reports:
        report.kept = kept[report.index]
        if report.theorems and not report.kept and not report.merged:
            rejections = {**report.rejected_theorems}
            why = ", ".join(f"{reason} {count}" for reason, count in sorted(rejections.items())) or "merged"
            warnings.append(f"source {report.index} ({report.name}): none of its {report.theorems} theorems was "
                            f"kept ({why})")
    return Collection(registry.candidates, reports, warnings)


# ------------------------------------------------------------------------------------------- one source


class _SourceReader:
    """Reads one source into grouped, sorry-filtered theorem items, counting into its report."""

    def __init__(self, index: int, spec: SourceSpec, report: SourceReport, *, replay: bool, store: Store) -> None:
        self.index = index
        self.store = store
        self.spec = spec
        self.report = report
        self.replay = replay
        self.columns: set[str] | None = None

    def theorems(self) -> Iterator[Item]:
        groups: dict[str, Item] = {}
        for where, converted in self._items():
            if isinstance(converted, Reject):
                self._reject_row(converted.reason, f"{where}: {converted.detail or converted.reason}")
                continue
            group = groups.get(converted.name)
            if group is None:
                groups[converted.name] = converted
            elif not _merge_rows(group, converted):
                self._reject_row("conflicting_statement",
                                 f"{where}: {converted.name!r} restated with another statement")
        for item in groups.values():
            self.report.theorems += 1
            for reason in item.proof_rejects:
                _count(self.report.proofs_rejected, reason)
            item.proofs = _unique_proofs(item.proofs)
            offender = _sorry_tactic(item)
            if offender is not None:
                _count(self.report.rejected_theorems, "sorry")
                self._example(f"{item.name}: uses sorry/admit/cheat in {offender!r}")
                continue
            if item.proofs and not self.replay:
                _count(self.report.proofs_rejected, "replay_off", len(item.proofs))
                item.proofs = []
            yield item

    def _items(self) -> Iterator[tuple[str, Item | Reject]]:
        spec = self.spec
        if spec.kind in ("bundled", "world"):
            yield from self._corpus()
            return
        if spec.path is None:
            raise InputError(f"data.sources[{self.index}] ({spec.kind}) needs a `path`: a local file or folder, "
                             "a URI, or a hub dataset name")
        filter_split = spec.split is not None and not rows_mod.is_hub_name(spec.path)
        statements: dict[str, str] = {}
        for row in self._rows(statements):
            if spec.limit is not None and self.report.rows >= spec.limit:
                return
            if row.data is None:
                self._reject_row("malformed_row", f"{row.where}: {row.error}")
                self.report.rows += 1
                continue
            if self.columns is None:
                self.columns = set(row.data)
            row_split = row.data.get("split")
            if filter_split and isinstance(row_split, str) and not _same_split(row_split, spec.split or ""):
                self.report.skipped_rows += 1
                continue
            self.report.rows += 1
            try:
                converted: Item | Reject = convert_row(spec.kind, row.data)
            except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
                # A row shaped in a way no converter expects is one rejected row, never a failed run.
                converted = Reject("malformed_row", f"cannot convert: {type(exc).__name__}: {exc}")
            if isinstance(converted, Item) and converted.statement is None and converted.name in statements:
                converted.statement = statements[converted.name]
            yield row.where, converted

    def _rows(self, statements: dict[str, str]) -> Iterable[rows_mod.Row]:
        """The source's rows (the limit is applied by the caller, after the split filter)."""
        spec = self.spec
        assert spec.path is not None
        if spec.kind == "pairs" and not rows_mod.is_hub_name(spec.path):
            folder = rows_mod.local_path(spec.path, store=self.store)
            if folder.is_dir() and (folder / PAIRS_FILE).is_file():
                # A prepared-data folder (or `burnqed data trace` output): its pairs, statements from its index.
                statements.update(_index_statements(folder / THEOREMS_FILE))
                return rows_mod.read_file_rows(folder / PAIRS_FILE)
        return rows_mod.read_rows(spec.path, spec.split, store=self.store)

    def _corpus(self) -> Iterator[tuple[str, Item | Reject]]:
        """A replay corpus: `bundled` (default file: the hand-written corpus; default split train) or `world`
        (default: the generated world; default splits train and pool)."""
        from burnqed.lean.corpus import SPLITS, load_corpus

        spec = self.spec
        if spec.split is not None:
            wanted: tuple[str, ...] = (spec.split,)
        else:
            wanted = ("train", "pool") if spec.kind == "world" else ("train",)
        if any(split not in SPLITS for split in wanted):
            raise InputError(f"data.sources[{self.index}] ({spec.kind}): split {spec.split!r} is not one of "
                             f"{', '.join(SPLITS)}")
        if spec.path:
            corpus = load_corpus(Path(spec.path))
        elif spec.kind == "world":
            corpus = _default_world()
        else:
            corpus = load_corpus()
        used = 0
        for theorem in corpus.theorems:
            if theorem.split not in wanted:
                self.report.skipped_rows += 1
                continue
            if spec.limit is not None and used >= spec.limit:
                break
            used += 1
            self.report.rows += 1
            # Pool theorems are statements to search: their recorded proofs only serve the replay server.
            item = Item(
                name=theorem.name,
                statement=theorem.statement,
                header=theorem.header,
                split=theorem.split if theorem.split in ("test", "pool") else None,
                proofs=[tuple(proof) for proof in theorem.proofs] if theorem.split != "pool" else [],
            )
            yield f"{corpus.name}:{theorem.name}", item

    def _reject_row(self, reason: str, example: str) -> None:
        _count(self.report.rejected_rows, reason)
        self._example(example)

    def _example(self, text: str) -> None:
        if len(self.report.examples) < MAX_EXAMPLES:
            self.report.examples.append(text[:500])

    def warnings(self) -> list[str]:
        """Loud notes for a source that gave nothing usable: a missing column, every row rejected."""
        report = self.report
        where = f"source {report.index} ({report.name}, {report.path or 'bundled corpus'})"
        if report.rows == 0:
            skipped = report.skipped_rows
            extra = f" ({skipped} rows of other splits than {self.spec.split!r})" if skipped else ""
            return [f"{where}: no rows{extra}"]
        rejected = sum(report.rejected_rows.values())
        if rejected < report.rows:
            return []
        for column in REQUIRED_COLUMNS.get(self.spec.kind, ()):
            if report.rejected_rows.get(f"missing_column:{column}", 0) == rejected:
                seen = ", ".join(sorted(self.columns)) if self.columns else "none"
                return [f"{where}: required column {column!r} is missing from every row (columns found: {seen})"]
        reasons = ", ".join(f"{reason} {count}" for reason, count in sorted(report.rejected_rows.items()))
        return [f"{where}: all {report.rows} rows were rejected ({reasons})"]


# ------------------------------------------------------------------------------------------- registry


class _Registry:
    """Theorems kept so far, by name and by normalised statement: the earlier source wins."""

    def __init__(self) -> None:
        self.candidates: list[Candidate] = []
        self.by_name: dict[str, Candidate] = {}
        self.by_statement: dict[str, Candidate] = {}

    def admit(self, item: Item, index: int, report: SourceReport, reports: list[SourceReport]) -> None:
        key = statement_key(item.statement) if item.statement else None
        earlier = self.by_name.get(item.name)
        if earlier is not None:
            if earlier.statement and key and statement_key(earlier.statement) != key:
                _count(report.rejected_theorems, "duplicate_name")
                if len(report.examples) < MAX_EXAMPLES:
                    report.examples.append(f"{item.name}: name already used by source {earlier.source} "
                                           f"({reports[earlier.source].name}) with another statement")
                return
            self._merge(earlier, item, index, report)
            return
        earlier = self.by_statement.get(key) if key else None
        if earlier is not None:
            self._merge(earlier, item, index, report)
            return
        candidate = Candidate(
            name=item.name,
            statement=item.statement,
            header=item.header,
            source=index,
            label=report.name,
            fixed_split=item.split,
            proofs=[ProofRef(proof, index) for proof in item.proofs],
            traced=[StepRef(step, index) for step in item.traced],
        )
        self.candidates.append(candidate)
        self.by_name[item.name] = candidate
        if key:
            self.by_statement[key] = candidate

    def _merge(self, earlier: Candidate, item: Item, index: int, report: SourceReport) -> None:
        report.merged += 1
        earlier.fixed_split = held_out_split(earlier.fixed_split, item.split)
        if earlier.statement is None and item.statement is not None:
            earlier.statement = item.statement
            self.by_statement.setdefault(statement_key(item.statement), earlier)
        if earlier.header is None:
            earlier.header = item.header
        known = {_proof_key(ref.tactics) for ref in earlier.proofs}
        for proof in item.proofs:
            if _proof_key(proof) not in known:
                known.add(_proof_key(proof))
                earlier.proofs.append(ProofRef(proof, index))
        earlier.traced.extend(StepRef(step, index) for step in item.traced)


# -------------------------------------------------------------------------------------------- helpers


def statement_key(statement: str) -> str:
    """Dedup key of a statement: all whitespace removed (the replay server matches statements the same way)."""
    return "".join(statement.split())


def _proof_key(tactics: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(normalize_tactic(tactic) for tactic in tactics)


def held_out_split(first: str | None, second: str | None) -> str | None:
    """The stricter of two fixed splits (test, then valid): a theorem any source holds out stays held out,
    so a benchmark theorem restated by a training source never reaches the train split."""
    for split in ("test", "valid"):
        if split in (first, second):
            return split
    return first or second


def _unique_proofs(proofs: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    seen: set[tuple[str, ...]] = set()
    unique = []
    for proof in proofs:
        key = _proof_key(proof)
        if key not in seen:
            seen.add(key)
            unique.append(proof)
    return unique


def _merge_rows(group: Item, item: Item) -> bool:
    """Merge a further row of one theorem into its group; False when the statements conflict."""
    if group.statement and item.statement and statement_key(group.statement) != statement_key(item.statement):
        return False
    group.statement = group.statement or item.statement
    group.header = group.header or item.header
    group.split = held_out_split(group.split, item.split)
    group.proofs.extend(item.proofs)
    group.traced.extend(item.traced)
    group.proof_rejects.extend(item.proof_rejects)
    return True


def _sorry_tactic(item: Item) -> str | None:
    for proof in item.proofs:
        for tactic in proof:
            if uses_sorry(tactic):
                return tactic
    for step in item.traced:
        if uses_sorry(step.tactic):
            return step.tactic
    return None


def _same_split(row_split: str, wanted: str) -> bool:
    return (normalize_split(row_split) or row_split.strip().lower()) == (
        normalize_split(wanted) or wanted.strip().lower()
    )


def _default_world() -> Corpus:
    """The generated world as the embedded corpus holds it (its statements distinct from the bundled ones)."""
    from burnqed.lean.corpus import Corpus, embedded_corpus
    from burnqed.world import WORLD_NAME, WORLD_SOURCE

    embedded = embedded_corpus()
    return Corpus(name=WORLD_NAME, theorems=[t for t in embedded.theorems if t.source == WORLD_SOURCE])


def _index_statements(path: Path) -> dict[str, str]:
    if not path.is_file():
        return {}
    from burnqed.data.index import load_local_theorem_index

    return {t.name: t.statement for t in load_local_theorem_index(path).theorems if t.statement}


def _count(counter: dict[str, int], reason: str, amount: int = 1) -> None:
    counter[reason] = counter.get(reason, 0) + amount

