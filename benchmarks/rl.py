"""The GRPO stage's cost by rollout engine: seconds per step, rollout tokens per second, the share of the step spent
sampling and the peak memory of `burnqed rl`, each engine on the same prompts and seeds, on the tiny model or on a
model of DeepSeek-Prover-V2-7B's shape with random weights (a GPU's figure; no weights to fetch).

    .venv/bin/python benchmarks/rl.py --work DIR [--model tiny|7b] [--steps 10] [--rollouts trainer,continuous]
        [--set KEY=VALUE ...] [--full-length] [--reuse-sft] [--json FILE] [--deadline-s S]

In DIR it runs what an iteration runs, each through the command line: `burnqed data prepare` (the embedded corpus,
once), `burnqed sft` (LoRA on the model as `sft.base_model`, `--sft-steps` steps, bf16 on a GPU; once, and not again
with `--reuse-sft` when its output is there), then per engine of `--rollouts` (`rl.rollout_engine`) `burnqed rl
--steps` steps on the train and pool theorems from that one SFT output, rl.seed and the prompt order the same, minilean
as Lean. `--model 7b` first writes a LlamaForCausalLM of DeepSeek-Prover-V2-7B's shape (30 layers, hidden 4096, MLP
11008, 32 heads) with random bf16 weights and the tiny model's tokenizer (its output layer smaller than the real
model's). From each run's `rl-log.jsonl`, the medians over the steps after the first (the first alone when there is
one): wall seconds per step, sampling seconds (`generation_seconds`: the step's start to its reward's call), tokens
per step, rollout tokens per second of sampling and of step wall time, the sampling share, completions cut at the
bound, Lean seconds; on a GPU the run's peak memory (`rl.json`'s `gpu_peak_gib`) and the cluster's GPU memory plan
of the same settings. A markdown table at the end; `--json` keeps the rows, rewritten after each engine. An engine
whose run outlasts `--deadline-s` (from the start of this script) is stopped and its row says so. `--full-length`
makes every completion run to rl.max_completion_tokens (the end-of-sequence tokens suppressed: a random model stops
early) (docs/benchmarks.md, "rl.py").
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
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


def run(command: list[str], log: Path, timeout: float | None = None) -> float | None:
    """Run `command` into `log`; its seconds, or None when it outlasted `timeout` (then its process group is
    killed: the Lean workers with it). SystemExit when it fails."""
    started = time.perf_counter()
    with log.open("w") as out:
        child = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            return None
    if code != 0:
        raise SystemExit(f"{' '.join(command)} failed ({code}); its log: {log}\n" + log.read_text()[-3000:])
    return time.perf_counter() - started


def run_engine(engine: str, command: list[str], output: Path, log: Path, left: float | None) -> dict[str, Any]:
    """`burnqed rl` (`command`) under `engine` into `output`: its row (`summary`), or one that says it outlasted
    `left` seconds or failed (its log's end): the next engine still runs."""
    try:
        seconds = run([*command, "--set", f"rl.rollout_engine={engine}"], log, timeout=left)
    except SystemExit as failed:
        print(failed, flush=True)
        return {"engine": engine, "failed": log.read_text()[-2000:]}
    return {"engine": engine, "unfinished_after_s": left} if seconds is None else summary(engine, output, seconds)


def summary(engine: str, folder: Path, seconds: float) -> dict[str, Any]:
    """An engine's row: the medians over its steps after the first (module docstring)."""
    steps = [json.loads(line) for line in (folder / "rl-log.jsonl").read_text().splitlines()]
    record = json.loads((folder / "rl.json").read_text())
    later = steps[1:] or steps

    def median(key: str) -> float:
        return float(statistics.median(float(step[key] or 0.0) for step in later))

    wall, sampling, tokens = median("wall_seconds"), median("generation_seconds"), median("tokens_generated")
    return {"engine": engine, "steps": len(steps), "measured_steps": len(later), "process_s": round(seconds, 1),
            "s_per_step": round(wall, 3), "sampling_s": round(sampling, 3), "tokens_per_step": tokens,
            "sampling_tokens_per_s": round(tokens / sampling, 1) if sampling else None,
            "step_tokens_per_s": round(tokens / wall, 1) if wall else None,
            "sampling_share": round(sampling / wall, 3) if wall else None, "truncated_per_step": median("truncated"),
            "lean_s": round(median("lean_seconds"), 2), "mean_reward": record["mean_reward"],
            "gpu_peak_gib": record["gpu_peak_gib"], "per_step": [
                {k: step[k] for k in ("step", "wall_seconds", "generation_seconds", "tokens_generated", "truncated")}
                for step in steps]}


def table(rows: list[dict[str, Any]], label: str) -> str:
    """The markdown table of the engines' rows."""
    lines = ["| engine | machine, model, prompts × group × max tokens | s/step | sampling s | sampling share | "
             "tokens/step | rollout tokens/s (sampling) | (step) | cut/step | peak GiB |", "|---" * 10 + "|"]
    for row in rows:
        if "unfinished_after_s" in row:
            lines.append(f"| {row['engine']} | {label} | > {row['unfinished_after_s']:.0f} (no step done; process "
                         "start and load included) | | | | | | | |")
            continue
        if "failed" in row:
            lines.append(f"| {row['engine']} | {label} | failed (its log's end in the rows) | | | | | | | |")
            continue
        peak = f"{row['gpu_peak_gib']:.2f}" if row["gpu_peak_gib"] is not None else "—"
        lines.append(f"| {row['engine']} | {label} | {row['s_per_step']:.2f} | {row['sampling_s']:.2f} | "
                     f"{row['sampling_share']:.0%} | {row['tokens_per_step']:.0f} | {row['sampling_tokens_per_s']} | "
                     f"{row['step_tokens_per_s']} | {row['truncated_per_step']:.0f} | {peak} |")
    return "\n".join(lines)


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--model", choices=["tiny", "7b"], default="tiny")
    parser.add_argument("--tiny", type=Path, default=None, help="the tiny model folder (default: BURNQED_HOME's)")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--sft-steps", type=int, default=20)
    parser.add_argument("--rollouts", default="trainer", help="engines (rl.rollout_engine), comma-separated, in order")
    parser.add_argument("--set", dest="sets", action="append", default=[], help="extra --set for sft and rl")
    parser.add_argument("--full-length", action="store_true",
                        help="every completion runs to rl.max_completion_tokens (the end-of-sequence tokens "
                        "suppressed)")
    parser.add_argument("--reuse-sft", action="store_true", help="keep an SFT output already in --work")
    parser.add_argument("--json", type=Path, default=None, help="write the rows here (after each engine)")
    parser.add_argument("--deadline-s", type=float, default=None,
                        help="stop an engine's run still going this many seconds after this script started")
    return parser.parse_args()


def main() -> None:
    began = time.monotonic()
    args = arguments()
    engines = [e.strip() for e in args.rollouts.split(",") if e.strip()]
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
    sft = work / f"sft-{name}"
    if not (args.reuse_sft and (sft / "sft.json").exists()):
        sft_s = run([*BURNQED, "sft", "--data", str(data), "--output", str(sft), "--force", *flags],
                    work / f"sft-{name}.log")
        print(f"{name} on {device}: sft {sft_s:.0f} s ({args.sft_steps} steps)", flush=True)
    if args.full_length:
        shim = full_length_shim(work / "full-length", end_tokens(model))
        os.environ["PYTHONPATH"] = os.pathsep.join([str(shim), *filter(None, [os.environ.get("PYTHONPATH")])])
    cfg = effective(sets)
    label = (f"{device}, {name}, {cfg.rl.prompts_per_step} × {cfg.rl.num_generations} × "
             f"{cfg.rl.max_completion_tokens}{' (every completion to the limit)' if args.full_length else ''}")
    rows: list[dict[str, Any]] = []
    for engine in engines:
        output = work / f"rl-{name}-{engine}"
        left = None if args.deadline_s is None else args.deadline_s - (time.monotonic() - began)
        if left is not None and left <= 0:
            print(f"{engine}: not started, the deadline ({args.deadline_s:.0f} s) has passed", flush=True)
            break
        row = run_engine(engine, [*BURNQED, "rl", "--sft", str(sft), "--output", str(output), "--theorems",
                                  str(data), "--split", "train,pool", "--force", *flags],
                         output, work / f"rl-{name}-{engine}.log", left)
        rows.append({"label": label, **row})
        print(json.dumps({k: v for k, v in row.items() if k != "per_step"}), flush=True)
        if args.json is not None:
            args.json.write_text(json.dumps(rows, indent=1) + "\n")
    print(table(rows, label))
    done = [row["engine"] for row in rows if "s_per_step" in row]
    if gpu and done:
        longest = longest_prompt(model, work / f"rl-{name}-{done[0]}" / "rollouts.jsonl")
        print(f"GPU memory plan at the longest prompt sampled ({longest} tokens) as rl.max_prompt_tokens:")
        for engine in done:
            print(f"{engine}: " + plan_text(model, [*sets, f"rl.max_prompt_tokens={longest}",
                                                   f"rl.rollout_engine={engine}"],
                                            torch.cuda.get_device_properties(0).total_memory / 2**30))


def effective(sets: list[str]) -> Any:
    """The configuration these --set values give (the embedded defaults under them)."""
    sys.path.insert(0, str(ROOT))
    from burnqed.config.loader import load_config

    return load_config(None, sets, {})


def end_tokens(model: Path) -> list[int]:
    """The end-of-sequence token ids TRL stops at for `model`: its tokenizer's and its generation config's."""
    from transformers import AutoTokenizer, GenerationConfig

    tokenizer: Any = AutoTokenizer.from_pretrained(str(model))
    ids = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
    try:
        configured = GenerationConfig.from_pretrained(str(model)).eos_token_id
    except OSError:  # no generation_config.json
        configured = None
    ids |= set(configured if isinstance(configured, list) else [] if configured is None else [configured])
    return sorted(ids)


def longest_prompt(model: Path, rollouts: Path) -> int:
    """The longest prompt of the rollouts, in the model's tokens."""
    from transformers import AutoTokenizer

    tokenizer: Any = AutoTokenizer.from_pretrained(str(model))
    prompts = {json.loads(line)["prompt"] for line in rollouts.read_text().splitlines()}
    return max(len(ids) for ids in tokenizer(text=sorted(prompts))["input_ids"])


def full_length_shim(folder: Path, end_ids: list[int]) -> Path:
    """A `sitecustomize.py` in `folder` that makes TRL's generation, either engine, run every completion to
    max_completion_length: the end-of-sequence tokens `end_ids` suppressed (`suppress_tokens`, a logits processor
    HF `generate` and continuous batching both apply; `min_new_tokens`, which continuous batching drops, is not used).
    The step whose sequences all reach the plan's length. A measurement device of this script only; `burnqed rl`
    itself stops at the end-of-sequence token."""
    folder.mkdir(parents=True, exist_ok=True)
    text = ("import trl\n"
            "_init = trl.GRPOConfig.__post_init__\n"
            "def _full(self):\n"
            "    _init(self)\n"
            "    kwargs = self.generation_kwargs or {}\n"
            f"    self.generation_kwargs = {{**kwargs, 'suppress_tokens': {end_ids!r}}}\n"
            "trl.GRPOConfig.__post_init__ = _full\n")
    shim = folder / "sitecustomize.py"
    if not shim.exists() or shim.read_text() != text:  # engines run at once read it as they start: no rewrite
        shim.write_text(text)
    return folder


def plan_text(model: Path, sets: list[str], gpu_gib: float) -> str:
    """The cluster's GPU memory plan of the rl step for `model`'s shape and these settings, on a card of `gpu_gib`."""
    sys.path.insert(0, str(ROOT))
    from burnqed.cluster.rl_plan import rl_gpu_plan
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
