"""Value-model throughput: states scored per second in search, training groups per second, and (with --gpu) the encode
throughput of a 7B-shaped policy in bf16 against the prototype's anchor.

    .venv/bin/python benchmarks/ebm.py [--repeats 20] [--train-steps 20] [--model DIR]
    .venv/bin/python benchmarks/ebm.py --gpu [--gpu-lengths 150,500]

Prints states/s at b = 8 … 256 new states per call and the ratio to b = 8, training groups/s for the tiny and the
7B-shaped head, and with --gpu states/s per batch size against the prototype's 86/s (docs/benchmarks.md,
"ebm.py"). Without CUDA, --gpu stops with one line and exit code 2.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from burnqed.config import StorageConfig  # noqa: E402
from burnqed.policy.base import AsyncClosing  # noqa: E402
from burnqed.storage import Store  # noqa: E402

BATCHES = (8, 16, 32, 64, 128, 256)
BEST_OF = 3  # each CPU rate is the best of this many runs: other work on a shared machine only slows a run down
PROTOTYPE_STATES_PER_S = 86.0  # burn-qed: SGLang --is-embedding /encode on one A100 40 GB
WORDS = ("x", "y", "n", "a", "b", "h", "h₁", "f", "ℕ", "ℝ", "+", "-", "*", "/", "^", "=", "≤", "<", "≠", "∀", "∃",
         "→", "∧", "∨", "(", ")", "0", "1", "2", "Finset.range", "∑", "Real.sqrt", "abs", "%", "∣", ":", ",")


def state_text(rng: random.Random) -> str:
    hyps = "\n".join(f"h{i} : " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 20)))
                     for i in range(rng.randint(2, 5)))
    return (hyps + "\n⊢ " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 50))))[: rng.randint(300, 600)]


class InstantEncoder(AsyncClosing):
    """An `Encoder` whose embeddings are precomputed (a table lookup): isolates the scorer and the head."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.table: dict[str, list[float]] = {}

    def prepare(self, texts: Sequence[str], seed: int = 0) -> None:
        import torch

        vectors = torch.randn(len(texts), self.dim, generator=torch.Generator().manual_seed(seed)).tolist()
        self.table.update(zip(texts, vectors, strict=True))

    async def encode(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.table[text] for text in texts]

    async def close(self) -> None:
        return None


def head_of(dim: int, hidden: list[int]) -> object:
    import torch

    from burnqed.ebm.formats import HeadSpec
    from burnqed.ebm.head import GoalConditionedEnergyHead

    torch.manual_seed(0)
    return GoalConditionedEnergyHead(HeadSpec(embedding_dim=dim, hidden_dims=hidden, dropout=0.1,
                                              spectral_norm=True, first_layer_scale=0.1)).eval()


def scoring_rate(head: object, encoder: object, batch: int, repeats: int, seed: int) -> float:
    """States per second of `repeats` energies() calls of `batch` new states each (after one warm-up call)."""
    from burnqed.ebm.scorer import EnergyScorer
    from burnqed.text.prompt import PromptFormat, build_embedding_text

    fmt = PromptFormat.PLAIN_TACTIC
    rng = random.Random(seed)
    goal = state_text(rng)
    calls = [[state_text(rng) + f" -- {seed}.{k}.{i}" for i in range(batch)] for k in range(repeats + 1)]
    if isinstance(encoder, InstantEncoder):
        encoder.prepare([build_embedding_text(fmt, t) for t in [goal, *(t for c in calls for t in c)]], seed)
    scorer = EnergyScorer(head, encoder, fmt)  # type: ignore[arg-type]

    async def go() -> float:
        await scorer.energies(goal, calls[0])  # warm-up: the goal, thread pool, first allocations
        started = time.perf_counter()
        for states in calls[1:]:
            await scorer.energies(goal, states)
        return batch * repeats / (time.perf_counter() - started)

    return asyncio.run(go())


