"""What per-request seeds cost: the same batch sampled seeded (one seed per sample, `policy.base.sample_seed`) and
unseeded (the backend's own stream), alternating, and the ratio seeded / unseeded measured in this run.

    .venv/bin/python benchmarks/seeded_sampling.py [--prompts 8] [--n 8] [--tokens 32] [--rounds 3] [--url URL]

Without --url: the local backend in this process (the tiny model, CPU), where a seeded prompt is decoded alone.
With --url: a server through burnqed's SGLang client (docs/benchmarks.md, "sampling.py and seeded_sampling.py").
"""

from __future__ import annotations

import argparse
import asyncio
import time

from burnqed.policy.base import Completion, Sampling, Seeds, sample_seed
from burnqed.records.theorem import Theorem
from burnqed.text.prompt import PromptFormat, build_prompt, stop_strings
from leankit.corpus import load_corpus


def _prompts(count: int) -> list[str]:
    states = [Theorem.from_recorded(spec).statement for spec in load_corpus().theorems]
    return [build_prompt(PromptFormat.PLAIN_TACTIC, f"⊢ {states[k % len(states)]}") for k in range(count)]


def _local(prompts: list[str], sampling: Sampling, seeds: Seeds, rounds: int) -> dict[str, list[float]]:
    from burnqed.config import StorageConfig
    from burnqed.policy.localmodel import LocalModel
    from burnqed.policy.modelpath import ensure_model
    from burnqed.storage import Store

    store = Store.from_config(StorageConfig())  # embedded defaults: local files, the default cache
    model = LocalModel.load(ensure_model(None, store=store), device="cpu", seed=0)
    times: dict[str, list[float]] = {"unseeded": [], "seeded": []}
    model.generate(prompts[:2], sampling)  # warm-up
    for _ in range(rounds):
        for mode, spent in times.items():
            started = time.perf_counter()
            groups = model.generate(prompts, sampling, seeds if mode == "seeded" else None)
            spent.append(time.perf_counter() - started)
            assert [len(group) for group in groups] == [sampling.n] * len(prompts)
    return times


async def _served(url: str, prompts: list[str], sampling: Sampling, seeds: Seeds,
                  rounds: int) -> dict[str, list[float]]:
    from burnqed.policy.sglang import SGLangClient

    times: dict[str, list[float]] = {"unseeded": [], "seeded": []}
    async with SGLangClient(url, ready_timeout_s=600, request_timeout_s=1800) as client:
        await client.wait_ready()
        await client.generate(prompts[:2], sampling)  # warm-up
        for _ in range(rounds):
            for mode, spent in times.items():
                started = time.perf_counter()
                groups: list[list[Completion]] = await client.generate(
                    prompts, sampling, seeds if mode == "seeded" else None)
                spent.append(time.perf_counter() - started)
                assert [len(group) for group in groups] == [sampling.n] * len(prompts)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=32, help="max_new_tokens")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--url", help="a running server (SGLang or burnqed serve); default: the local backend")
    args = parser.parse_args()
    prompts = _prompts(args.prompts)
    sampling = Sampling(n=args.n, temperature=0.8, top_p=0.95, max_new_tokens=args.tokens,
                        stop=stop_strings(PromptFormat.PLAIN_TACTIC))
    seeds = [[sample_seed(0, f"bench-{i}", 0, j) for j in range(args.n)] for i in range(len(prompts))]
    if args.url:
        times = asyncio.run(_served(args.url, prompts, sampling, seeds, args.rounds))
    else:
        times = _local(prompts, sampling, seeds, args.rounds)
    best = {mode: min(values) for mode, values in times.items()}
    print(f"{args.url or 'local backend (tiny model, CPU)'}: {args.prompts} prompts × n={args.n}, "
          f"max_new_tokens {args.tokens}, {args.rounds} rounds")
    for mode, values in times.items():
        print(f"  {mode:<8} best {best[mode]:.2f} s  rounds " + " ".join(f"{v:.2f}" for v in values))
    print(f"  ratio seeded / unseeded (best rounds): {best['seeded'] / best['unseeded']:.2f}")


if __name__ == "__main__":
    main()
