"""The data report (`report.json` of a prepared-data folder): what each source gave, what was rejected and why,
replay failures, pairs, splits and proof depths; and its plain-text table.

    report = read_report("runs/iter_0/data", store=store)        # any URI of a prepared folder
    print(render_report(report))

What each count counts (`rows`, `skipped_rows`, `rejected_rows`, `merged`, `overlaps`, `replay_failed`, …) is
docs/data.md's "The output folder".
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from burnqed import storage
from burnqed.errors import InputError

MAX_EXAMPLES = 10
MAX_OVERLAP_LINES = 20


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ReplayFailure(_Model):
    """The first failure of one proof's replay."""

    theorem: str = Field(description="Theorem name.")
    proof: int = Field(description="Index of the proof among the theorem's proofs (0-based).")
    step: int | None = Field(description="0-based index of the failing tactic; None when the start failed "
                             "or goals remained after the last tactic.")
    tactic: str | None = Field(description="The failing tactic, if one failed.")
    error: str = Field(description="Lean's first error line, or what went wrong.")


class BenchmarkOverlap(_Model):
    """A training theorem whose statement restates a benchmark theorem's (decontamination,
    `burnqed.data.decontaminate`): dropped by `data prepare`, or named by an eval of a model trained on it."""

    training: str = Field(description="The training theorem.")
    training_source: str = Field(description="Its source.")
    benchmark: str = Field(description="The benchmark theorem whose statement it restates (same normal form).")
    benchmark_source: str = Field(description="The benchmark: its source's label, or the name of the benchmark file "
                                  "or index it came from.")
    benchmark_split: str = Field(description="The benchmark theorem's split (test or valid).")
    statement: str = Field(description="The training theorem's statement.")
    route: str = Field(default="sources", description="How the benchmark arrived: 'sources' (a data source that holds "
                       "its theorems out), 'pipeline.benchmark' (what the iteration's evals evaluate) or 'eval' (the "
                       "theorems of an eval, against the training data of the model it evaluated).")


class CheckedBenchmark(_Model):
    """A benchmark the training statements were compared against (decontamination)."""

    route: str = Field(description="How it arrived: 'sources' or 'pipeline.benchmark'.")
    name: str = Field(description="Its source's label, or the name of its file or index.")
    uri: str | None = Field(default=None, description="The path or URI it was read from (None: a data source, or the "
                            "embedded benchmark).")
    theorems: int = Field(description="Its theorems with a statement (what was compared).")


class TrainingDataCheck(_Model):
    """An eval's decontamination check: the training data of the model it evaluated against its theorems."""

    data: str = Field(description="The prepared data the model was trained on (its export's and SFT output's "
                      "completion markers name it).")
    training_theorems: int = Field(description="Its training theorems compared (every split but test and the "
                                   "valid split of a benchmark source).")
    overlaps: list[BenchmarkOverlap] = Field(
        default_factory=list, description="Those whose statement restates a theorem of the eval (route 'eval').")