def bench_scoring(repeats: int, model: str | None, *, store: Store) -> None:
    from burnqed.policy.localmodel import LocalModel
    from burnqed.policy.localpolicy import LocalEncoder
    from burnqed.policy.modelpath import ensure_model

    tiny_model = LocalModel.load(ensure_model(model, store=store), device="cpu", seed=0)
    dim = int(tiny_model.model.config.hidden_size)
    rows = []
    for batch in BATCHES:
        seed = batch
        small = max(scoring_rate(head_of(dim, [256, 128, 64]), InstantEncoder(dim), batch, repeats, seed + k)
                    for k in range(BEST_OF))
        large = max(scoring_rate(head_of(4096, [2048, 1024, 512]), InstantEncoder(4096), batch, repeats, seed + k)
                    for k in range(BEST_OF))
        encoded = max(scoring_rate(head_of(dim, [256, 128, 64]), LocalEncoder(tiny_model), batch,
                                   max(2, repeats // 4), seed + k) for k in range(BEST_OF))
        rows.append((batch, small, large, encoded))
    print(f"scoring in search: states/s per energies() call of b new states (CPU, tiny model {dim}-d)")
    print(f"{'b':>5} {'head 64-d':>14} {'head 4096-d':>14} {'tiny encode+head':>18}   ratios to b=8")
    base = rows[0]
    for batch, small, large, encoded in rows:
        print(f"{batch:>5} {small:>14.0f} {large:>14.0f} {encoded:>18.0f}   "
              f"{small / base[1]:.1f}× / {large / base[2]:.1f}× / {encoded / base[3]:.1f}×")


def bench_training(steps: int) -> None:
    import torch

    from burnqed.config import EbmConfig
    from burnqed.ebm.sampling import build_dataset
    from burnqed.records.results import Edge, EdgeOutcome
    from burnqed.stages.ebm_fit import fit_head
    from burnqed.trajectory.labels import label_edges
    from burnqed.trajectory.schema import theorems_to_table

    def edge(k: int, node: int, parent: int, depth: int, closed: bool = False) -> Edge:
        return Edge(node_id=node, parent_id=parent, depth=depth, state_before=f"t{k} state {parent}",
                    tactic=f"tactic {node}", state_after="" if closed else f"t{k} state {node}",
                    outcome=EdgeOutcome.CLOSED if closed else EdgeOutcome.OK, error=None, logprob=-1.0, n_tokens=3,
                    score=None, energy=None, lean_ms=1.0, gen_ms=1.0, timestamp_ms=0)

    trees = []
    for k in range(200):  # root ─1 ─4 ─6 (closed); siblings 2, 3 of 1 and 5 of 4
        edges = [edge(k, 1, 0, 1), edge(k, 2, 0, 1), edge(k, 3, 0, 1), edge(k, 4, 1, 2), edge(k, 5, 1, 2),
                 edge(k, 6, 4, 3, closed=True)]
        label_edges(edges, [6], True)
        trees.append((f"t{k}", edges))
    data = build_dataset([theorems_to_table("run", 0, trees)], valid_fraction=0.1)
    texts = data.texts()
    rows = {text: i for i, text in enumerate(texts)}
    print("training: InfoNCE groups (1 positive + 7 negatives) per second, CPU")
    for dim, hidden, batch, count in ((64, [256, 128, 64], 64, 10 * steps), (4096, [2048, 1024, 512], 128, steps)):
        embeddings = torch.randn(len(texts), dim, generator=torch.Generator().manual_seed(0))
        fit_head(data, embeddings, rows, EbmConfig(hidden_dims=hidden, steps=2, batch_size=batch))  # warm-up
        cfg = EbmConfig(hidden_dims=hidden, steps=count, batch_size=batch, log_every=count)
        rate = max(fit_head(data, embeddings, rows, cfg).samples_per_s for _ in range(BEST_OF))
        print(f"  {dim:>5}-d input, hidden {hidden}, batch {batch}: {rate:.0f} groups/s "
              f"({rate * 8:.0f} states/s) over {count} steps")


def bench_gpu(lengths: tuple[int, int]) -> None:
    import torch

    if not torch.cuda.is_available():
        print("error: --gpu needs a CUDA device and a CUDA build of torch; none is available here "
              f"(torch {torch.__version__}). Run it on a GPU machine.", file=sys.stderr)
        raise SystemExit(2)
    from transformers import LlamaConfig, LlamaModel

    # DeepSeek-Prover-V2-7B's shape (a Llama-architecture DeepSeek-V1 7B)
    config = LlamaConfig(hidden_size=4096, num_hidden_layers=30, num_attention_heads=32, num_key_value_heads=32,
                         intermediate_size=11008, vocab_size=102400, max_position_embeddings=4096, rms_norm_eps=1e-6)
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    started = time.perf_counter()
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("cuda"):
            model = LlamaModel(config)
    finally:
        torch.set_default_dtype(previous)
    model.train(False)
    params = sum(p.numel() for p in model.parameters())
    print(f"7B-shaped Llama ({params / 1e9:.2f}B parameters, bf16, random weights) built in "
          f"{time.perf_counter() - started:.1f}s on {torch.cuda.get_device_name()}")
    rng = random.Random(0)
    print(f"encode: right-padded prompts of {lengths[0]}-{lengths[1]} tokens, masked mean of the last hidden states")
    print(f"{'batch':>6} {'states/s':>10} {'vs prototype 86/s':>18}")
    for batch in (8, 16, 32, 64, 128):
        rounds = []
        for k in range(4):  # the first round warms up kernels and the allocator
            sizes = [rng.randint(*lengths) for _ in range(batch)]
            width = max(sizes)
            ids = torch.randint(0, config.vocab_size, (batch, width), device="cuda")
            mask = torch.zeros(batch, width, dtype=torch.long, device="cuda")
            for row, size in enumerate(sizes):
                mask[row, :size] = 1
            torch.cuda.synchronize()
            began = time.perf_counter()
            with torch.inference_mode():
                hidden = model(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state.float()
                weights = mask.unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1)
                pooled.float().cpu()
            torch.cuda.synchronize()
            if k:
                rounds.append(batch / (time.perf_counter() - began))
        rate = sorted(rounds)[len(rounds) // 2]
        print(f"{batch:>6} {rate:>10.0f} {rate / PROTOTYPE_STATES_PER_S:>17.1f}×")


def main() -> None:
    store = Store.from_config(StorageConfig())  # embedded defaults: local files, the default cache
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeats", type=int, default=20, help="energies() calls per measurement")
    parser.add_argument("--train-steps", type=int, default=10,
                        help="training steps of the 4096-d head (the 64-d head runs ten times as many)")
    parser.add_argument("--model", default=None, help="tiny model folder (default: the embedded one)")
    parser.add_argument("--gpu", action="store_true", help="only the 7B-shaped encode benchmark (needs CUDA)")
    parser.add_argument("--gpu-lengths", default="150,500", help="prompt token lengths, min,max")
    args = parser.parse_args()
    if args.gpu:
        low, high = (int(part) for part in args.gpu_lengths.split(","))
        bench_gpu((low, high))
        return
    import torch

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    bench_scoring(args.repeats, args.model, store=store)
    bench_training(args.train_steps)


if __name__ == "__main__":
    main()
