"""The GRPO stage's cost: seconds per step, steps per minute and rollout tokens per second of `burnqed rl`, on the
tiny model or on a model of DeepSeek-Prover-V2-7B's shape with random weights (a GPU's figure; no weights to fetch).

    .venv/bin/python benchmarks/rl.py --work DIR [--model tiny|7b] [--steps 10] [--set KEY=VALUE ...]

In DIR it runs what an iteration runs, each through the command line: `burnqed data prepare` (the embedded corpus,
once), `burnqed sft` (LoRA on the model as `sft.base_model`, `--sft-steps` steps, bf16 on a GPU), then `burnqed rl
--steps` steps on the train and pool theorems, minilean as Lean. `--model 7b` first writes a LlamaForCausalLM of
DeepSeek-Prover-V2-7B's shape (30 layers, hidden 4096, MLP 11008, 32 heads) with random bf16 weights and the tiny
model's tokenizer (so its vocabulary is the tiny one's: the output layer is smaller than the real model's). Reads
`rl-log.jsonl` and prints a line per step and the medians over the steps after the first: wall seconds per step, steps
per minute, tokens generated per step and per second of step wall time (generation, reward and update together: the
rollout throughput a run sees), Lean seconds per step; on a GPU also the run's peak memory (`rl.json`'s
`gpu_peak_gib`) beside the cluster's GPU memory plan of the same settings (`cluster.gpu_plan.rl_gpu_plan`, the model's
config.json as `serving.model_config_json`) (docs/benchmarks.md, "rl.py"). SFT trains the whole-proof format too
(`sft.proof_examples=true`: the data's replayed proofs), so the tiny model writes proofs rather than stopping at once.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[1]
BURNQED = [sys.executable, "-m", "burnqed.cli"]
SHAPE_7B: dict[str, Any] = {"hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 30,
                            "num_attention_heads": 32, "num_key_value_heads": 32, "max_position_embeddings": 4096,
                            "rms_norm_eps": 1e-6}


def tiny_model() -> Path:
    """The default tiny model folder (`$BURNQED_HOME/models/tiny-v3`, else the user cache), which the embedded
    defaults build on first use."""
    sys.path.insert(0, str(ROOT))
    from burnqed.policy.tiny import default_model_dir, missing_model_files

    folder = default_model_dir()
    if missing_model_files(folder):
        raise SystemExit(f"no tiny model at {folder}: run `burnqed iterate` once, or pass --tiny FOLDER")
    return folder


def random_7b(tokenizer_from: Path, target: Path) -> Path:
    """A LlamaForCausalLM of DeepSeek-Prover-V2-7B's shape, random bf16 weights, `tokenizer_from`'s tokenizer."""
    import torch
    import transformers

    llama_config: Any = transformers.LlamaConfig
    llama: Any = transformers.LlamaForCausalLM

    if (target / "config.json").exists():
        return target
    base = json.loads((tokenizer_from / "config.json").read_text())
    config = llama_config(vocab_size=base["vocab_size"], bos_token_id=base.get("bos_token_id"),
                          eos_token_id=base.get("eos_token_id"), pad_token_id=base.get("pad_token_id"),
                          dtype="bfloat16", **SHAPE_7B)
    torch.manual_seed(0)
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = llama(config).to(torch.bfloat16)
    model.save_pretrained(target, safe_serialization=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        if (tokenizer_from / name).exists():
            shutil.copy(tokenizer_from / name, target / name)
    params = sum(p.numel() for p in model.parameters())
    print(f"wrote {target}: {params / 1e9:.2f} B parameters (random, bf16)", flush=True)
    return target


def run(command: list[str], log: Path) -> float:
    started = time.perf_counter()
    with log.open("w") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}); its log: {log}\n"
                         + log.read_text()[-3000:])
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--model", choices=["tiny", "7b"], default="tiny")
    parser.add_argument("--tiny", type=Path, default=None, help="the tiny model folder (default: BURNQED_HOME's)")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--sft-steps", type=int, default=20)
    parser.add_argument("--set", dest="sets", action="append", default=[], help="extra --set for sft and rl")
    parser.add_argument("--full-length", action="store_true",
                        help="every completion runs to rl.max_completion_tokens (a memory measurement)")
    args = parser.parse_args()
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    tiny = args.tiny or tiny_model()
    model = random_7b(tiny, work / "model-7b") if args.model == "7b" else tiny
    try:
        import torch

        gpu = torch.cuda.is_available()
        device = torch.cuda.get_device_name(0) if gpu else "cpu"
    except ImportError:
        gpu, device = False, "cpu"
    sets = [f"policy.model={model}", f"sft.base_model={model}", "sft.method=lora", f"sft.max_steps={args.sft_steps}",
            "sft.proof_examples=true", f"rl.max_steps={args.steps}", "rl.save_steps=1000",
            *(["sft.bf16=true"] if gpu else []), *args.sets]
    flags = [flag for item in sets for flag in ("--set", item)]
    data = work / "data"
    if not (data / "theorems.json").exists():
        run([*BURNQED, "data", "prepare", "--output", str(data)], work / "prepare.log")
    name = args.model
    sft_s = run([*BURNQED, "sft", "--data", str(data), "--output", str(work / f"sft-{name}"), "--force", *flags],
                work / f"sft-{name}.log")
    if args.full_length:
        shim = full_length_shim(work / "full-length")
        os.environ["PYTHONPATH"] = os.pathsep.join([str(shim), *filter(None, [os.environ.get("PYTHONPATH")])])
    rl_s = run([*BURNQED, "rl", "--sft", str(work / f"sft-{name}"), "--output", str(work / f"rl-{name}"),
                "--theorems", str(data), "--split", "train,pool", "--force", *flags], work / f"rl-{name}.log")
    steps = [json.loads(line) for line in (work / f"rl-{name}" / "rl-log.jsonl").read_text().splitlines()]
    print(f"{name} on {device}: sft {sft_s:.0f} s ({args.sft_steps} steps), rl {rl_s:.0f} s ({len(steps)} steps, "
          "process start and model load included)")
    print("step  wall s  tokens  tokens/s  Lean s  reward")
    for step in steps:
        rate = step["tokens_generated"] / step["wall_seconds"] if step["wall_seconds"] else 0.0
        print(f"{step['step']:>4}  {step['wall_seconds']:6.2f}  {step['tokens_generated']:6d}  {rate:8.1f}  "
              f"{step['lean_seconds']:6.2f}  {step['mean_reward']:.3f}")
    later = steps[1:] or steps
    wall = statistics.median(step["wall_seconds"] for step in later)
    tokens = statistics.median(step["tokens_generated"] for step in later)
    lean = statistics.median(step["lean_seconds"] for step in later)
    print(f"median after the first step: {wall:.2f} s/step, {60 / wall:.1f} steps/min, {tokens:.0f} tokens/step, "
          f"{tokens / wall:.0f} rollout tokens/s, Lean {lean:.2f} s/step")
    if gpu:
        peak = json.loads((work / f"rl-{name}" / "rl.json").read_text())["gpu_peak_gib"]
        longest = longest_prompt(model, work / f"rl-{name}" / "rollouts.jsonl")
        print(f"GPU memory: measured peak {peak:.2f} GiB allocated (no CUDA context, no allocator cache); the plan "
              f"at the longest prompt sampled ({longest} tokens) as rl.max_prompt_tokens:")
        print(plan_text(model, [*sets, f"rl.max_prompt_tokens={longest}"],
                        torch.cuda.get_device_properties(0).total_memory / 2**30))


def longest_prompt(model: Path, rollouts: Path) -> int:
    """The longest prompt of the rollouts, in the model's tokens."""
    from transformers import AutoTokenizer

    tokenizer: Any = AutoTokenizer.from_pretrained(str(model))
    prompts = {json.loads(line)["prompt"] for line in rollouts.read_text().splitlines()}
    return max(len(ids) for ids in tokenizer(text=sorted(prompts))["input_ids"])


