"""SFT step throughput and peak memory, through burnqed's own trainer (`burnqed.sft.trainer.build_trainer`).

    .venv/bin/python benchmarks/sft.py [--steps 30] [--threads 1]      # CPU: the tiny model, full vs LoRA vs QLoRA
    .venv/bin/python benchmarks/sft.py --gpu [--steps 8] [--batch 8] [--accum 4] [--seq-len 1024]

CPU: tokens/s, peak RSS and the ratios LoRA/full and QLoRA/full, each method in its own subprocess. --gpu: a QLoRA
step loop on a random model of DeepSeek-Prover-V2-7B's shape, tokens/s and peak CUDA memory against the prototype's
~4.9k tokens/s (docs/benchmarks.md, "sft.py"). Without CUDA it exits with one line saying so.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from burnqed.config import SftConfig, StorageConfig  # noqa: E402
from burnqed.storage import Store  # noqa: E402
from burnqed.text.prompt import PromptFormat  # noqa: E402

ANCHOR_TOKENS = 1500 * 32 * 1024
ANCHOR_SECONDS = 2 * 3600 + 48 * 60
SKIP_STEPS = 5  # the first steps pay for allocation and warm-up: not measured
DEEPSEEK_7B_SHAPE = {
    "hidden_size": 4096,
    "num_hidden_layers": 30,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "intermediate_size": 11008,
    "vocab_size": 102400,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
}


def step_clock(trainer: Any) -> tuple[Any, list[tuple[float, int]]]:
    """A TrainerCallback recording (time, tokens seen) after every optimizer step."""
    from transformers import TrainerCallback

    marks: list[tuple[float, int]] = []

    class Clock(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if trainer.args.device.type == "cuda":
                import torch

                torch.cuda.synchronize()
            marks.append((time.perf_counter(), int(trainer.tokens_seen)))

    return Clock(), marks


def rate(marks: Sequence[tuple[float, int]], skip: int) -> float:
    """Tokens per second between the end of step `skip` and the last step."""
    if len(marks) <= skip:
        raise SystemExit(f"need more than {skip} steps to measure (got {len(marks)}); raise --steps")
    (t0, n0), (t1, n1) = marks[skip - 1], marks[-1]
    return (n1 - n0) / (t1 - t0)


class RssPeak:
    """Samples this process' RSS every 5 ms while running; `peak` in bytes."""

    def __init__(self) -> None:
        import psutil

        self.process = psutil.Process()
        self.peak = self.process.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, self.process.memory_info().rss)

    def __enter__(self) -> RssPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


# ------------------------------------------------------------------------------------------------- CPU


def cpu_variant(method: str, steps: int, threads: int, *, store: Store) -> dict[str, float]:
    """One method on the tiny model in this process: tokens/s and memory."""
    import psutil
    import torch

    from burnqed.data.pairs import corpus_pairs
    from burnqed.sft.data import SftPair, build_dataset, encode_pairs
    from burnqed.sft.model import load_for_training, quiet_imports, quiet_warnings, resolve_base_model
    from burnqed.sft.trainer import build_trainer, plan_training

    quiet_imports()
    torch.set_num_threads(threads)
    cfg = SftConfig(method=method, device="cpu", max_steps=steps, lora_r=16, logging_steps=10_000,
                    save_steps=10_000, eval_steps=10_000)
    base = resolve_base_model(None, store=store)
    pairs = [SftPair(p.theorem, p.state_before, p.tactic) for p in corpus_pairs() if p.split != "test"]
    with tempfile.TemporaryDirectory() as tmp, quiet_warnings():
        policy = load_for_training(method, base, None, cfg, "cpu", False)
        dataset, _ = build_dataset(encode_pairs(policy.tokenizer, PromptFormat.PLAIN_TACTIC, pairs),
                                   max_length=cfg.max_length, packing=True, seed=0)
        loaded = psutil.Process().memory_info().rss
        trainer = build_trainer(policy, dataset, None, cfg=cfg, plan=plan_training(cfg, 0, warm=False),
                                output_dir=Path(tmp))
        clock, marks = step_clock(trainer)
        trainer.add_callback(clock)
        with RssPeak() as peak:
            trainer.train()
    return {"tokens_per_s": rate(marks, SKIP_STEPS), "peak_rss": float(peak.peak), "growth": float(peak.peak - loaded),
            "trainable": float(policy.trainable_params), "params": float(policy.total_params)}


def cpu_bench(steps: int, threads: int) -> None:
    results: dict[str, dict[str, float]] = {}
    for method in ("full", "lora", "qlora"):
        n = steps if method != "qlora" else max(SKIP_STEPS + 5, steps // 3)
        proc = subprocess.run([sys.executable, __file__, "--variant", method, "--steps", str(n),
                               "--threads", str(threads)], capture_output=True, text=True, check=False, cwd=ROOT)
        if proc.returncode != 0:
            raise SystemExit(f"the {method} run failed:\n{proc.stderr[-3000:]}")
        results[method] = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"SFT steps on the tiny model, CPU, {threads} thread(s), packed rows of 512 tokens × batch 4 "
          f"(after {SKIP_STEPS} warm-up steps):")
    print(f"{'method':<7} {'trainable':>10} {'tokens/s':>10} {'peak RSS':>10} {'growth':>9}")
    for method, r in results.items():
        print(f"{method:<7} {int(r['trainable']):>10,} {r['tokens_per_s']:>10,.0f} {r['peak_rss'] / 2**20:>8.0f}MB "
              f"{r['growth'] / 2**20:>7.1f}MB")
    full = results["full"]["tokens_per_s"]
    print(f"ratios: LoRA/full tokens/s {results['lora']['tokens_per_s'] / full:.2f}, "
          f"QLoRA/full {results['qlora']['tokens_per_s'] / full:.2f}")


