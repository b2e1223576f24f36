"""Sources → deduplicated, filtered, decontaminated, split theorem candidates (data preparation before Lean).

    collection = collect(cfg.data, store=store)  # reads every source in order
    collection.candidates                   # kept theorems with their proofs to replay / recorded steps
    collection.reports                      # one SourceReport per source (counts so far)
    collection.overlaps                     # training theorems dropped as restating a benchmark theorem
    collect(cfg.data, store=store, benchmarks=[pipeline_benchmark(...)])   # also against what the evals evaluate

Each theorem travels as one `records.theorem.Theorem` from the converter that reads its row to the index; two entries of
one theorem are combined by `merge_theorems` only. The rules (grouping, sorry filter, dedup with benchmark theorems
first, decontamination, splits) are docs/data.md's "Rules", applied in that order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from burnqed.config import DataConfig, SourceSpec
from burnqed.data import rows as rows_mod
from burnqed.data.data_report import MAX_EXAMPLES, BenchmarkOverlap, CheckedBenchmark, SourceReport
from burnqed.data.decontaminate import BENCHMARK_KINDS, HELD_OUT_SPLITS, ROUTE_SOURCES, Benchmark, Twins
from burnqed.data.pairs import PAIRS_FILE, THEOREMS_FILE
from burnqed.data.sources import (
    ALTERNATIVE_COLUMNS,
    REQUIRED_COLUMNS,
    Item,
    Reject,
    TracedStep,
    answer_given,
    convert_row,
    normalize_split,
)
from burnqed.errors import InputError
from burnqed.records.theorem import SkippedDeclaration, Theorem, stable_split
from burnqed.storage import Store
from burnqed.text.completion import normalize_tactic
from leankit.declaration import strip_imports, uses_sorry
from leankit.normal_form import statement_normal_form


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

    theorem: Theorem  # the index entry; its `split` is the fixed split until `collect` assigns the final one
    source: int  # index of the source that added it
    order: int  # its position among that source's theorems (the index keeps source order)
    fixed_split: str | None
    proofs: list[ProofRef] = field(default_factory=list)
    traced: list[StepRef] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.theorem.name

    @property
    def statement(self) -> str | None:
        return self.theorem.statement

    @property
    def header(self) -> str | None:
        return self.theorem.header

    @property
    def label(self) -> str:
        """The name of the source that added it."""
        return self.theorem.source or ""

    @property
    def split(self) -> str:
        return self.theorem.split or "train"

    @property
    def benchmark(self) -> bool:
        """A benchmark theorem: its source holds it out (test or valid); it is evaluated, never trained on."""
        return self.fixed_split in HELD_OUT_SPLITS


@dataclass(slots=True)
class Collection:
    """Everything read from the sources, before Lean."""

    candidates: list[Candidate]
    reports: list[SourceReport]
    warnings: list[str]
    overlaps: list[BenchmarkOverlap] = field(default_factory=list)
    benchmarks: list[CheckedBenchmark] = field(default_factory=list)  # what the training statements were compared with
    # Each row or theorem of a benchmark source (BENCHMARK_KINDS) that is no candidate of its own, with where it
    # stands and why: what an eval of the benchmark lists as not evaluated.
    skipped: list[SkippedDeclaration] = field(default_factory=list)


def source_label(spec: SourceSpec) -> str:
    """The name recorded for a source: `SourceSpec.name`, else its kind."""
    return spec.name or spec.kind


def collect(
    config: DataConfig, on_source: Callable[[SourceReport], None] = lambda _: None, *, store: Store,
    benchmarks: Sequence[Benchmark] = (),
) -> Collection:
    """Read, convert, filter, deduplicate and split every source of `config`, in order (`on_source` is
    called after each source, for progress); training theorems restating a benchmark theorem of the sources or of
    `benchmarks` (route `pipeline.benchmark`) are dropped."""
    reports: list[SourceReport] = []
    warnings: list[str] = []
    items: list[list[Item]] = []
    skipped: list[SkippedDeclaration] = []
    for index, spec in enumerate(config.sources):
        report = SourceReport(index=index, kind=spec.kind, name=source_label(spec), path=spec.path)
        reports.append(report)
        reader = _SourceReader(index, spec, report, replay=config.replay, store=store, world_seed=config.world_seed,
                               world_sketches=config.world_sketches)
        items.append(list(reader.theorems()))
        warnings.extend(reader.warnings())
        warnings.extend(reader.import_notes())
        skipped.extend(reader.skipped)
        on_source(report)
    registry = _Registry(reports)
    for held_out in (True, False):  # benchmark theorems first: a training theorem never displaces one
        for index, source_items in enumerate(items):
            for order, item in enumerate(source_items):
                if (item.split in HELD_OUT_SPLITS) == held_out:
                    registry.admit(item, index, order)
    overlaps, checked = registry.decontaminate(benchmarks)
    candidates = sorted(registry.candidates, key=lambda c: (c.source, c.order))
    for candidate in candidates:
        split = candidate.fixed_split or stable_split(candidate.name, config.valid_fraction, config.split_salt)
        candidate.theorem = candidate.theorem.model_copy(update={"split": split})
    kept = Counter(candidate.source for candidate in candidates)
    for report in reports:
        report.kept = kept[report.index]
        if report.theorems and not report.kept and not report.merged:
            rejections = {**report.rejected_theorems}
            why = ", ".join(f"{reason} {count}" for reason, count in sorted(rejections.items())) or "merged"
            warnings.append(f"source {report.index} ({report.name}): none of its {report.theorems} theorems was "
                            f"kept ({why})")
    return Collection(candidates, reports, warnings, overlaps, checked, [*skipped, *registry.skipped])


# ------------------------------------------------------------------------------------------- one source


MAX_IMPORT_NOTES = 10  # lines naming a .lean file without its source's usual imports, then a count


class _SourceReader:
    """Reads one source into grouped, sorry-filtered theorem items, counting into its report."""

    def __init__(self, index: int, spec: SourceSpec, report: SourceReport, *, replay: bool, store: Store,
                 world_seed: int = 0, world_sketches: bool = False) -> None:
        self.index = index
        self.world_seed = world_seed
        self.world_sketches = world_sketches
        self.store = store
        self.spec = spec
        self.report = report
        self.replay = replay
        self.columns: set[str] | None = None
        self.skipped: list[SkippedDeclaration] = []  # of a benchmark source only
        self.imports: dict[str, tuple[str, ...]] = {}  # each `.lean` file read: the modules it imports

    def theorems(self) -> Iterator[Item]:
        groups: dict[str, Item] = {}
        for where, converted, row in self._items():
            if isinstance(converted, Reject):
                self._reject_row(converted.reason, f"{where}: {converted.detail or converted.reason}")
                self._skip(row, converted.reason, converted.detail, line=converted.line)
                continue
            if row is not None:
                converted.file, converted.line = row.file, row.line
            converted.theorem = converted.theorem.model_copy(update={"source": self.report.name})
            group = groups.get(converted.name)
            if group is not None and _conflicts(group, converted) and converted.split and group.split \
                    and converted.split != group.split:
                # One name in two splits with two statements (an id-only layout numbering each split on its
                # own): the later is kept under a name that says its split, so ids never collide across splits.
                renamed = f"{converted.name}_{converted.split}"
                self.report.renamed += 1
                self._example(f"{where}: {converted.name!r} is also a {group.split} theorem with another statement; "
                              f"kept as {renamed!r}")
                converted.theorem = converted.theorem.model_copy(update={"name": renamed})
                group = groups.get(renamed)
            if group is None:
                groups[converted.name] = converted
            elif not _merge_rows(group, converted):
                self._reject_row("conflicting_statement",
                                 f"{where}: {converted.name!r} restated with another statement")
                self._skip(row, "conflicting_statement", f"{group.name} is declared before{_at(group)} with "
                           "another statement", converted.name)
            else:
                self._skip(row, "duplicate_declaration", f"{group.name} is declared before{_at(group)} with this "
                           "statement: evaluated there", converted.name)
        for item in groups.values():
            self.report.theorems += 1
            for reason in item.proof_rejects:
                _count(self.report.proofs_rejected, reason)
            item.proofs = _unique_proofs(item.proofs)
            offender = _sorry_tactic(item)
            if offender is not None:
                _count(self.report.rejected_theorems, "sorry")
                self._example(f"{item.name}: uses sorry/admit/cheat in {offender!r}")
                if self.spec.kind in BENCHMARK_KINDS:
                    self.skipped.append(skipped_declaration(item, "sorry", f"uses sorry/admit/cheat in {offender!r}",
                                                            self.report))
                continue
            if item.proofs and not self.replay:
                _count(self.report.proofs_rejected, "replay_off", len(item.proofs))
                item.proofs = []
            yield item

    def _skip(self, row: rows_mod.Row | None, reason: str, detail: str, name: str | None = None, *,
              line: int = 0) -> None:
        """Record a row of a benchmark source that gives no theorem of its own (`Collection.skipped`); `line`: where
        in the row, in lines after its first."""
        if self.spec.kind not in BENCHMARK_KINDS or row is None:
            return
        data = row.data or {}
        if name is None:
            given = data.get("name")
            name = given if isinstance(given, str) and given.strip() else None
        own = data.get("split")
        split = normalize_split(own) if isinstance(own, str) else None
        self.skipped.append(SkippedDeclaration(
            name=name, file=row.file or row.where, line=None if row.line is None else row.line + line, reason=reason,
            detail=detail or reason,
            split=split or benchmark_split(row.path_split, self.spec.split)))

    def _items(self) -> Iterator[tuple[str, Item | Reject, rows_mod.Row | None]]:
        spec = self.spec
        if spec.kind in ("bundled", "world"):
            yield from self._corpus()
            return
        if spec.path is None:
            raise InputError(f"data.sources[{self.index}] ({spec.kind}) needs a `path`: a local file or folder, "
                             "a URI, or a hub dataset name")
        filter_split = spec.split is not None and not rows_mod.is_hub_name(spec.path)
        entries: dict[str, Theorem] = {}
        for row in self._rows(entries):
            if spec.limit is not None and self.report.rows >= spec.limit:
                return
            if row.imports is not None:
                self.imports.setdefault(row.file or row.where, row.imports)
            if row.data is None:
                self._reject_row("malformed_row", f"{row.where}: {row.error}")
                self._skip(row, "malformed_row", row.error or "")
                self.report.rows += 1
                continue
            if self.columns is None:
                self.columns = set(row.data)
            row_split = row.data.get("split") if "split" in row.data else row.path_split
            if filter_split and isinstance(row_split, str) and not _same_split(row_split, spec.split or ""):
                self.report.skipped_rows += 1
                continue
            self.report.rows += 1
            try:
                converted: Item | Reject = convert_row(spec.kind, row.data)
            except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
                # A row shaped in a way no converter expects is one rejected row, never a failed run.
                converted = Reject("malformed_row", f"cannot convert: {type(exc).__name__}: {exc}")
            if isinstance(converted, Item):
                yield from self._entries(row, converted, entries)
            else:
                yield row.where, converted, row

    def _entries(self, row: rows_mod.Row, item: Item, entries: dict[str, Theorem]
                 ) -> Iterator[tuple[str, Item | Reject, rows_mod.Row]]:
        """The entries of a converted row: completed from a prepared folder's index, a benchmark's with its split;
        of an answer-bearing theorem, those `answers` selects: the theorem as written (produced) and its
        answer-given form (`sources.answer_given`), counted in the report."""
        known = entries.get(item.name)
        if known is not None:  # a prepared folder's index completes its pairs' entries
            item.theorem = merge_theorems(item.theorem, known)
        if self.spec.kind in BENCHMARK_KINDS and item.split is None:
            split = benchmark_split(row.path_split, self.spec.split)
            item.theorem = item.theorem.model_copy(update={"split": split})
        if item.theorem.answer is None:
            yield row.where, item, row
            return
        self.report.answer_bearing += 1
        if self.spec.answers in (None, "both", "produced"):
            self.report.answer_produced += 1
            yield row.where, item, row
        if self.spec.answers in (None, "both", "given"):
            given = answer_given(item)
            if given is None:
                self.report.answer_without_reference.append(item.name)
            else:
                self.report.answer_given += 1
                yield row.where, given, row

    def _rows(self, entries: dict[str, Theorem]) -> Iterable[rows_mod.Row]:
        """The source's rows (the limit is applied by the caller, after the split filter)."""
        spec = self.spec
        assert spec.path is not None
        if spec.kind == "pairs" and not rows_mod.is_hub_name(spec.path):
            folder = rows_mod.local_path(spec.path, store=self.store)
            if folder.is_dir() and (folder / PAIRS_FILE).is_file():
                # A prepared-data folder (or `burnqed data trace` output): its pairs, their entries from its index.
                entries.update(_index_entries(folder / THEOREMS_FILE))
                return rows_mod.read_file_rows(folder / PAIRS_FILE)
        return rows_mod.read_rows(spec.path, spec.split, store=self.store)

    def _corpus(self) -> Iterator[tuple[str, Item | Reject, rows_mod.Row | None]]:
        """A replay corpus: `bundled` (default file: the hand-written corpus; default split train) or `world`
        (default: the generated world; default splits train and pool)."""
        from leankit.corpus import SPLITS, load_corpus

        spec = self.spec
        if spec.split is not None:
            wanted: tuple[str, ...] = (spec.split,)
        else:
            wanted = ("train", "pool") if spec.kind == "world" else ("train",)
        if any(split not in SPLITS for split in wanted):
            raise InputError(f"data.sources[{self.index}] ({spec.kind}): split {spec.split!r} is not one of "
                             f"{', '.join(SPLITS)}")
        if spec.kind == "world" and not spec.path:
            yield from self._checked_world(wanted)
            return
        corpus = load_corpus(Path(spec.path)) if spec.path else load_corpus()
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
            entry = Theorem.from_recorded(theorem).model_copy(update={
                "header": strip_imports(theorem.header), "source": None,
                "split": theorem.split if theorem.split in ("test", "pool") else None,
            })
            # Recorded from the ∀ statement; the theorem starts in binder form, so the proofs are restated from there.
            proofs = [tuple(proof) for proof in theorem.binder_proofs()] if theorem.split != "pool" else []
            item = Item(entry, proofs=proofs)
            yield f"{corpus.name}:{theorem.name}", item, None

    def _checked_world(self, wanted: tuple[str, ...]) -> Iterator[tuple[str, Item | Reject, rows_mod.Row | None]]:
        """The checked world of `data.world_seed` (and `data.world_sketches`; served by minilean): train theorems with
        their proofs (already from the binder-form start), pool statements without; traps have no proof."""
        from leankit.world.checked import embedded_world

        world = embedded_world(self.world_seed, self.world_sketches)
        used = 0
        for theorem in world.theorems:
            if theorem.split not in wanted:
                self.report.skipped_rows += 1
                continue
            if self.spec.limit is not None and used >= self.spec.limit:
                break
            used += 1
            self.report.rows += 1
            entry = Theorem.from_recorded(theorem).model_copy(update={
                "header": strip_imports(theorem.header), "source": None,
                "split": theorem.split if theorem.split in ("test", "pool") else None,
            })
            proofs = [tuple(proof) for proof in theorem.proofs] if theorem.split != "pool" else []
            yield f"{world.name}:{theorem.name}", Item(entry, proofs=proofs), None

    def _reject_row(self, reason: str, example: str) -> None:
        _count(self.report.rejected_rows, reason)
        self._example(example)

    def _example(self, text: str) -> None:
        if len(self.report.examples) < MAX_EXAMPLES:
            self.report.examples.append(text[:500])

    def import_notes(self) -> list[str]:
        """One line per `.lean` file of the source without an import most of its files have (a file that lost its
        first lines: `import Mathlib`, and with them its `open`s, which only Lean can miss); at most
        MAX_IMPORT_NOTES lines, then how many more. None for a source of one file, or without such a majority."""
        if len(self.imports) < 2:
            return []
        counts = Counter(module for modules in self.imports.values() for module in set(modules))
        usual = [module for module, count in counts.items() if 2 * count > len(self.imports)]
        where = f"source {self.report.index} ({self.report.name})"
        notes = []
        for file, modules in self.imports.items():
            lost = [module for module in usual if module not in modules]
            if lost:
                shown = ", ".join(f"`import {module}`" for module in sorted(lost))
                have = min(counts[module] for module in lost)
                notes.append(f"{where}: {file} has no {shown} line, which {have} of its {len(self.imports)} .lean "
                             "files have: its theorems are started under the Lean REPL's imports (lean.command), and "
                             "an `open` line it lost too shows only as Lean's unknown identifier at their start "
                             "(`burnqed lean check`)")
        if len(notes) > MAX_IMPORT_NOTES:
            notes[MAX_IMPORT_NOTES:] = [f"{where}: … and {len(notes) - MAX_IMPORT_NOTES} more .lean files without "
                                        "the imports most of its files have"]
        return notes

    def warnings(self) -> list[str]:
        """Loud notes for a source that gave nothing usable: a missing column, every row rejected."""
        report = self.report
        where = f"source {report.index} ({report.name}, {report.path or 'bundled corpus'})"
        if report.rows == 0:
            skipped = report.skipped_rows
            extra = f" ({skipped} rows of other splits than {self.spec.split!r})" if skipped else ""
            if not skipped and str(report.path or "").endswith(".lean"):
                extra = " (no theorem, lemma or example is declared in it)"
            return [f"{where}: no rows{extra}"]
        rejected = sum(report.rejected_rows.values())
        if rejected < report.rows:
            return []
        for column in REQUIRED_COLUMNS.get(self.spec.kind, ()):
            if report.rejected_rows.get(f"missing_column:{column}", 0) == rejected:
                alternative = ALTERNATIVE_COLUMNS.get((self.spec.kind, column))
                named = f"{column!r}" + (f" (or {alternative!r})" if alternative else "")
                seen = ", ".join(sorted(self.columns)) if self.columns else "none"
                return [f"{where}: required column {named} is missing from every row (columns found: {seen})"]
        reasons = ", ".join(f"{reason} {count}" for reason, count in sorted(report.rejected_rows.items()))
        return [f"{where}: all {report.rows} rows were rejected ({reasons})"]


