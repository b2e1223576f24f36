"""Cost of checkpointing trajectories: `TrajectoryWriter` committing a part every 50 theorems vs one single write of all
the rows at the end.

    .venv/bin/python benchmarks/trajectory_checkpoint.py [--edges 1000000] [--theorems 2000] [--every 50]

Synthetic edges of realistic sizes. Prints both times, the ratio checkpointed / single (target ≤ 1.3×) and rows/s
(docs/benchmarks.md, "trajectory_checkpoint.py"). `run(edges, theorems, every)` returns the numbers for other
benchmarks.
"""

from __future__ import annotations

import argparse
import gc
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from burnqed.config import StorageConfig  # noqa: E402
from burnqed.records.results import Edge, EdgeOutcome, FailureReason, TheoremResult  # noqa: E402
from burnqed.storage import Store  # noqa: E402
from burnqed.trajectory.labels import label_edges  # noqa: E402
from burnqed.trajectory.schema import theorems_to_table  # noqa: E402
from burnqed.trajectory.writer import TrajectoryWriter, publish_table  # noqa: E402

WORDS = ("x", "y", "n", "m", "k", "a", "b", "h", "h₁", "hx", "f", "ℕ", "ℝ", "ℤ", "+", "-", "*", "/", "^", "=",
         "≤", "<", "≠", "∀", "∃", "→", "∧", "∨", "¬", "(", ")", "0", "1", "2", "Finset.range", "∑", "Real.sqrt",
         "Nat.succ", "abs", "%", "∣", "Even", "Odd", "Prime", "gcd", "Function.Injective", ":", ",")
TACTICS = ("simp [{}]", "rw [{}]", "nlinarith [sq_nonneg ({}), sq_nonneg (a - b)]", "linarith [{}]",
           "exact {}", "apply {}", "intro {}", "induction {} with n ih", "field_simp [{}]", "norm_num [{}]",
           "have h : {} := by omega", "cases {} with x hx", "ring_nf at {} ⊢", "positivity", "omega")
ERRORS = ("linarith failed to find a contradiction", "unsolved goals", "simp made no progress",
          "type mismatch\n  h\nhas type\n  a ≤ b : Prop\nbut is expected to have type\n  a < b : Prop",
          "unknown identifier 'foo'", "The rfl tactic failed.", "motive is not type correct")


def _text(rng: random.Random, low: int, high: int) -> str:
    target = rng.randint(low, high)
    parts: list[str] = []
    size = 0
    while size < target:
        word = rng.choice(WORDS)
        parts.append(word)
        size += len(word) + 1
    return " ".join(parts)[:target]


def _state(rng: random.Random) -> str:
    hyps = "\n".join(f"h{i} : {_text(rng, 30, 70)}" for i in range(rng.randint(2, 5)))
    return f"{hyps}\n⊢ {_text(rng, 60, 160)}"[: rng.randint(300, 600)]


def _tactic(rng: random.Random) -> str:
    tactic = rng.choice(TACTICS).format(_text(rng, 6, 40))
    return tactic if len(tactic) >= 20 else tactic + " <;> simp"


