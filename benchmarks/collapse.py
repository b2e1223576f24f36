"""Embedding collapse under repeated SFT-only iterations against joint training.

    .venv/bin/python benchmarks/collapse.py --root runs [--iters 3] [--out /tmp/collapse] [--set sft.warm_steps=40]

From a finished iteration 0, two chains of `--iters` warm-started SFT iterations (SFT only, and joint) on the same
data and iteration-0 trajectories; after each, the export's embeddings of those states are measured
(`burnqed.ebm.metrics.embedding_health`). Prints one line per chain and iteration and the ratio of the last
iteration's centroid L2 and effective rank to iteration 0's (docs/benchmarks.md, "collapse.py").
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.repair import WARM_SETTINGS  # noqa: E402
from burnqed import storage  # noqa: E402
from burnqed.config import Config  # noqa: E402
from burnqed.ebm.formats import EmbeddingHealth  # noqa: E402


def _burnqed(argv: list[str], sets: list[str]) -> None:
    command = [sys.executable, "-m", "burnqed.cli", *argv, *[x for s in sets for x in ("--set", s)]]
    done = subprocess.run(command, capture_output=True, text=True, check=False, env={**os.environ})
    if done.returncode != 0:
        raise SystemExit(f"error: burnqed {' '.join(argv[:1])} failed ({done.returncode}): {done.stderr[-1500:]}")


def _measure(cfg: Config, model: str, trajectories: str, store: storage.Store, cache: str) -> EmbeddingHealth:
    from burnqed.base.cpu_kernels import cpu_threads
    from burnqed.commands.ebm import open_encoder
    from burnqed.ebm.cache import EmbeddingCache, embed_dataset
    from burnqed.ebm.metrics import embedding_health
    from burnqed.ebm.sampling import load_dataset
    from burnqed.policy.localmodel import resolve_device

    data = load_dataset([trajectories], valid_fraction=cfg.ebm.valid_fraction, salt=cfg.data.split_salt,
                        store=store)

    async def embed() -> EmbeddingHealth:
        async with open_encoder(cfg, model, store=store) as (encoder, identity):
            vectors, rows, _ = await embed_dataset(data, cfg.policy.prompt_format, encoder,
                                                   EmbeddingCache(cache, identity, store=store),
                                                   batch=cfg.ebm.encode_batch, chunk=cfg.ebm.cache_chunk)
        return embedding_health(data, vectors, rows, seed=cfg.ebm.seed)

    with cpu_threads(resolve_device(cfg.ebm.device), cfg.ebm.cpu_threads):  # as train-ebm embeds
        return asyncio.run(embed())


def _line(chain: str, iteration: int, h: EmbeddingHealth, seconds: float) -> str:
    probe = "n/a" if h.linear_probe is None else f"{h.linear_probe:.3f}"
    sib = "n/a" if h.sibling_l2 is None else f"{h.sibling_l2:.3f}"
    return (f"{chain:<9} it {iteration}: centroid L2 {h.centroid_l2:.4f}  linear probe {probe}  sibling L2 {sib}  "
            f"effective rank {h.effective_rank:.2f}  top share {h.spectrum[0] if h.spectrum else 0:.3f}  "
            f"({seconds:.0f}s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", required=True, help="A run root whose iteration 0 finished.")
    parser.add_argument("--iters", type=int, default=3, help="Warm-started iterations per chain (≥ 2).")
    parser.add_argument("--out", default="/tmp/burnqed-collapse", help="Where the chains' outputs go.")
    parser.add_argument("--set", dest="sets", action="append", default=[], help="Config override (repeatable).")
    args = parser.parse_args()
    if args.iters < 2:
        parser.error("--iters must be at least 2 (the point is repeated iterations)")
    from burnqed.commands.kit import configure

    # warm-started chains for sft.warm_steps on every verified proof, whatever the defaults' start
    args.sets = [*WARM_SETTINGS, *args.sets]
    cfg = configure(None, args.sets)
    store = storage.Store.from_config(cfg.storage)
    root = storage.normalize(args.root)
    start, trajectories, data = (f"{root}/iter_0/{p}" for p in ("sft", "trajectories", "data"))
    for uri in (start, trajectories, f"{root}/iter_0/export"):
        if not store.is_done(uri):
            raise SystemExit(f"error: {uri} is not finished: run `burnqed iterate --iter 0 --root {args.root}` first")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cache = str(out / "embedding-cache")
    began = time.monotonic()
    base = _measure(cfg, f"{root}/iter_0/export", trajectories, store, cache)
    print(_line("start", 0, base, time.monotonic() - began), flush=True)
    last: dict[str, EmbeddingHealth] = {}
    for chain, joint in (("sft-only", False), ("joint", True)):
        previous = start
        for k in range(1, args.iters + 1):
            began = time.monotonic()
            sft, export = str(out / chain / f"iter_{k}" / "sft"), str(out / chain / f"iter_{k}" / "export")
            sets = [*args.sets, f"sft.joint={str(joint).lower()}"]
            if not store.is_done(sft):
                _burnqed(["sft", "--iter", str(k), "--data", data, "--trajectories", trajectories, "--init", previous,
                          "--output", sft], sets)
            if not store.is_done(export):
                _burnqed(["export", "--sft", sft, "--output", export], sets)
            last[chain] = _measure(cfg, export, trajectories, store, cache)
            print(_line(chain, k, last[chain], time.monotonic() - began), flush=True)
            previous = sft
    for chain, h in last.items():
        print(f"{chain}: centroid L2 ×{h.centroid_l2 / max(base.centroid_l2, 1e-12):.3f}, effective rank "
              f"×{h.effective_rank / max(base.effective_rank, 1e-12):.3f} after {args.iters} iterations "
              "(relative to iteration 0's export)")


if __name__ == "__main__":
    main()