class SourceReport(_Model):
    """What one `data.sources` entry gave."""

    index: int = Field(description="Position in `data.sources` (0-based).")
    kind: str = Field(description="The converter (`SourceSpec.kind`).")
    name: str = Field(description="The source label recorded in the index and the pairs.")
    path: str | None = Field(description="The path, URI or hub name read.")
    rows: int = Field(default=0, description="Rows read (after `limit`).")
    skipped_rows: int = Field(default=0, description="Rows of other splits than `SourceSpec.split`.")
    rejected_rows: dict[str, int] = Field(default_factory=dict, description="Unusable rows by reason.")
    theorems: int = Field(default=0, description="Distinct theorems in the usable rows.")
    rejected_theorems: dict[str, int] = Field(default_factory=dict, description="Theorems dropped whole, by reason.")
    merged: int = Field(default=0, description="Theorems equal to an earlier one: proofs merged, entry not added.")
    renamed: int = Field(default=0, description="Theorems whose name another split of this source already used "
                         "with another statement: kept as NAME_SPLIT.")
    answer_bearing: int = Field(default=0, description="Benchmark theorems whose statement uses an answer slot (a "
                                "header definition `:= sorry`: docs/data.md, \"Answer-bearing problems\").")
    answer_produced: int = Field(default=0, description="Entries of those as written (task produced).")
    answer_given: int = Field(default=0, description="Entries of those with the reference answer written in (task "
                              "given, named NAME_given).")
    answer_without_reference: list[str] = Field(
        default_factory=list, description="Answer-bearing theorems with no reference answer under their slot: no "
        "answer-given entry.")
    kept: int = Field(default=0, description="Theorems this source added to the index.")
    statement_only: int = Field(default=0, description="Kept theorems with neither proofs nor recorded steps.")
    proofs: int = Field(default=0, description="Whole proofs to replay (distinct per theorem).")
    proofs_rejected: dict[str, int] = Field(
        default_factory=dict, description="Proofs dropped before replay, by reason (replay off, another statement)."
    )
    proofs_replayed: int = Field(default=0, description="Proofs that replayed in Lean to no goals.")
    proofs_failed: int = Field(default=0, description="Proofs whose replay failed (their pairs dropped).")
    replay_failed: int = Field(default=0, description="Theorems kept in the index whose every proof failed.")
    replay_failures: list[ReplayFailure] = Field(
        default_factory=list, description=f"The first {MAX_EXAMPLES} proof failures."
    )
    pairs: int = Field(default=0, description="Tactic pairs from this source, after deduplication.")
    duplicate_pairs: int = Field(default=0, description="Pairs dropped as duplicates (theorem, state, tactic).")
    examples: list[str] = Field(
        default_factory=list, description=f"The first {MAX_EXAMPLES} rejected rows/theorems, with where and why."
    )

    @property
    def rejected(self) -> int:
        return sum(self.rejected_rows.values()) + sum(self.rejected_theorems.values())


class SplitCounts(_Model):
    """Theorems and pairs of one split."""

    theorems: int = Field(default=0, description="Theorems in the index with this split.")
    pairs: int = Field(default=0, description="Tactic pairs with this split.")


class DataReport(_Model):
    """`report.json`: the whole account of one `burnqed data prepare` run."""

    created_at: datetime = Field(description="When the data was prepared (UTC).")
    replay: bool = Field(description="`data.replay`: whole proofs were replayed through Lean.")
    lean_command: list[str] | None = Field(description="argv of the Lean workers; None when Lean was not started.")
    valid_fraction: float = Field(description="`data.valid_fraction`.")
    split_salt: str = Field(description="`data.split_salt`.")
    contrastive_min_depth: int = Field(description="`data.contrastive_min_depth`.")
    sources: list[SourceReport] = Field(description="One entry per source, in order.")
    theorems: int = Field(description="Theorems in theorems.json.")
    pairs: int = Field(description="Rows of pairs.parquet.")
    splits: dict[str, SplitCounts] = Field(description="train / valid / test counts.")
    depth_histogram: dict[int, int] = Field(
        description="Proof length in tactics → number of proofs (replayed proofs, and recorded theorems' step "
        "counts)."
    )
    contrastive: int = Field(description="Theorems in contrastive.json.")
    overlaps: list[BenchmarkOverlap] = Field(
        default_factory=list,
        description="Training theorems dropped because they restate a benchmark theorem (every one of them).",
    )
    benchmarks: list[CheckedBenchmark] = Field(
        default_factory=list, description="The benchmarks the training statements were compared against, by route "
        "(empty in reports written before routes were recorded).")
    warnings: list[str] = Field(default_factory=list, description="Sources that gave nothing, and why.")
    elapsed_s: float = Field(description="Wall time of the preparation.")


def read_report(uri: str, *, store: storage.Store) -> DataReport:
    """The report of a prepared-data folder (path or URI), or of a report file itself."""
    from burnqed.data.pairs import REPORT_FILE  # pyarrow: not loaded by an eval.json's reader (TrainingDataCheck)

    target = uri if uri.endswith(".json") else storage.join(uri, REPORT_FILE)
    if not store.exists(target):
        raise InputError(f"{uri} holds no data report ({REPORT_FILE}); run `burnqed data prepare --output {uri}` first")
    return store.read_model(target, DataReport, "data report", hint="written by `burnqed data prepare`")


def _reasons(counts: dict[str, int], limit: int = 3) -> str:
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    text = ", ".join(f"{reason} {count}" for reason, count in ordered[:limit])
    return text + (", …" if len(ordered) > limit else "")


