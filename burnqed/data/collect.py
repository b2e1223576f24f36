"""Sources → deduplicated, filtered, decontaminated, split theorem candidates (data preparation before Lean).

    collection = collect(cfg.data, store=store)  # reads every source in order
    collection.candidates                   # kept theorems with their proofs to replay / recorded steps
    collection.reports                      # one SourceReport per source (counts so far)
    collection.overlaps                     # training theorems dropped as restating a benchmark theorem
    collect(cfg.data, store=store, benchmarks=[pipeline_benchmark(...)])   # also against what the evals evaluate

Each theorem travels as one `records.theorem.Theorem` from the converter that reads its row to the index; two entries of
one theorem are combined by `merge_theorems` only (`data.registry`, which keeps one candidate per theorem). The rules
(grouping, sorry filter, dedup with benchmark theorems first, decontamination, splits) are docs/data.md's "Rules",
applied in that order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from burnqed.config import DataConfig, SourceSpec
from burnqed.data import rows as rows_mod
from burnqed.data.data_report import MAX_EXAMPLES, BenchmarkOverlap, CheckedBenchmark, SourceReport
from burnqed.data.decontaminate import BENCHMARK_KINDS, HELD_OUT_SPLITS, Benchmark
from burnqed.data.pairs import PAIRS_FILE, THEOREMS_FILE
from burnqed.data.registry import (
    Candidate,
    _at,
    _count,
    _Registry,
    _unique_proofs,
    benchmark_split,
    merge_theorems,
    skipped_declaration,
    statement_key,
)
from burnqed.data.sources import (
    ALTERNATIVE_COLUMNS,
    REQUIRED_COLUMNS,
    Item,
    Reject,
    answer_given,
    convert_row,
    normalize_split,
)
from burnqed.errors import InputError
from burnqed.records.theorem import SkippedDeclaration, Theorem, stable_split
from burnqed.storage import Store
from leankit.declaration import strip_imports, uses_sorry


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