# ------------------------------------------------------------------------------------------- registry


class _Registry:
    """Theorems kept so far, by name and by normalised statement: the earlier source wins (benchmark theorems
    are admitted before all others, so they always come earlier)."""

    def __init__(self, reports: list[SourceReport]) -> None:
        self.reports = reports
        self.candidates: list[Candidate] = []
        self.by_name: dict[str, Candidate] = {}
        self.by_statement: dict[tuple[bool, str], Candidate] = {}  # (benchmark, statement key)
        self.overlaps: list[BenchmarkOverlap] = []
        self.skipped: list[SkippedDeclaration] = []  # benchmark theorems that are no candidate of their own

    def admit(self, item: Item, index: int, order: int) -> None:
        report = self.reports[index]
        benchmark = item.split in HELD_OUT_SPLITS
        key = statement_key(item.statement) if item.statement else None
        earlier = self.by_name.get(item.name)
        if earlier is not None:
            restated = bool(earlier.statement and key and statement_key(earlier.statement) != key)
            if earlier.benchmark and not benchmark and item.statement and earlier.statement and (
                statement_normal_form(item.statement) == statement_normal_form(earlier.statement)
            ):
                self._overlap(item.theorem, index, earlier)  # a benchmark theorem restated under its own name
                return
            if earlier.benchmark != benchmark or restated:
                _count(report.rejected_theorems, "duplicate_name")
                what = "with another statement" if restated else "for a benchmark theorem"
                if len(report.examples) < MAX_EXAMPLES:
                    report.examples.append(f"{item.name}: name already used by source {earlier.source} "
                                           f"({self.reports[earlier.source].name}) {what}")
                self._skip(item, report, "duplicate_name", f"the name is already used by source {earlier.source} "
                           f"({self.reports[earlier.source].name}) {what}")
                return
            self._skip(item, report, "duplicate_declaration", f"source {earlier.source} "
                       f"({self.reports[earlier.source].name}) declares it with this statement: evaluated there")
            self._merge(earlier, item, index, report)
            return
        earlier = self.by_statement.get((benchmark, key)) if key else None
        if earlier is not None:
            self._skip(item, report, "same_statement", f"{earlier.name} states the same: evaluated as {earlier.name}")
            self._merge(earlier, item, index, report)
            return
        candidate = Candidate(
            theorem=item.theorem,
            source=index,
            order=order,
            fixed_split=item.split,
            proofs=[ProofRef(proof, index) for proof in item.proofs],
            traced=[StepRef(step, index) for step in item.traced],
        )
        self.candidates.append(candidate)
        self.by_name[item.name] = candidate
        if key:
            self.by_statement[(benchmark, key)] = candidate

    def _skip(self, item: Item, report: SourceReport, reason: str, detail: str) -> None:
        if report.kind in BENCHMARK_KINDS:
            self.skipped.append(skipped_declaration(item, reason, detail, report))

    def _merge(self, earlier: Candidate, item: Item, index: int, report: SourceReport) -> None:
        report.merged += 1
        earlier.theorem = merge_theorems(earlier.theorem, item.theorem)
        earlier.fixed_split = earlier.theorem.split
        if earlier.statement is not None:
            self.by_statement.setdefault((earlier.benchmark, statement_key(earlier.statement)), earlier)
        known = {_proof_key(ref.tactics) for ref in earlier.proofs}
        for proof in item.proofs:
            if _proof_key(proof) not in known:
                known.add(_proof_key(proof))
                earlier.proofs.append(ProofRef(proof, index))
        earlier.traced.extend(StepRef(step, index) for step in item.traced)

    def decontaminate(self, extra: Sequence[Benchmark]) -> tuple[list[BenchmarkOverlap], list[CheckedBenchmark]]:
        """Drop every training theorem whose statement has the normal form of a benchmark statement: of a source's
        benchmark theorems (route `sources`, per source), else of `extra`'s. The overlaps, and the benchmarks
        compared with."""
        held: dict[int, list[Theorem]] = {}
        for candidate in self.candidates:
            if candidate.benchmark:
                held.setdefault(candidate.source, []).append(
                    candidate.theorem.model_copy(update={"split": candidate.fixed_split}))
        sources = [Benchmark(ROUTE_SOURCES, self.reports[index].name, tuple(theorems))
                   for index, theorems in sorted(held.items())]
        twins = Twins([*sources, *extra])
        kept: list[Candidate] = []
        for candidate in self.candidates:
            overlap = (None if candidate.benchmark else
                       twins.overlap(candidate.theorem, self.reports[candidate.source].name))
            if overlap is None:
                kept.append(candidate)
            else:
                _count(self.reports[candidate.source].rejected_theorems, "benchmark_overlap")
                self.overlaps.append(overlap)
        self.candidates = kept
        position = {report.name: report.index for report in reversed(self.reports)}
        overlaps = sorted(self.overlaps, key=lambda overlap: (position.get(overlap.training_source, 0),
                                                             overlap.training))
        return overlaps, [benchmark.checked() for benchmark in twins.benchmarks]

    def _overlap(self, training: Theorem, source: int, benchmark: Candidate) -> None:
        _count(self.reports[source].rejected_theorems, "benchmark_overlap")
        self.overlaps.append(BenchmarkOverlap(
            training=training.name, training_source=self.reports[source].name, benchmark=benchmark.name,
            benchmark_source=benchmark.label, benchmark_split=benchmark.fixed_split or "test",
            statement=training.statement or "", route=ROUTE_SOURCES,
        ))