def summary_line(source: SourceReport) -> str:
    """One line per source for error messages: rows, rejections and why, pairs."""
    rejections = {**source.rejected_rows, **source.rejected_theorems}
    why = f" ({_reasons(rejections)})" if rejections else ""
    return (f"source {source.index} {source.name}: {source.rows} rows, {source.rejected} rejected{why}, "
            f"{source.kept} kept, {source.pairs} pairs")


def render_report(report: DataReport, width: int = 120) -> str:
    """A plain-text table (one row per source) and lines for splits, depths, the contrastive pool and warnings."""
    from rich.table import Table

    table = Table(title=f"prepared data · {report.theorems} theorems · {report.pairs} pairs", title_justify="left")
    for header in ("source", "rows", "rejected", "kept", "proofs ok/failed", "replay failed", "pairs"):
        table.add_column(header, justify="left" if header in ("source", "rejected") else "right")
    for source in report.sources:
        rejections = {**source.rejected_rows, **source.rejected_theorems}
        rejected = f"{source.rejected}" + (f" ({_reasons(rejections)})" if rejections else "")
        table.add_row(
            f"{source.index} {source.name}",
            str(source.rows),
            rejected,
            str(source.kept),
            f"{source.proofs_replayed}/{source.proofs_failed}",
            str(source.replay_failed),
            str(source.pairs),
        )
    lines = [
        "splits: " + ", ".join(f"{split} {counts.theorems} theorems / {counts.pairs} pairs"
                               for split, counts in sorted(report.splits.items())),
        "proof lengths: " + (", ".join(f"{depth}:{count}" for depth, count in sorted(report.depth_histogram.items()))
                             or "none"),
        f"contrastive pool (proofs of ≥ {report.contrastive_min_depth} tactics): {report.contrastive} theorems",
        f"lean: {' '.join(report.lean_command) if report.lean_command else 'not started'}; "
        f"{report.elapsed_s:.1f}s",
    ]
    lines.extend(answer_lines(report))
    lines.extend(decontamination_lines(report))
    for overlap in report.overlaps[:MAX_OVERLAP_LINES]:
        lines.append(f"  {overlap.training} ({overlap.training_source}) = {overlap.benchmark} "
                     f"({overlap.benchmark_source}, {overlap.benchmark_split})")
    if len(report.overlaps) > MAX_OVERLAP_LINES:
        lines.append(f"  … {len(report.overlaps) - MAX_OVERLAP_LINES} more (--json lists them all)")
    lines.extend(f"warning: {warning}" for warning in report.warnings)
    return _to_text(table, width) + "\n".join(lines) + "\n"


def answer_lines(report: DataReport) -> list[str]:
    """One line per source with answer-bearing theorems: `answers: source 0 putnambench: 346 answer-bearing, 346
    produced entries, 346 given entries`, and the theorems that gave no given entry."""
    lines: list[str] = []
    for source in report.sources:
        if not source.answer_bearing:
            continue
        lines.append(f"answers: source {source.index} {source.name}: {source.answer_bearing} answer-bearing, "
                     f"{source.answer_produced} produced entries, {source.answer_given} given entries")
        if source.answer_without_reference:
            lines.append("  no reference answer under the slot (no given entry): "
                         + ", ".join(source.answer_without_reference))
    return lines


def decontamination_lines(report: DataReport) -> list[str]:
    """What prepare compared the training statements with and how many it dropped, by route: `decontamination: 2
    training theorems dropped as restating a benchmark theorem (sources: 0, pipeline.benchmark: 2)` and the
    benchmarks compared with; nothing when no benchmark was compared (and none dropped)."""
    if not report.benchmarks and not report.overlaps:
        return []
    routes = dict.fromkeys([*(b.route for b in report.benchmarks), *(o.route for o in report.overlaps)])
    counts = ", ".join(f"{route}: {sum(o.route == route for o in report.overlaps)}" for route in routes)
    lines = [f"decontamination: {len(report.overlaps)} training theorems dropped as restating a benchmark theorem "
             f"({counts})"]
    if report.benchmarks:
        lines.append("  compared with: " + ", ".join(f"{b.name} ({b.route}, {b.theorems} theorems)"
                                                     for b in report.benchmarks))
    return lines


def _to_text(renderable: object, width: int) -> str:
    import io

    from rich.console import Console

    buffer = io.StringIO()
    Console(file=buffer, width=width, color_system=None, force_terminal=False).print(renderable)
    return "".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines())
