"""What a trajectory holds, in numbers: proof rate, outcomes, labels, proof depths, branching, time split, and what the
search cost: generated tokens, Lean requests and proofs sampled, in total and per search mode.

    s = summarize("runs/r1/iter_0/trajectories", store=store)
    print(render_summary(s))
    outcomes_by_depth("runs/r1/iter_0/trajectories", store=store)   # {depth: (edges by outcome, on a proof path)}

Theorem-level numbers come from the manifests; row-level numbers stream the committed parts one part and a few
columns at a time (never the state/tactic text), so memory stays bounded by one part. Each part is checked against
its manifest's SHA-256 before it is decoded (`read_part`).
"""

from __future__ import annotations

import io
from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, Field

from burnqed.records.results import EdgeOutcome, Label
from burnqed.storage import Store
from burnqed.trajectory.reader import read_marker, read_part, scan_prefix


class ModeSummary(BaseModel):
    """The theorems of one search mode in a trajectory."""

    theorems: int = Field(description="Theorems searched in this mode.")
    proved: int = Field(description="Theorems proved.")
    tokens: int = Field(description="Tokens generated.")
    lean_calls: int = Field(description="Lean requests.")
    proofs_sampled: int = Field(description="Whole proofs sampled.")


class TrajectorySummary(BaseModel):
    """Aggregate numbers of one trajectory prefix."""

    uri: str = Field(description="The summarised prefix.")
    parts: int = Field(description="Committed parts.")
    theorems: int = Field(description="Theorems recorded.")
    proved: int = Field(description="Theorems proved.")
    proof_rate: float = Field(description="proved / theorems (0 when there are none).")
    edges: int = Field(description="Rows (tactic applications).")
    outcomes: dict[str, int] = Field(description="Rows by outcome (every outcome listed).")
    labels: dict[str, int] = Field(description="Rows by label (every label listed).")
    proof_depths: dict[int, int] = Field(description="Proved theorems by proof length in tactics.")
    expansions: int = Field(description="Distinct (theorem, parent node) pairs: nodes that were expanded.")
    candidates_mean: float = Field(description="Mean edges per expansion (0 when there are none).")
    candidates_median: float = Field(description="Median edges per expansion (0 when there are none).")
    time_s: float = Field(description="Total search wall time over theorems.")
    policy_s: float = Field(description="Total time waiting for the policy.")
    lean_s: float = Field(description="Total time waiting for Lean.")
    value_s: float = Field(description="Total time waiting for the value model.")
    policy_frac: float = Field(description="policy_s / time_s (0 when time_s is 0).")
    lean_frac: float = Field(description="lean_s / time_s.")
    value_frac: float = Field(description="value_s / time_s.")
    failure_reasons: dict[str, int] = Field(description="Unproved theorems by failure reason.")
    tokens: int = Field(description="Tokens the policy generated over theorems (every completion, used or not).")
    lean_calls: int = Field(description="Requests sent to Lean over theorems.")
    proofs_sampled: int = Field(description="Whole proofs sampled over theorems (whole and hybrid modes).")
    tokens_per_proof: float = Field(description="tokens / proved: generated tokens per proved theorem (0 with none).")
    modes: dict[str, ModeSummary] = Field(description="The same numbers per search mode, for modes present.")
    repaired: int = Field(default=0, description="Failed proofs revised with Lean's messages (search.repair_rounds).")
    revisions: int = Field(default=0, description="Revisions sampled.")
    proved_by_revision: dict[int, int] = Field(
        default_factory=dict, description="Proved theorems by the counted proof's place in its repair chain (0: a "
        "fresh attempt), when some search of the prefix revised.")
    throughput: dict[str, Any] | None = Field(
        default=None, description="The search's run-level counters (theorems in flight, policy batches, Lean "
        "workers) from `_SUCCESS.json`, when the prefix is a finished search (burnqed.search.monitor)."
    )
    soundness_alarms: list[str] = Field(
        default_factory=list, description="The proofs the search verified and comparator refused, one line each, "
        "when the prefix is a merge that judged them (`_SUCCESS.json`'s `extra[\"judge\"]`, stages.judge_merge).")


