"""The subgoal cache on a run with repeated subgoals: the hit rate shards reach through a persisted cache against a
single shared cache (the ceiling) and against caches in memory per shard, and what a lookup, a store and a listing
cost on file:// and on S3 (a moto server), by cache size (docs/benchmarks.md, "subgoal_cache.py").

    .venv/bin/python benchmarks/subgoal_cache.py [--theorems 400] [--shards 4] [--subgoals 300] [--zipf 1.1]
                                                 [--search-ms 10] [--refresh 0,2,20] [--sizes 1000,10000] [--no-s3]

The workload is synthetic (no policy, no Lean): each theorem's sketch has 2 to 6 subgoals drawn from a pool of
distinct ones with Zipf-distributed popularity, a subgoal's search proves it when its fixed coin says so (60 %), and a
proof served from the cache always passes its re-check. Keys are real `subgoal_key`s of synthetic goals. The hit rate
is therefore a property of this workload; what the run shows is how much of the ceiling the shared persisted cache
reaches, and what it costs.
"""

from __future__ import annotations

import argparse
import functools
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from burnqed.records.replies import Goal, Variable  # noqa: E402
from burnqed.search.subgoal_cache import (  # noqa: E402
    CacheEnvironment,
    CacheStats,
    SubgoalCache,
    SubgoalKey,
    subgoal_key,
)
from burnqed.storage import Store  # noqa: E402

ENV = CacheEnvironment(lean={"command": ["repl"]}, pantograph_version="0.3.16", toolchain=None)
PROVABLE = 0.6


def goal_key(i: int) -> SubgoalKey:
    """The key of synthetic subgoal `i`: two hypotheses and a target, under a Mathlib header."""
    goal = Goal(target=f"f {i} x ≤ g {i} y", variables=(Variable(name="x", type="ℝ"), Variable(name="y", type="ℝ"),
                                                        Variable(name="h₀", type=f"0 < x + {i}")))
    return subgoal_key(goal, "import Mathlib\nopen Real")


def workload(theorems: int, subgoals: int, zipf: float, seed: int = 0) -> list[list[int]]:
    """Each theorem's subgoals (indices into the pool), Zipf-popular."""
    rng = random.Random(seed)
    weights = [1 / (rank + 1) ** zipf for rank in range(subgoals)]
    return [rng.choices(range(subgoals), weights, k=rng.randint(2, 6)) for _ in range(theorems)]


def provable(i: int) -> bool:
    return random.Random(i * 7919 + 1).random() < PROVABLE


def search_theorem(cache: SubgoalCache, name: str, sketch: list[int], keys: list[SubgoalKey], search_s: float) -> None:
    """What sketch search does with the cache for one sketch: look each subgoal up, use a cached proof (its re-check
    passes here), else search it (`search_s` of sleep) and store what the search proved."""
    for i in sketch:
        if cache.lookup(keys[i]):
            cache.record_hit()
            continue
        time.sleep(search_s)
        if provable(i):
            cache.store(keys[i], [f"nlinarith [h₀, sq_nonneg (x - {i})]"], theorem=name)