# ------------------------------------------------------------------------------------------------- GPU


def random_7b_folder(folder: Path, shape: dict[str, Any], tokenizer_dir: Path) -> None:
    """Random bf16 weights in DeepSeek-Prover-V2-7B's shape, saved as a model folder (with some tokenizer)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(**shape, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
            model = LlamaForCausalLM(config)  # type: ignore[no-untyped-call,unused-ignore]  # untyped in transformers 5.19
    finally:
        torch.set_default_dtype(previous)
    model.config.dtype = "bfloat16"
    model.save_pretrained(folder, max_shard_size="5GB")
    del model
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tokenizer_dir / name, folder / name)


def qlora_loop(model_dir: Path, *, steps: int, batch: int, accum: int, seq_len: int, device: str,
               bf16: bool, on_ready: Callable[[], None] = lambda: None) -> tuple[float, int]:
    """QLoRA steps through burnqed's trainer on random token rows; (tokens/s, rows per step)."""
    import random

    from datasets import Dataset

    from burnqed.sft.model import load_for_training, quiet_imports, quiet_warnings
    from burnqed.sft.trainer import build_trainer, plan_training

    quiet_imports()
    cfg = SftConfig(method="qlora", device=device, max_steps=steps, batch_size=batch, grad_accum=accum,
                    max_length=seq_len, bf16=bf16, gradient_checkpointing=True, lora_r=16, lora_alpha=32,
                    learning_rate=2e-4, warmup_steps=0, logging_steps=10_000, save_steps=10_000, eval_steps=10_000)
    rng = random.Random(0)
    rows = batch * accum * (steps + 1)
    supervised = seq_len // 4
    ids = [[1, *(rng.randrange(3, 30_000) for _ in range(seq_len - 1))] for _ in range(rows)]
    dataset = Dataset.from_dict({
        "input_ids": ids,
        "labels": [[-100] * (seq_len - supervised) + row[seq_len - supervised:] for row in ids],
        "seq_lengths": [[seq_len]] * rows,
    })
    with tempfile.TemporaryDirectory() as tmp, quiet_warnings():
        policy = load_for_training("qlora", model_dir, None, cfg, device, bf16)
        trainer = build_trainer(policy, dataset, None, cfg=cfg, plan=plan_training(cfg, 0, warm=False),
                                output_dir=Path(tmp))
        clock, marks = step_clock(trainer)
        trainer.add_callback(clock)
        on_ready()
        trainer.train()
    return rate(marks, min(SKIP_STEPS, steps - 2)), batch * accum


def gpu_bench(steps: int, batch: int, accum: int, seq_len: int, *, store: Store) -> None:
    import torch

    if not torch.cuda.is_available():
        print("benchmarks/sft.py --gpu needs a CUDA GPU, and torch sees none (torch.cuda.is_available() is False); "
              "run the CPU benchmark without --gpu", file=sys.stderr)
        raise SystemExit(2)
    from burnqed.sft.model import quiet_imports, resolve_base_model

    quiet_imports()
    tokenizer_dir = resolve_base_model(None, store=store)
    with tempfile.TemporaryDirectory(dir=os.environ.get("BURNQED_BENCH_TMP")) as tmp:
        started = time.perf_counter()
        random_7b_folder(Path(tmp), DEEPSEEK_7B_SHAPE, tokenizer_dir)
        torch.cuda.empty_cache()
        setup = time.perf_counter() - started
        tokens_per_s, rows = qlora_loop(Path(tmp), steps=steps, batch=batch, accum=accum, seq_len=seq_len,
                                        device="cuda", bf16=True, on_ready=torch.cuda.reset_peak_memory_stats)
    anchor = ANCHOR_TOKENS / ANCHOR_SECONDS
    print("QLoRA (NF4, r 16, bf16, gradient checkpointing) on a random 7B-shaped Llama, "
          f"{torch.cuda.get_device_name()}:")
    print(f"  {rows} sequences × {seq_len} tokens per optimizer step (batch {batch} × accumulation {accum}), "
          f"{steps} steps, setup {setup:.0f}s")
    print(f"  tokens/s                      {tokens_per_s:,.0f}")
    print(f"  torch.cuda.max_memory_allocated {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB")
    print(f"  prototype anchor (A100 40 GB)   {anchor:,.0f} tokens/s (1500 steps × 32 × 1024 in 2 h 48 min)")
    print(f"  ratio to the anchor             {tokens_per_s / anchor:.2f}")


def main(argv: Sequence[str] | None = None) -> None:
    store = Store.from_config(StorageConfig())  # embedded defaults: local files, the default cache
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--gpu", action="store_true", help="QLoRA on a 7B-shaped random model (needs CUDA)")
    parser.add_argument("--steps", type=int, default=None, help="optimizer steps (CPU 30, GPU 8)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads on CPU")
    parser.add_argument("--batch", type=int, default=8, help="GPU: sequences per micro-batch")
    parser.add_argument("--accum", type=int, default=4, help="GPU: gradient accumulation")
    parser.add_argument("--seq-len", type=int, default=1024, help="GPU: tokens per sequence")
    parser.add_argument("--variant", choices=("full", "lora", "qlora"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.variant:
        result = cpu_variant(args.variant, args.steps or 30, args.threads, store=store)
        result["maxrss"] = float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
        print(json.dumps(result))
    elif args.gpu:
        gpu_bench(args.steps or 8, args.batch, args.accum, args.seq_len, store=store)
    else:
        cpu_bench(args.steps or 30, args.threads)


if __name__ == "__main__":
    main()
