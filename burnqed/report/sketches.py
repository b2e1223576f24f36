"""The report's sketch table (docs/pipeline.md, "Report and go/no-go gates"; docs/search.md, "Sketch search"): for each
sketch-mode search of an iteration, what the planner's sketches became, what their subgoals' searches proved and how
often the subgoal cache served a proof.

    rows = sketch_rows(at, iteration, [("sketch+ebm", result)], {"sketch+ebm": uri}, store=store)
    lines = sketch_markdown(rows)
    counts = sketch_counts(results)              # one source's TheoremResults (their `sketches`): SketchCounts
    counts.hit_rate                              # cache hits per lookup; None = not measured (never 0 %)

A row per source (the iteration's search trajectories when they are sketch searches, each sketch-mode eval at its
largest budget, read from the trajectories beside its result): searches, sketches tried, elaborated, refused,
unreadable and rejected by Lean, re-plans, subgoals and how each proved one was proved (its own search, the cache,
kept from an earlier sketch), cache hits of lookups, theorems proved and those proved through a sketch. A source
whose sketches cannot be counted (trajectories missing or unfinished, a sketch-mode search that records no sketch)
is named with why, never counted as zeros. With no sketch-mode search, no section.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, Field

from burnqed import storage
from burnqed.eval.result import EvalResult
from burnqed.layout import Layout, trajectories_beside
from burnqed.records.results import FailureReason, SketchAttempt, SketchOutcome, SubgoalSource, TheoremResult
from burnqed.report.section import ReportSection
from burnqed.search.modes import MODES

MAX_NAMED = 5  # theorems named per inconsistency before "… and N more"


class SketchCounts(BaseModel):
    """What one source's sketch-mode searches did (`sketch_counts`)."""

    searches: int = Field(ge=0, description="Sketch-mode theorem searches (with pass@N, each attempt).")
    sketches: int = Field(ge=0, description="Sketches the planner wrote.")
    elaborated: int = Field(ge=0, description="Sketches Lean elaborated into subgoals.")
    refused: int = Field(ge=0, description="Sketches the tactic guard refused before Lean.")
    unreadable: int = Field(ge=0, description="Completions that held no sketch.")
    rejected: int = Field(ge=0, description="Sketches Lean rejected (or its worker failed on).")
    replans: int = Field(ge=0, description="Re-plans: a search's planner rounds after its first "
                         "(search.sketch_rounds).")
    replanned_sketches: int = Field(ge=0, description="Sketches written in a re-plan (round > 0).")
    subgoals: int = Field(ge=0, description="Subgoals of the elaborated sketches (a kept subgoal counts in each "
                          "sketch that has it).")
    by_search: int = Field(ge=0, description="Subgoals proved by their own search.")
    from_cache: int = Field(ge=0, description="Subgoals proved by a cached proof, re-checked in their context: the "
                            "cache's hits.")
    kept: int = Field(ge=0, description="Subgoals proved by an earlier sketch of the same search, kept.")
    lookups: int = Field(ge=0, description="Subgoals the cache was asked for (`looked_up`): each one the search "
                         "reached (in order, up to the first not proved) that it had not kept.")
    proved: int = Field(ge=0, description="Searches that proved their theorem.")
    via_sketch: int = Field(ge=0, description="Searches whose proof is an assembled sketch (a verified sketch).")

    @property
    def hit_rate(self) -> float | None:
        """Cache hits per lookup; None when the cache was asked nothing (not measured, never 0 %)."""
        return self.from_cache / self.lookups if self.lookups else None


class SketchRow(BaseModel):
    """One source's sketch counts, or why they cannot be given (`problem`: then `counts` is None)."""

    iteration: int
    source: str = Field(description="'search' (the iteration's trajectories) or the eval's label.")
    budget: str | None = Field(default=None, description="The eval's largest budget with its unit (None: the "
                               "iteration's search).")
    trajectories: str = Field(description="Where the searches' results were read.")
    problem: str | None = Field(default=None, description="Why the sketches are not counted; None when they are.")
    counts: SketchCounts | None = None


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:MAX_NAMED])
    return shown + (f" and {len(names) - MAX_NAMED} more" if len(names) > MAX_NAMED else "")


