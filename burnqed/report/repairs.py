"""The report's repair table (docs/pipeline.md, "Report and go/no-go gates"; docs/search.md, "Repair"): for each search
of an iteration that revised failed proofs with Lean's messages, what it revised and what the revisions proved.

    rows = repair_rows(at, iteration, [("whole+repair", result)], store=store)
    lines = repair_markdown(rows)

A row per source (the iteration's search trajectories, each eval that repaired): theorems, failed proofs revised,
revisions sampled, theorems proved, by a fresh attempt and by the k-th revision. With none, no table.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from pydantic import BaseModel, Field

from burnqed import storage
from burnqed.eval.result import EvalResult
from burnqed.layout import Layout
from burnqed.report.section import ReportSection


class RepairRow(BaseModel):
    """What one source's repair did."""

    iteration: int
    source: str = Field(description="'search' (the iteration's trajectories) or the eval's label.")
    theorems: int = Field(ge=0, description="Theorems searched.")
    repaired: int = Field(ge=0, description="Failed proofs revised with Lean's messages (repair chains started).")
    revisions: int = Field(ge=0, description="Revisions sampled.")
    proved: int = Field(ge=0, description="Theorems proved.")
    by_revision: dict[int, int] = Field(
        default_factory=dict, description="Theorems proved, by the counted proof's place in its chain: 0 a fresh "
        "attempt, k its k-th revision.")


def _row(iteration: int, source: str, results: Sequence[tuple[int, int, bool, int | None]]) -> RepairRow | None:
    """A row from (repaired, revisions, proved, revision_at_proof) per theorem; None when nothing was revised."""
    if not any(revisions for _, revisions, _, _ in results):
        return None
    counted = Counter(at for _, _, proved, at in results if proved and at is not None)
    return RepairRow(iteration=iteration, source=source, theorems=len(results),
                     repaired=sum(r for r, _, _, _ in results), revisions=sum(v for _, v, _, _ in results),
                     proved=sum(1 for _, _, proved, _ in results if proved), by_revision=dict(sorted(counted.items())))


def repair_rows(at: Layout, iteration: int, evals: Sequence[tuple[str, EvalResult]], *,
                store: storage.Store) -> list[RepairRow]:
    """The repair rows of `iteration`: its search trajectories (when complete) and its `evals` (label, result)."""
    from burnqed.trajectory.reader import is_complete, read_results

    rows: list[RepairRow] = []
    uri = at.trajectories(iteration)
    if is_complete(uri, store=store):
        found = [(r.repaired, r.revisions, r.proved, r.revision_at_proof) for r in read_results(uri, store=store)]
        row = _row(iteration, "search", found)
        if row is not None:
            rows.append(row)
    for label, result in evals:
        found = [(t.repaired or 0, t.revisions or 0, t.proved, t.revision_at_proof) for t in result.per_theorem]
        row = _row(iteration, label, found)
        if row is not None:
            rows.append(row)
    return rows


def repair_markdown(rows: Sequence[RepairRow]) -> list[str]:
    """report.md's repair section (nothing when no search revised a proof)."""
    if not rows:
        return []
    depth = max((k for row in rows for k in row.by_revision), default=0)
    heads = ["fresh attempt", *(f"revision {k}" for k in range(1, depth + 1))]
    lines = ["## Repair: failed proofs revised with Lean's messages", "",
             "Proved theorems by where their counted proof stands in its repair chain (search.repair_rounds).", "",
             "| iteration | source | theorems | proofs revised | revisions | proved | " + " | ".join(heads) + " |",
             "|---|---|---|---|---|---|" + "---|" * len(heads)]
    for row in rows:
        cells = [str(row.by_revision.get(k, 0)) for k in range(depth + 1)]
        lines.append(f"| {row.iteration} | {row.source} | {row.theorems} | {row.repaired} | {row.revisions} | "
                     f"{row.proved} | " + " | ".join(cells) + " |")
    lines.append("")
    return lines


REPAIR_SECTION: ReportSection[list[RepairRow]] = ReportSection(
    field="repairs", build=lambda got: repair_rows(got.at, got.iteration, got.evals, store=got.store),
    markdown=repair_markdown)