def synthetic(edges: int, theorems: int, seed: int = 0) -> list[tuple[TheoremResult, list[Edge]]]:
    """`theorems` labelled searches with `edges` edges in all (4 candidates per expansion)."""
    rng = random.Random(seed)
    tactics = [_tactic(rng) for _ in range(min(50_000, max(edges, 1)))]
    out = []
    clock = 1_700_000_000_000
    for t in range(theorems):
        n = edges // theorems + (1 if t < edges % theorems else 0)
        states = {0: _state(rng)}
        open_nodes = [0]
        theorem_edges: list[Edge] = []
        for node_id in range(1, n + 1):
            parent = open_nodes[(node_id - 1) // 4 % len(open_nodes)]
            accepted = rng.random() < 0.3
            if accepted:
                states[node_id] = _state(rng)
                open_nodes.append(node_id)
            clock += rng.randint(1, 40)
            theorem_edges.append(Edge(
                node_id=node_id, parent_id=parent, depth=1 + node_id.bit_length() // 3,
                state_before=states[parent], tactic=rng.choice(tactics),
                state_after=states[node_id] if accepted else None,
                outcome=EdgeOutcome.OK if accepted else EdgeOutcome.ERROR,
                error=None if accepted else rng.choice(ERRORS), logprob=-rng.random() * 8,
                n_tokens=rng.randint(5, 25), score=-rng.random() * 3 if accepted else None, energy=None,
                lean_ms=rng.random() * 300, gen_ms=rng.random() * 3000, timestamp_ms=clock))
        label_edges(theorem_edges, [], False)
        result = TheoremResult(name=f"synthetic_{t}", proved=False, failure_reason=FailureReason.MAX_NODES,
                               edges=n, nodes_expanded=n // 4)
        out.append((result, theorem_edges))
    return out


def run(edges: int, theorems: int, every: int, *, store: Store) -> dict[str, float]:
    """Time checkpointed vs single writing of one synthetic trajectory; returns seconds, ratio and rates."""
    data = synthetic(edges, theorems)
    workdir = Path(tempfile.mkdtemp(prefix="burnqed-bench-"))
    try:
        warm = TrajectoryWriter(str(workdir / "warm"), run_id="bench", iteration=0, checkpoint_every=every, store=store)
        for result, theorem_edges in data[:every]:
            warm.add(result, theorem_edges)
        warm.finish()

        gc.collect()
        began = time.perf_counter()
        fs, root = store.resolve(str(workdir / "single"))
        table = theorems_to_table("bench", 0, ((r.name, e) for r, e in data))
        publish_table(fs, f"{root}/part-000000.parquet", table)
        single_s = time.perf_counter() - began
        del table

        gc.collect()
        began = time.perf_counter()
        writer = TrajectoryWriter(str(workdir / "chunked"), run_id="bench", iteration=0, checkpoint_every=every,
                                  store=store)
        for result, theorem_edges in data:
            writer.add(result, theorem_edges)
        marker = writer.finish()
        chunked_s = time.perf_counter() - began

        single_bytes = sum(p.stat().st_size for p in (workdir / "single").iterdir())
        chunked_bytes = sum(p.stat().st_size for p in (workdir / "chunked").iterdir())
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return {
        "edges": float(edges),
        "theorems": float(theorems),
        "parts": float(len(marker.parts)),
        "single_s": single_s,
        "checkpointed_s": chunked_s,
        "ratio": chunked_s / single_s,
        "single_rows_per_s": edges / single_s,
        "checkpointed_rows_per_s": edges / chunked_s,
        "single_mb": single_bytes / 1e6,
        "checkpointed_mb": chunked_bytes / 1e6,
    }


def main() -> None:
    store = Store.from_config(StorageConfig())  # embedded defaults: local files, the default cache
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--edges", type=int, default=1_000_000)
    parser.add_argument("--theorems", type=int, default=2000)
    parser.add_argument("--every", type=int, default=50, help="theorems per checkpoint")
    args = parser.parse_args()
    r = run(args.edges, args.theorems, args.every, store=store)
    print(f"{int(r['edges'])} edges, {int(r['theorems'])} theorems, checkpoint every {args.every} "
          f"-> {int(r['parts'])} parts")
    print(f"single write      {r['single_s']:7.2f} s  {r['single_rows_per_s']:10,.0f} rows/s  {r['single_mb']:8.1f} MB")
    print(f"checkpointed      {r['checkpointed_s']:7.2f} s  {r['checkpointed_rows_per_s']:10,.0f} rows/s  "
          f"{r['checkpointed_mb']:8.1f} MB")
    verdict = "ok" if r["ratio"] <= 1.3 else "ABOVE TARGET"
    print(f"ratio checkpointed/single {r['ratio']:.2f}x (target <= 1.3x: {verdict})")


if __name__ == "__main__":
    main()
