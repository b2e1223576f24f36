"""The theorem candidates of data preparation (`data.collect` reads the sources into them) and the registry that
keeps one per theorem across sources: grouping, the dedup with benchmark theorems first, the held-out splits, one
theorem's entries combined by `merge_theorems` only (docs/data.md, "Rules").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from burnqed.data.data_report import MAX_EXAMPLES, BenchmarkOverlap, CheckedBenchmark, SourceReport
from burnqed.data.decontaminate import BENCHMARK_KINDS, HELD_OUT_SPLITS, ROUTE_SOURCES, Benchmark, Twins
from burnqed.data.sources import (
    Item,
    TracedStep,
    normalize_split,
)
from burnqed.records.theorem import SkippedDeclaration, Theorem
from burnqed.text.completion import normalize_tactic
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


def _count(counter: dict[str, int], reason: str, amount: int = 1) -> None:
    counter[reason] = counter.get(reason, 0) + amount
