"""Set-up cost of a large theorem index: 1,000 against 10,000 entries.

    .venv/bin/python benchmarks/index_setup.py [--sizes 1000,10000] [--max-ratio 20]

Times what every `search`/`eval` does before its first search (reading and checking the index, splits, shards, the
eval's digest, a one-expansion search of every entry) per size, and exits 1 when a step's ratio between the sizes
is above `--max-ratio`: linear work gives about the size ratio, quadratic its square (docs/benchmarks.md,
"index_setup.py"). About 15 s on 2 cores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from burnqed.config import load_config  # noqa: E402
from burnqed.data.index import load_local_theorem_index, select_split  # noqa: E402
from burnqed.eval.identity import EvalIdentity, EvalJobSettings  # noqa: E402
from burnqed.lean.inprocess import InProcessReplayPool  # noqa: E402
from burnqed.policy.base import AsyncClosing, Completion, Sampling, Seeds  # noqa: E402
from burnqed.records.theorem import TheoremIndex  # noqa: E402
from burnqed.search.runner import select_shard  # noqa: E402
from burnqed.stages.search import JobSettings, search_job  # noqa: E402
from burnqed.storage import Store  # noqa: E402
from leankit.corpus import load_corpus  # noqa: E402
from minilean.replay.replay_server import ReplayServer  # noqa: E402


class Silent(AsyncClosing):
    """A policy with nothing to say: every expansion gets no candidate."""

    name = "silent"

    async def generate(self, prompts: Sequence[str], sampling: Sampling,
                       seeds: Seeds | None = None) -> list[list[Completion]]:
        return [[] for _ in prompts]

    async def close(self) -> None:
        return None


def write_index(folder: Path, size: int) -> Path:
    path = folder / f"index-{size}.json"
    theorems = [{"name": f"bench_{i}", "statement": f"∀ (x : ℕ) (h₀ : x = {i}), x + 0 = {i}",
                 "header": "open Nat Real", "split": "test" if i % 2 else "train"} for i in range(size)]
    path.write_text(json.dumps({"name": "bench", "theorems": theorems}, ensure_ascii=False), encoding="utf-8")
    return path


def timed(step: Callable[[], object]) -> float:
    started = time.perf_counter()
    step()
    return time.perf_counter() - started


def measure(folder: Path, size: int) -> dict[str, float]:
    path = write_index(folder, size)
    tracemalloc.start()
    started = time.perf_counter()
    index = load_local_theorem_index(path)
    load_s = time.perf_counter() - started
    peak_mib = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    cfg = load_config(sets=["search.max_nodes=1", "search.checkpoint_every=500"])
    eval_settings = EvalJobSettings.from_config(cfg, [10, 50])
    job = JobSettings.from_config(cfg.search, cfg.policy, cfg.lean)
    corpus = load_corpus()

    async def search(theorems: TheoremIndex) -> None:
        pool = InProcessReplayPool(lambda: ReplayServer(corpus), size=4)
        await search_job(theorems.theorems, str(folder / f"out-{size}"), pool=pool, pool_size=4, policy=Silent(),
                         settings=job, store=Store(cache_dir=folder / "cache"))

    return {
        "load": load_s,
        "split": timed(lambda: select_split(index, "test")),
        "shard": timed(lambda: select_shard(index.theorems, 1, 4)),
        "identity": timed(lambda: EvalIdentity.of(index, eval_settings, pass_n=1, iteration=0, ebm=None)),
        "search_job": timed(lambda: asyncio.run(search(index))),
        "peak_mib": peak_mib,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000", help="comma-separated index sizes (smallest first)")
    parser.add_argument("--max-ratio", type=float, default=20.0, help="largest/smallest ratio a step may reach")
    args = parser.parse_args()
    sizes = [int(part) for part in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        figures = {size: measure(Path(tmp), size) for size in sizes}
    for size, steps in figures.items():
        print(f"{size:>6} entries: " + ", ".join(f"{k} {v:.3f}{' MiB' if k == 'peak_mib' else ' s'}"
                                                 for k, v in steps.items()))
    small, large = figures[sizes[0]], figures[sizes[-1]]
    ratios = {step: large[step] / max(small[step], 1e-6) for step in small}
    print(f"ratio {sizes[-1]}/{sizes[0]} entries (linear: {sizes[-1] / sizes[0]:g}): "
          + ", ".join(f"{k} {v:.1f}" for k, v in ratios.items()))
    # The three sub-millisecond steps are too small to time at 1,000 entries; the others must stay near-linear.
    over = [step for step in ("load", "search_job", "peak_mib") if ratios[step] > args.max_ratio]
    if over:
        raise SystemExit(f"error: {', '.join(over)} grew more than {args.max_ratio:g}x")


if __name__ == "__main__":
    main()