# -------------------------------------------------------------------------------------------- helpers


def skipped_declaration(item: Item, reason: str, detail: str, report: SourceReport) -> SkippedDeclaration:
    """A benchmark theorem that is no candidate of its own, where its row stands (its source's path, or name, when
    the row names no file)."""
    return SkippedDeclaration(name=item.name, file=item.file or report.path or report.name, line=item.line,
                              reason=reason, detail=detail, split=item.split)


def _at(item: Item) -> str:
    """` at LINE` of an item's row, or nothing where it has no line."""
    return f" at line {item.line}" if item.line is not None else ""


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


def merge_theorems(earlier: Theorem, later: Theorem) -> Theorem:
    """The one merge of two index entries of one theorem (same name, or same statement): the earlier entry's
    name and source, its statement, signature, header and docstring where it has them, else the later one's (the
    two statements are equal where both exist, so a signature fits either), and the stricter fixed split."""
    update: dict[str, str | None] = {
        field_name: getattr(later, field_name)
        for field_name in ("statement", "signature", "header", "docstring")
        if getattr(earlier, field_name) is None and getattr(later, field_name) is not None
    }
    split = held_out_split(earlier.split, later.split)
    if split != earlier.split:
        update["split"] = split
    return earlier.model_copy(update=update) if update else earlier


def benchmark_split(path_split: str | None, source_split: str | None) -> str:
    """The split of a benchmark theorem whose row names none: the one its file's path names, else the
    source's `split`, else test (a benchmark is held out)."""
    return path_split or normalize_split(source_split) or "test"


def _conflicts(group: Item, item: Item) -> bool:
    return bool(group.statement and item.statement
                and statement_key(group.statement) != statement_key(item.statement))


def _merge_rows(group: Item, item: Item) -> bool:
    """Merge a further row of one theorem into its group; False when the statements conflict."""
    if _conflicts(group, item):
        return False
    group.theorem = merge_theorems(group.theorem, item.theorem)
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




def _index_entries(path: Path) -> dict[str, Theorem]:
    """A prepared folder's index entries by name, without source and split (its pairs' rows say those)."""
    if not path.is_file():
        return {}
    from burnqed.data.index import load_local_theorem_index

    return {t.name: t.model_copy(update={"source": None, "split": None})
            for t in load_local_theorem_index(path).theorems}


def _count(counter: dict[str, int], reason: str, amount: int = 1) -> None:
    counter[reason] = counter.get(reason, 0) + amount