def full_length_shim(folder: Path) -> Path:
    """A `sitecustomize.py` in `folder` that makes TRL's generation run every completion to max_completion_length
    (`min_new_tokens`): the memory of a step whose sequences all reach the plan's length. A measurement device of
    this script only; `burnqed rl` itself stops at the end-of-sequence token."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(
        "import trl\n"
        "_init = trl.GRPOConfig.__post_init__\n"
        "def _full(self):\n"
        "    _init(self)\n"
        "    kwargs = self.generation_kwargs or {}\n"
        "    self.generation_kwargs = {**kwargs, 'min_new_tokens': self.max_completion_length}\n"
        "trl.GRPOConfig.__post_init__ = _full\n")
    return folder


def plan_text(model: Path, sets: list[str], gpu_gib: float) -> str:
    """The cluster's GPU memory plan of the rl step for `model`'s shape and these settings, on a card of `gpu_gib`."""
    sys.path.insert(0, str(ROOT))
    from burnqed.cluster.gpu_plan import rl_gpu_plan
    from burnqed.config.loader import load_config
    from burnqed.errors import ConfigError

    cfg = load_config(None, [*sets, f"serving.model_config_json={model / 'config.json'}",
                             f"serving.gpu_memory_gib={gpu_gib:.1f}"], {})
    try:
        return rl_gpu_plan(cfg).describe()
    except ConfigError as exc:  # it does not fit: the refusal holds the numbers
        return str(exc)


if __name__ == "__main__":
    main()
