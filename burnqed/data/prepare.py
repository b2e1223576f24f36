"""The data preparation stage: sources → theorem index + tactic pairs + contrastive pool + report (docs/data.md).

    benchmark = pipeline_benchmark(cfg.pipeline.benchmark, cfg.data.world_seed, store=store,
                                   world_sketches=cfg.data.world_sketches)  # exit 2: missing
    prepared = await prepare_data(cfg.data, open_lean=lambda: open_pool(cfg.lean), guard=guard, store=store,
                                  benchmarks=[benchmark])
    write_prepared(folder, prepared)      # the layout of burnqed.data.pairs

`collect` reads the sources; the Lean pool is opened only when a kept theorem has whole proofs to replay
(`burnqed.data.replay`); pairs are deduplicated, the first kept. The stage never constructs a Lean edge: the
caller passes `open_lean` (the CLI: `commands.edges.open_pool`). Run it with `burnqed data prepare --output URI`.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from burnqed.base.progress import progress_bar
from burnqed.config import DataConfig
from burnqed.data.collect import Collection, collect
from burnqed.data.data_report import MAX_EXAMPLES, DataReport, ReplayFailure, SourceReport, SplitCounts, summary_line
from burnqed.data.decontaminate import Benchmark
from burnqed.data.pairs import (
    CONTRASTIVE_FILE,
    PAIRS_FILE,
    REPORT_FILE,
    THEOREMS_FILE,
    ContrastivePool,
    TacticPair,
    write_pairs,
)
from burnqed.data.registry import Candidate
from burnqed.data.replay import ReplayJob, TheoremReplay, replay_all
from burnqed.errors import InputError
from burnqed.lean.env import WorkerPool
from burnqed.lean.guard import TacticGuard
from burnqed.records.theorem import TheoremIndex
from burnqed.storage import Store, write_text_atomic
from burnqed.text.completion import normalize_tactic

LeanOpener = Callable[[], AbstractAsyncContextManager[tuple[WorkerPool, int]]]
ProgressFactory = Callable[[str, int], AbstractContextManager[Callable[[int], None]]]


@dataclass(slots=True)
class PreparedData:
    """Everything a prepared-data folder holds."""

    index: TheoremIndex
    pairs: list[TacticPair]
    contrastive: ContrastivePool
    report: DataReport


def needs_lean(collection: Collection) -> bool:
    """True when some kept theorem has whole proofs to replay."""
    return any(candidate.proofs for candidate in collection.candidates)


async def prepare_data(
    config: DataConfig,
    *,
    open_lean: LeanOpener | None,
    guard: TacticGuard,
    lean_command: list[str] | None = None,
    progress: ProgressFactory = progress_bar,
    store: Store,
    benchmarks: Sequence[Benchmark] = (),
) -> PreparedData:
    """Run the whole stage in memory. `open_lean` is called only when proofs must be replayed (None: the
    caller has no Lean; proofs then count as `no_lean` and give no pairs). Training theorems restating a theorem
    of `benchmarks` (the pipeline's benchmark) or of a benchmark source are dropped. Raises `InputError` when no
    pair results."""
    started = time.perf_counter()
    with progress("reading sources", len(config.sources)) as advance_sources:
        collection = collect(config, on_source=lambda _: advance_sources(1), store=store, benchmarks=benchmarks)
    replays: dict[str, TheoremReplay] = {}
    used_lean: list[str] | None = None
    if needs_lean(collection):
        if open_lean is None:
            _drop_proofs(collection, "no_lean")
        else:
            jobs = [
                ReplayJob(c.theorem, tuple(ref.tactics for ref in c.proofs))
                for c in collection.candidates
                if c.proofs
            ]
            async with open_lean() as (pool, size):
                with progress("replaying proofs", len(jobs)) as advance:
                    results = await replay_all(jobs, pool, concurrency=size, guard=guard,
                                               on_done=lambda _: advance(1))
            replays = {result.name: result for result in results}
            used_lean = lean_command
    prepared = assemble(collection, replays, config, used_lean, time.perf_counter() - started)
    # A benchmark alone is complete without pairs (it is evaluated, never trained on); anything else is meant
    # for training or search, and a preparation that gives it no pair at all is an error.
    if not prepared.pairs and not (collection.candidates and all(c.benchmark for c in collection.candidates)):
        lines = [summary_line(source) for source in prepared.report.sources]
        what = "tactic pairs" if collection.candidates else "theorems"  # no theorem at all: say that, not "no pairs"
        raise InputError(f"no {what} resulted from data.sources: " + "; ".join(lines + prepared.report.warnings))
    return prepared


def assemble(
    collection: Collection,
    replays: dict[str, TheoremReplay],
    config: DataConfig,
    lean_command: list[str] | None,
    elapsed_s: float,
) -> PreparedData:
    """Pairs, index, contrastive pool and report from the collected theorems and their replays."""
    reports = collection.reports
    builder = _PairBuilder(reports)
    histogram: Counter[int] = Counter()
    contrastive: list[str] = []
    for candidate in collection.candidates:
        lengths = builder.add_traced(candidate) + builder.add_replayed(candidate, replays.get(candidate.name))
        histogram.update(lengths)
        if lengths and max(lengths) >= config.contrastive_min_depth:
            contrastive.append(candidate.name)
        if not candidate.proofs and not candidate.traced:
            reports[candidate.source].statement_only += 1
    warnings = list(collection.warnings)
    traced_sources = {ref.source for candidate in collection.candidates for ref in candidate.traced}
    for source in reports:
        if source.pairs == 0 and (source.proofs or source.index in traced_sources):
            failures = source.replay_failures
            first = f" (first: {failures[0].theorem}: {failures[0].error})" if failures else ""
            warnings.append(f"source {source.index} ({source.name}): no pairs; {source.proofs_failed} of "
                            f"{source.proofs} proofs failed to replay{first}")
    splits: dict[str, SplitCounts] = defaultdict(SplitCounts)
    for candidate in collection.candidates:
        splits[candidate.split].theorems += 1
    for pair in builder.pairs:
        splits[pair.split].pairs += 1
    index = TheoremIndex(
        name="+".join(dict.fromkeys(report.name for report in reports)) or "prepared-data",
        theorems=[candidate.theorem for candidate in collection.candidates],
    )
    report = DataReport(
        created_at=datetime.now(UTC),
        replay=config.replay,
        lean_command=lean_command,
        valid_fraction=config.valid_fraction,
        split_salt=config.split_salt,
        contrastive_min_depth=config.contrastive_min_depth,
        sources=reports,
        theorems=len(index.theorems),
        pairs=len(builder.pairs),
        splits=dict(sorted(splits.items())),
        depth_histogram=dict(sorted(histogram.items())),
        contrastive=len(contrastive),
        overlaps=collection.overlaps,
        benchmarks=collection.benchmarks,
        warnings=warnings,
        elapsed_s=round(elapsed_s, 3),
    )
    pool = ContrastivePool(min_depth=config.contrastive_min_depth, theorems=contrastive)
    return PreparedData(index=index, pairs=builder.pairs, contrastive=pool, report=report)


def write_prepared(folder: Path, prepared: PreparedData) -> None:
    """Write the prepared-data layout (burnqed.data.pairs) into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    write_text_atomic(folder / THEOREMS_FILE, prepared.index.model_dump_json(indent=2, exclude_none=True) + "\n")
    write_pairs(folder / PAIRS_FILE, prepared.pairs)
    write_text_atomic(folder / CONTRASTIVE_FILE, prepared.contrastive.model_dump_json(indent=2) + "\n")
    write_text_atomic(folder / REPORT_FILE, prepared.report.model_dump_json(indent=2) + "\n")


def state_key(state: str) -> str:
    """Dedup key of a state: whitespace runs collapsed."""
    return " ".join(state.split())


class _PairBuilder:
    """Collects pairs, deduplicating by (theorem, state, tactic) and counting per source."""

    def __init__(self, reports: list[SourceReport]) -> None:
        self.reports = reports
        self.pairs: list[TacticPair] = []
        self.seen: set[tuple[str, str, str]] = set()

    def add(self, pair: TacticPair, source: int) -> None:
        key = (pair.theorem, state_key(pair.state_before), normalize_tactic(pair.tactic))
        report = self.reports[source]
        if key in self.seen:
            report.duplicate_pairs += 1
            return
        self.seen.add(key)
        self.pairs.append(pair)
        report.pairs += 1

    def add_traced(self, candidate: Candidate) -> list[int]:
        """The recorded steps of `candidate`; returns one length per (theorem, source) step sequence."""
        by_source: dict[int, int] = {}
        for ref in candidate.traced:
            position = by_source.get(ref.source, 0)
            by_source[ref.source] = position + 1
            step = ref.step
            pair = TacticPair(
                theorem=candidate.name,
                source=step.source or self.reports[ref.source].name,
                split=candidate.split,
                state_before=step.state_before,
                tactic=step.tactic,
                state_after=step.state_after,
                depth=step.depth if step.depth is not None else position,
            )
            self.add(pair, ref.source)
        return list(by_source.values())

    def add_replayed(self, candidate: Candidate, replay: TheoremReplay | None) -> list[int]:
        """The replayed proofs of `candidate`; returns the lengths of those that replayed."""
        if not candidate.proofs:
            return []
        lengths: list[int] = []
        outcomes = replay.proofs if replay is not None else ()
        for number, (ref, proof) in enumerate(zip(candidate.proofs, outcomes, strict=True)):
            report = self.reports[ref.source]
            report.proofs += 1
            if not proof.ok:
                report.proofs_failed += 1
                if len(report.replay_failures) < MAX_EXAMPLES:
                    report.replay_failures.append(ReplayFailure(
                        theorem=candidate.name, proof=number, step=proof.failed_step,
                        tactic=proof.failed_tactic, error=proof.error or "",
                    ))
                continue
            report.proofs_replayed += 1
            lengths.append(len(proof.steps))
            for step in proof.steps:
                pair = TacticPair(
                    theorem=candidate.name,
                    source=report.name,
                    split=candidate.split,
                    state_before=step.state_before,
                    tactic=step.tactic,
                    state_after=step.state_after,
                    depth=step.depth,
                )
                self.add(pair, ref.source)
        if not lengths:
            self.reports[candidate.proofs[0].source].replay_failed += 1
        return lengths


def _drop_proofs(collection: Collection, reason: str) -> None:
    for candidate in collection.candidates:
        for ref in candidate.proofs:
            report = collection.reports[ref.source]
            report.proofs_rejected[reason] = report.proofs_rejected.get(reason, 0) + 1
        candidate.proofs = []