def run_shards(sketches: list[list[int]], keys: list[SubgoalKey], shards: int, search_s: float,
               open_cache: Callable[[], SubgoalCache]) -> CacheStats:
    """`shards` threads, shard k searching theorems k, k + shards, …, each with the cache `open_cache` gives it."""
    totals: list[CacheStats] = []
    lock = threading.Lock()

    def shard(k: int) -> None:
        cache = open_cache()
        for t in range(k, len(sketches), shards):
            search_theorem(cache, f"t{t}", sketches[t], keys, search_s)
        with lock:
            totals.append(cache.stats)

    threads = [threading.Thread(target=shard, args=(k,)) for k in range(shards)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(totals, CacheStats())


@contextmanager
def moto_root() -> Iterator[str]:
    """An s3:// root on a moto server in this process (tests/doubles/s3.py), AWS_* pointed at it."""
    import os

    import s3fs

    from tests.doubles.s3 import moto_s3

    with moto_s3("bench") as endpoint:
        os.environ.update({"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                           "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": endpoint})
        s3fs.S3FileSystem.clear_instance_cache()
        yield "s3://bench/run"


def hit_rates(args: argparse.Namespace, roots: dict[str, str], store: Store) -> None:
    sketches = workload(args.theorems, args.subgoals, args.zipf)
    keys = [goal_key(i) for i in range(args.subgoals)]
    lookups = sum(map(len, sketches))
    repeats = lookups - len({i for s in sketches for i in s})
    print(f"workload: {args.theorems} theorems, {lookups} subgoal lookups of {args.subgoals} distinct (Zipf "
          f"{args.zipf}), {repeats} repeats; {PROVABLE:.0%} provable; {args.shards} shards, {args.search_ms} ms a "
          "subgoal search")
    ceiling = run_shards(sketches, keys, 1, 0.0, SubgoalCache)
    print(f"  {'one cache, one process (ceiling)':<44} hit rate {ceiling.hit_rate:.3f}  ({ceiling.hits} hits)")
    search_s = args.search_ms / 1000
    alone = run_shards(sketches, keys, args.shards, search_s, SubgoalCache)
    print(f"  {'in memory per shard (no sharing)':<44} hit rate {alone.hit_rate:.3f}  ({alone.hits} hits)")
    for label, root in roots.items():
        for searches in args.refresh:
            refresh = searches * search_s
            uri = f"{root}/refresh-{searches:g}/subgoal-cache"
            started = time.perf_counter()
            stats = run_shards(sketches, keys, args.shards, search_s,
                               functools.partial(SubgoalCache.open, store, uri, ENV, refresh_s=refresh))
            wall = time.perf_counter() - started
            assert stats.hit_rate is not None and ceiling.hit_rate is not None
            print(f"  {f'persisted on {label}, refresh_s {searches:g} searches':<44} hit rate {stats.hit_rate:.3f}  "
                  f"({stats.hits} hits, {stats.hit_rate / ceiling.hit_rate:.0%} of the ceiling; {stats.listings} "
                  f"listings, {stats.stored} stored, {stats.skipped} skipped; {wall:.1f} s)")


def timed(op: Callable[[], object], n: int) -> float:
    """Median seconds of `op` over `n` calls."""
    times = []
    for _ in range(n):
        started = time.perf_counter()
        op()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def cost_at(label: str, uri: str, size: int, store: Store) -> None:
    """The cost of each cache call on a persisted cache of `size` entries at `uri` (keys computed beforehand)."""
    keys = [goal_key(i) for i in range(size)]
    absent = goal_key(10**9)
    writer = SubgoalCache.open(store, uri, ENV)
    started = time.perf_counter()
    for i, key in enumerate(keys):
        writer.store(key, [f"nlinarith [h₀, sq_nonneg (x - {i})]"], theorem=f"t{i}")
    store_s = (time.perf_counter() - started) / size
    opened = time.perf_counter()
    patient = SubgoalCache.open(store, uri, ENV, refresh_s=3600)
    listing_s = time.perf_counter() - opened
    probe = iter(keys)
    first_hit = timed(lambda: patient.lookup(next(probe)), min(size, 200))  # reads the key's entry
    again = timed(lambda: patient.lookup(keys[0]), 200)
    miss = timed(lambda: patient.lookup(absent), 200)  # listed less than refresh_s ago: no listing
    eager = SubgoalCache.open(store, uri, ENV, refresh_s=0)
    relist = timed(lambda: eager.lookup(absent), 5)  # lists every time
    print(f"  {label}, {size:>6} entries: store {store_s * 1e3:.2f}; open (one listing) {listing_s * 1e3:.1f}; "
          f"first hit of a key (one read) {first_hit * 1e3:.2f}; hit again {again * 1e3:.4f}; "
          f"miss without listing {miss * 1e3:.4f}; miss that lists {relist * 1e3:.1f}")


def costs(sizes: list[int], roots: dict[str, str], store: Store) -> None:
    print("cost of a call (median; ms):")
    memory = SubgoalCache()
    key, absent = goal_key(0), goal_key(10**9)
    memory.store(key, ["simp"], theorem="t")
    print(f"  in memory: hit {timed(lambda: memory.lookup(key), 1000) * 1e3:.4f}, "
          f"miss {timed(lambda: memory.lookup(absent), 1000) * 1e3:.4f}")
    for label, root in roots.items():
        for size in sizes:
            cost_at(label, f"{root}/cost-{size}/subgoal-cache", size, store)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--theorems", type=int, default=400)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--subgoals", type=int, default=300, help="distinct subgoals in the pool")
    parser.add_argument("--zipf", type=float, default=1.1)
    parser.add_argument("--search-ms", type=float, default=10.0, help="the simulated search of one subgoal")
    parser.add_argument("--refresh", type=lambda text: [float(k) for k in text.split(",")], default=[0.0, 2.0, 20.0],
                        help="refresh_s values, in subgoal searches (60 s against searches of 30 s is 2)")
    parser.add_argument("--sizes", default="1000,10000", help="cache sizes the cost is measured at")
    parser.add_argument("--no-s3", action="store_true", help="file:// only (no moto server)")
    args = parser.parse_args()
    store = Store(cache_dir=None)
    with tempfile.TemporaryDirectory(prefix="subgoal-cache-") as folder:
        roots = {"file://": f"file://{folder}"}
        s3_root: AbstractContextManager[str | None] = nullcontext() if args.no_s3 else moto_root()
        with s3_root as s3:
            if s3 is not None:
                roots["S3 (moto)"] = s3
            hit_rates(args, roots, store)
            costs([int(size) for size in args.sizes.split(",")], roots, store)


if __name__ == "__main__":
    main()