def inconsistencies(results: Sequence[TheoremResult]) -> list[str]:
    """What the sketch-mode results among `results` record that a sketch search cannot have done, one sentence per
    kind, naming the theorems: no sketch at all (only a statement Lean could not start on is searched without one), a
    verified sketch with a subgoal unproved or not elaborated, a proved subgoal with no source or an unproved one with
    one. Empty when they are consistent."""
    sketched = [r for r in results if MODES[r.mode].plans]
    found: list[str] = []
    silent = [r.name for r in sketched if not r.sketches and r.failure_reason is not FailureReason.START_ERROR]
    if silent:
        found.append(f"{len(silent)} sketch-mode searches record no sketch ({_names(silent)})")
    verified = [r.name for r in sketched if any(s.verified and (s.outcome is not SketchOutcome.ELABORATED or not all(
        g.proved for g in s.subgoals)) for s in r.sketches)]
    if verified:
        found.append(f"{len(verified)} record a verified sketch that was not elaborated or left a subgoal unproved "
                     f"({_names(verified)})")
    sources = [r.name for r in sketched if any((g.source is None) == g.proved for s in r.sketches
                                               for g in s.subgoals)]
    if sources:
        found.append(f"{len(sources)} record a proved subgoal without its source or an unproved one with a source "
                     f"({_names(sources)})")
    return found


def looked_up(sketch: SketchAttempt) -> int:
    """How many of `sketch`'s subgoals the cache was asked for: sketch search proves them in order, the first not
    proved ending the sketch, and asks the cache for each one it reaches that an earlier sketch of the theorem did not
    prove in the same context (kept); 0 for a sketch Lean did not elaborate."""
    if sketch.outcome is not SketchOutcome.ELABORATED:
        return 0
    asked = 0
    for subgoal in sketch.subgoals:
        asked += subgoal.source is not SubgoalSource.KEPT
        if not subgoal.proved:
            break
    return asked


def sketch_counts(results: Sequence[TheoremResult]) -> SketchCounts:
    """The counts of the sketch-mode results among `results` (other modes' are left out); check them with
    `inconsistencies` first: these count what is recorded."""
    sketched = [r for r in results if MODES[r.mode].plans]
    sketches = [s for r in sketched for s in r.sketches]
    outcomes = {outcome: sum(1 for s in sketches if s.outcome is outcome) for outcome in SketchOutcome}
    subgoals = [g for s in sketches if s.outcome is SketchOutcome.ELABORATED for g in s.subgoals]
    by_source = {source: sum(1 for g in subgoals if g.proved and g.source is source) for source in SubgoalSource}
    return SketchCounts(
        searches=len(sketched), sketches=len(sketches), elaborated=outcomes[SketchOutcome.ELABORATED],
        refused=outcomes[SketchOutcome.REFUSED], unreadable=outcomes[SketchOutcome.UNREADABLE],
        rejected=outcomes[SketchOutcome.ERROR],
        replans=sum(len({s.round for s in r.sketches if s.round > 0}) for r in sketched),
        replanned_sketches=sum(1 for s in sketches if s.round > 0), subgoals=len(subgoals),
        by_search=by_source[SubgoalSource.SEARCH], from_cache=by_source[SubgoalSource.CACHE],
        kept=by_source[SubgoalSource.KEPT], lookups=sum(looked_up(s) for s in sketches),
        proved=sum(1 for r in sketched if r.proved),
        via_sketch=sum(1 for r in sketched if r.proved and any(s.verified for s in r.sketches)))


def sketch_headline(rows: Sequence[SketchRow]) -> list[str]:
    """The headline's line for each source whose planner's sketches never elaborated (its row's counts: sketch-mode
    searches ran, none of their sketches became subgoals), saying what they became instead; nothing else."""
    lines = []
    for row in rows:
        counts = row.counts
        if counts is None or counts.searches == 0 or counts.elaborated > 0:
            continue
        budget = f" at {row.budget}" if row.budget else ""
        lines.append(f"  warning: {row.source}{budget}: none of the {counts.sketches} sketches of {counts.searches} "
                     f"sketch searches elaborated ({counts.unreadable} held no sketch, {counts.rejected} rejected by "
                     f"Lean, {counts.refused} refused by the guard): the planner proved nothing through a sketch")
    return lines


def read_sketch_results(prefixes: Sequence[str], *, store: storage.Store) -> tuple[list[TheoremResult], str | None]:
    """The TheoremResults under every trajectory prefix of one source (an eval's passes), or why they cannot be
    read: a prefix missing or unfinished (no completion marker)."""
    from burnqed.trajectory.reader import is_complete, read_results

    results: list[TheoremResult] = []
    for prefix in prefixes:
        if not store.exists(prefix):
            return [], f"its trajectories {prefix} do not exist (an eval run with --no-trajectories-out keeps none)"
        if not is_complete(prefix, store=store):
            return [], f"its trajectories {prefix} are not finished (no {storage.MARKER_NAME})"
        results += read_results(prefix, store=store)
    return results, None


