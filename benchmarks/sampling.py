"""n samples per prompt for a batch of prompts: one /generate with sampling_params.n, or each prompt n times with n = 1
(`policy.samples_as` = n | copies), measured against a server through burnqed's SGLang client.

    .venv/bin/python benchmarks/sampling.py [--prompts 16] [--n 8] [--tokens 32] [--rounds 3] [--url URL]

Without --url it starts `burnqed serve` on the tiny model (CPU); with --url it measures that server. Prints seconds
per round for each mode and the ratio copies / n (docs/benchmarks.md, "sampling.py and seeded_sampling.py").
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from burnqed.policy.base import Sampling
from burnqed.policy.sglang import SGLangClient
from burnqed.records.theorem import Theorem
from burnqed.text.prompt import PromptFormat, build_prompt, stop_strings
from leankit.corpus import load_corpus


def _prompts(count: int) -> list[str]:
    states = [Theorem.from_recorded(spec).statement for spec in load_corpus().theorems]
    return [build_prompt(PromptFormat.PLAIN_TACTIC, f"⊢ {states[k % len(states)]}") for k in range(count)]


async def _measure(url: str, prompts: list[str], sampling: Sampling, rounds: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"n": [], "copies": []}
    clients = {mode: SGLangClient(url, samples_as=mode, ready_timeout_s=600, request_timeout_s=1800)
               for mode in times}
    try:
        await clients["n"].wait_ready()
        for client in clients.values():  # one warm-up each: first-call costs are not the mode's
            await client.generate(prompts[:2], sampling)
        for _ in range(rounds):
            for mode, client in clients.items():
                started = time.perf_counter()
                groups = await client.generate(prompts, sampling)
                times[mode].append(time.perf_counter() - started)
                assert [len(group) for group in groups] == [sampling.n] * len(prompts)
    finally:
        for client in clients.values():
            await client.close()
    return times


def _serve(model: Path | None) -> tuple[subprocess.Popen[str], str]:
    argv = [sys.executable, "-m", "burnqed.cli", "serve", "--port", "0", *(["--model", str(model)] if model else [])]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "BURNQED_POLICY__DEVICE": "cpu"})
    assert proc.stderr is not None
    for line in proc.stderr:
        if "http://" in line:
            return proc, line.strip().split()[-1].rstrip("/")
    raise SystemExit(f"burnqed serve did not start (exit {proc.wait()})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=32, help="max_new_tokens")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--url", help="a running server (SGLang or burnqed serve); default: burnqed serve, tiny model")
    parser.add_argument("--model", type=Path, help="the model burnqed serve loads (default: the tiny model)")
    args = parser.parse_args()
    prompts = _prompts(args.prompts)
    sampling = Sampling(n=args.n, temperature=1.0, top_p=0.95, max_new_tokens=args.tokens,
                        stop=stop_strings(PromptFormat.PLAIN_TACTIC))
    proc = None
    url = args.url
    if url is None:
        proc, url = _serve(args.model)
    try:
        times = asyncio.run(_measure(url, prompts, sampling, args.rounds))
    finally:
        if proc is not None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=60)
    best = {mode: min(values) for mode, values in times.items()}
    print(f"{url}: {args.prompts} prompts × n={args.n}, max_new_tokens {args.tokens}, {args.rounds} rounds")
    for mode, values in times.items():
        print(f"  samples_as={mode:<6} best {best[mode]:.2f} s  rounds " + " ".join(f"{v:.2f}" for v in values))
    print(f"  ratio copies / n (best rounds): {best['copies'] / best['n']:.2f}")


if __name__ == "__main__":
    main()