def _median(histogram: Counter[int]) -> float:
    """Median of the multiset given as value → count (mean of the two middle values for an even size)."""
    total = sum(histogram.values())
    if total == 0:
        return 0.0
    wanted = [(total - 1) // 2, total // 2]
    found: list[int] = []
    seen = 0
    for value in sorted(histogram):
        seen += histogram[value]
        while len(found) < 2 and wanted[len(found)] < seen:
            found.append(value)
    return (found[0] + found[1]) / 2


def _count(counter: Counter[str], column: pa.ChunkedArray) -> None:
    for item in pc.value_counts(column).to_pylist():
        counter[str(item["values"])] += int(item["counts"])


def summarize(uri: str, *, store: Store) -> TrajectorySummary:
    """Summarise the committed parts under `uri` (empty numbers for a prefix with none)."""
    fs, root = store.resolve(uri)
    manifests = scan_prefix(fs, root)[0]
    results = [result for manifest in manifests for result in manifest.theorems]
    outcomes: Counter[str] = Counter({outcome.value: 0 for outcome in EdgeOutcome})
    labels: Counter[str] = Counter({label.value: 0 for label in Label})
    branching: Counter[int] = Counter()  # edges per expansion → expansions
    for manifest in manifests:
        part = read_part(fs, root, uri, manifest, ["outcome", "label", "theorem", "parent_id"])
        _count(outcomes, part.column("outcome"))
        _count(labels, part.column("label"))
        # A theorem lives in exactly one part, so grouping within a part is grouping overall.
        if part.num_rows:
            keys = part.select(["theorem", "parent_id"])
            sizes = keys.group_by(["theorem", "parent_id"]).aggregate([([], "count_all")]).column("count_all")
            for item in pc.value_counts(sizes).to_pylist():
                branching[int(item["values"])] += int(item["counts"])
    depths: Counter[int] = Counter()
    failures: Counter[str] = Counter()
    for result in results:
        if result.proved:
            depths[result.depth if result.depth is not None else len(result.tactics)] += 1
        else:
            failures[result.failure_reason.value if result.failure_reason else "unknown"] += 1
    proved = sum(result.proved for result in results)
    expansions = sum(branching.values())
    time_s = sum(result.time_s for result in results)
    policy_s = sum(result.policy_s for result in results)
    lean_s = sum(result.lean_s for result in results)
    value_s = sum(result.value_s for result in results)
    modes: dict[str, ModeSummary] = {}
    for mode in sorted({result.mode.value for result in results}):
        mine = [result for result in results if result.mode.value == mode]
        modes[mode] = ModeSummary(theorems=len(mine), proved=sum(r.proved for r in mine),
                                  tokens=sum(r.tokens for r in mine), lean_calls=sum(r.lean_calls for r in mine),
                                  proofs_sampled=sum(r.proofs_sampled for r in mine))
    tokens = sum(result.tokens for result in results)
    return TrajectorySummary(
        uri=uri,
        parts=len(manifests),
        theorems=len(results),
        proved=proved,
        proof_rate=proved / len(results) if results else 0.0,
        edges=sum(manifest.rows for manifest in manifests),
        outcomes=dict(outcomes),
        labels=dict(labels),
        proof_depths=dict(sorted(depths.items())),
        expansions=expansions,
        candidates_mean=sum(size * n for size, n in branching.items()) / expansions if expansions else 0.0,
        candidates_median=_median(branching),
        time_s=time_s,
        policy_s=policy_s,
        lean_s=lean_s,
        value_s=value_s,
        policy_frac=policy_s / time_s if time_s else 0.0,
        lean_frac=lean_s / time_s if time_s else 0.0,
        value_frac=value_s / time_s if time_s else 0.0,
        failure_reasons=dict(sorted(failures.items())),
        tokens=tokens,
        lean_calls=sum(result.lean_calls for result in results),
        proofs_sampled=sum(result.proofs_sampled for result in results),
        tokens_per_proof=tokens / proved if proved else 0.0,
        modes=modes,
        repaired=sum(result.repaired for result in results),
        revisions=sum(result.revisions for result in results),
        proved_by_revision=dict(sorted(Counter(
            result.revision_at_proof for result in results
            if result.proved and result.revision_at_proof is not None).items())) if any(
            result.revisions for result in results) else {},
        throughput=_throughput(uri, store),
        soundness_alarms=_alarms(uri, store),
    )


def outcomes_by_depth(uri: str, *, store: Store) -> dict[int, tuple[Counter[str], int]]:
    """Depth → (edges by outcome, edges on a verified proof path) over the committed parts under `uri`: where a
    search spends its tactics and where it proves. Streams three columns part by part, like `summarize`."""
    fs, root = store.resolve(uri)
    found: dict[int, tuple[Counter[str], int]] = {}
    for manifest in scan_prefix(fs, root)[0]:
        part = read_part(fs, root, uri, manifest, ["depth", "outcome", "on_proof_path"])
        if not part.num_rows:
            continue
        counts = part.group_by(["depth", "outcome"]).aggregate([([], "count_all")])
        for depth, outcome, n in zip(*(counts.column(name).to_pylist() for name in ("depth", "outcome", "count_all")),
                                     strict=True):
            found.setdefault(int(depth), (Counter(), 0))[0][str(outcome)] += int(n)
        on_path = part.filter(part.column("on_proof_path")).column("depth")
        for item in pc.value_counts(on_path).to_pylist():
            outcomes, path = found.setdefault(int(item["values"]), (Counter(), 0))
            found[int(item["values"])] = (outcomes, path + int(item["counts"]))
    return dict(sorted(found.items()))


def _throughput(uri: str, store: Store) -> dict[str, Any] | None:
    marker = read_marker(uri, store=store)
    found = marker.extra.get("throughput") if marker is not None else None
    return found if isinstance(found, dict) else None


def _alarms(uri: str, store: Store) -> list[str]:
    """The soundness alarms a judged merge recorded in its marker (none otherwise)."""
    marker = read_marker(uri, store=store)
    judged = marker.extra.get("judge") if marker is not None else None
    alarms = judged.get("alarms") if isinstance(judged, dict) else None
    return [str(line) for line in alarms] if isinstance(alarms, list) else []


def render_summary(s: TrajectorySummary, width: int = 100) -> str:
    """A plain-text report of `s` for the terminal (rich tables, no colour codes)."""
    from rich.console import Console
    from rich.table import Table

    buffer = io.StringIO()
    console = Console(file=buffer, width=width, color_system=None, force_terminal=False)
    console.print(f"trajectory {s.uri}: {s.parts} parts")
    console.print(f"proved {s.proved}/{s.theorems} ({s.proof_rate:.1%}), {s.edges} edges, {s.expansions} expansions, "
                  f"candidates per expansion mean {s.candidates_mean:.2f} median {s.candidates_median:g}")

    def table(title: str, rows: list[tuple[str, str]], header: tuple[str, str]) -> None:
        grid = Table(title=title, title_justify="left")
        grid.add_column(header[0])
        grid.add_column(header[1], justify="right")
        for key, value in rows:
            grid.add_row(key, value)
        console.print(grid)

    def share(n: int, total: int) -> str:
        return f"{n} ({n / total:.1%})" if total else str(n)

    table("edges by outcome", [(k, share(v, s.edges)) for k, v in s.outcomes.items()], ("outcome", "edges"))
    table("edges by label", [(k, share(v, s.edges)) for k, v in s.labels.items()], ("label", "edges"))
    table("proofs by depth", [(str(k), str(v)) for k, v in s.proof_depths.items()], ("depth", "proofs"))
    unproved = s.theorems - s.proved
    table("unproved by reason", [(k, share(v, unproved)) for k, v in s.failure_reasons.items()],
          ("reason", "theorems"))
    table("time", [("total", f"{s.time_s:.1f} s"), ("policy", f"{s.policy_s:.1f} s ({s.policy_frac:.1%})"),
                   ("lean", f"{s.lean_s:.1f} s ({s.lean_frac:.1%})"),
                   ("value", f"{s.value_s:.1f} s ({s.value_frac:.1%})")], ("where", "time"))
    grid = Table(title="cost by search mode", title_justify="left")
    for header in ("mode", "theorems", "proved", "tokens", "tokens/proof", "Lean calls", "proofs sampled"):
        grid.add_column(header, justify="left" if header == "mode" else "right")
    rows = [*s.modes.items(), ("all", ModeSummary(theorems=s.theorems, proved=s.proved, tokens=s.tokens,
                                                  lean_calls=s.lean_calls, proofs_sampled=s.proofs_sampled))]
    for mode, numbers in rows:
        per_proof = f"{numbers.tokens / numbers.proved:.0f}" if numbers.proved else "–"
        grid.add_row(mode, str(numbers.theorems), str(numbers.proved), str(numbers.tokens), per_proof,
                     str(numbers.lean_calls), str(numbers.proofs_sampled))
    console.print(grid)
    if s.revisions:
        chain = ", ".join(f"{'a fresh attempt' if k == 0 else f'revision {k}'} {n}"
                          for k, n in s.proved_by_revision.items())
        console.print(f"repair: {s.repaired} failed proofs revised, {s.revisions} revisions; proved by {chain or '–'}")
    if s.throughput is not None:
        from burnqed.search.monitor import ThroughputReport, render_throughput

        console.print(render_throughput(ThroughputReport.from_dict(s.throughput)))
    for line in s.soundness_alarms:
        console.print(line, soft_wrap=True, markup=False)
    return buffer.getvalue()