def source_row(iteration: int, source: str, budget: str | None, prefixes: Sequence[str], *,
               store: storage.Store) -> SketchRow:
    """One source's row from its trajectory prefixes (`prefixes[0]` names it)."""
    row = SketchRow(iteration=iteration, source=source, budget=budget, trajectories=prefixes[0])
    results, problem = read_sketch_results(prefixes, store=store)
    if problem is None and not any(MODES[r.mode].plans for r in results):
        problem = f"its trajectories {prefixes[0]} hold no sketch-mode search"
    if problem is None:
        found = inconsistencies(results)
        problem = "; ".join(found) if found else None
    if problem is not None:
        return row.model_copy(update={"problem": problem})
    return row.model_copy(update={"counts": sketch_counts(results)})


def eval_prefixes(uri: str, result: EvalResult) -> list[str]:
    """The trajectory prefixes of the eval whose result is at `uri`: beside it, one per pass."""
    from burnqed.eval.resume import pass_prefix

    beside = trajectories_beside(uri)
    return [pass_prefix(beside, result.pass_n, k) for k in range(result.pass_n)]


def sketch_rows(at: Layout, iteration: int, evals: Sequence[tuple[str, EvalResult]], uris: Mapping[str, str], *,
                store: storage.Store) -> list[SketchRow]:
    """The sketch rows of `iteration`: its search trajectories when they hold sketch searches, and each of its
    sketch-mode `evals` (label, result), whose result URIs `uris` gives by label."""
    from burnqed.trajectory.reader import is_complete, read_results

    rows: list[SketchRow] = []
    search = at.trajectories(iteration)
    if is_complete(search, store=store) and any(MODES[r.mode].plans
                                                for r in read_results(search, store=store)):
        rows.append(source_row(iteration, "search", None, [search], store=store))
    for label, result in evals:
        if not MODES[result.mode].plans:
            continue
        budget = f"{result.budgets[-1].budget} {result.budget_unit}"
        uri = uris.get(label)
        if uri is None:
            rows.append(SketchRow(iteration=iteration, source=label, budget=budget, trajectories="–",
                                  problem="the report was not told where its result lies: its trajectories cannot "
                                  "be found"))
            continue
        rows.append(source_row(iteration, label, budget, eval_prefixes(uri, result), store=store))
    return rows


def hit_rate_text(rate: float | None) -> str:
    """The cache's hit rate as tables show it: `25.0 %`, or `not measured` when nothing was looked up (None)."""
    return "not measured" if rate is None else f"{100 * rate:.1f} %"


def sketch_markdown(rows: Sequence[SketchRow]) -> list[str]:
    """report.md's sketch section (nothing when no search of the iteration was a sketch search)."""
    if not rows:
        return []
    lines = ["## Sketches: the planner's subgoals, their searches and the subgoal cache", "",
             "Per sketch-mode source (an eval at its largest budget; with pass@N each attempt is a search): the "
             "sketches the planner wrote and what became of them, re-plans (planner rounds after a search's first), "
             "the elaborated sketches' subgoals and how each proved one was proved, and the subgoal cache's hits of "
             "its lookups (every subgoal the search reached, in order up to the first not proved, that it had not "
             "kept from an earlier sketch; no lookup: not measured).", ""]
    counted = [row for row in rows if row.counts is not None]
    if counted:
        lines += ["| iteration | source | budget | searches | sketches | elaborated | refused | unreadable | rejected "
                  "by Lean | re-plans (sketches) | subgoals | proved by search | from cache | kept | cache hits / "
                  "lookups | hit rate | proved | via a sketch |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for row in counted:
            c = row.counts
            assert c is not None
            lines.append(f"| {row.iteration} | {row.source} | {row.budget or '–'} | {c.searches} | {c.sketches} | "
                         f"{c.elaborated} | {c.refused} | {c.unreadable} | {c.rejected} | {c.replans} "
                         f"({c.replanned_sketches}) | {c.subgoals} | {c.by_search} | {c.from_cache} | {c.kept} | "
                         f"{c.from_cache} / {c.lookups} | {hit_rate_text(c.hit_rate)} | {c.proved} | {c.via_sketch} |")
        lines.append("")
    for row in rows:
        if row.problem is not None:
            lines.append(f"- **{row.source}** (iteration {row.iteration}): its sketches are not counted: "
                         f"{row.problem}.")
    if len(counted) < len(rows):
        lines.append("")
    return lines


SKETCH_SECTION: ReportSection[list[SketchRow]] = ReportSection(
    field="sketches", build=lambda got: sketch_rows(got.at, got.iteration, got.evals, got.eval_uris, store=got.store),
    markdown=sketch_markdown)

__all__ = ["SKETCH_SECTION", "SketchCounts", "SketchRow", "eval_prefixes", "hit_rate_text", "inconsistencies",
           "looked_up", "read_sketch_results", "sketch_counts", "sketch_headline", "sketch_markdown", "sketch_rows",
           "source_row"]
