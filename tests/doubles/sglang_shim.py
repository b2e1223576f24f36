#!/usr/bin/env python3
"""SGLang's launcher for the rehearsal's sidecar (tests/cluster/rehearsal.py): images/sglang/entrypoint.sh runs
`$SGLANG_PYTHON -m sglang.launch_server --model-path DIR --host H --port P --mem-fraction-static F [ARGS…]`; this
answers it with `burnqed serve --model DIR --host H --port P` (SGLang's native API on the tiny model, on CPU), from
the PATH's burnqed (the serving venv's). More lenient than SGLang: --mem-fraction-static is checked to be a
fraction in (0, 1) and then ignored (no static pool on CPU); --enable-deterministic-inference (SGLang 0.5.23 reads a
request's sampling_seed only with it) is accepted and needs nothing: `burnqed serve` always honours sampling_seed;
--sampling-defaults takes SGLang's choices and only "openai" is served (`burnqed serve` never reads the model
folder's generation_config.json, which "model" would); the LoRA options of the rl step's sidecar (--enable-lora,
--max-lora-rank, --lora-target-modules, --max-loras-per-batch) are checked for their form, and --enable-lora passed
on (`burnqed serve --enable-lora` sizes each adapter from its own files, so the rank, the modules and the slots are
not enforced); any other extra argument is refused."""

from __future__ import annotations

import argparse
import os
import sys


def main() -> None:
    if sys.argv[1:3] != ["-m", "sglang.launch_server"]:
        sys.exit(f"sglang_shim: expected -m sglang.launch_server, got {sys.argv[1:3]}")
    parser = argparse.ArgumentParser(prog="sglang.launch_server")
    parser.add_argument("--model-path", required=True)
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--mem-fraction-static", type=float, required=True)
    parser.add_argument("--enable-deterministic-inference", action="store_true")
    parser.add_argument("--sampling-defaults", choices=["openai", "model"], default="model")  # SGLang's default
    parser.add_argument("--enable-lora", action="store_true")
    parser.add_argument("--max-lora-rank", type=int)
    parser.add_argument("--lora-target-modules", nargs="+",
                        choices=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    parser.add_argument("--max-loras-per-batch", type=int, default=8)
    args = parser.parse_args(sys.argv[3:])
    if (args.max_lora_rank is not None or args.lora_target_modules) and not args.enable_lora:
        sys.exit("sglang_shim: --max-lora-rank and --lora-target-modules without --enable-lora")
    if args.enable_lora and (args.max_lora_rank is None or args.max_lora_rank < 1 or not args.lora_target_modules):
        sys.exit("sglang_shim: --enable-lora with no adapter at start needs --max-lora-rank and --lora-target-modules "
                 "(SGLang infers them only from --lora-paths)")
    if args.max_loras_per_batch < 1:
        sys.exit(f"sglang_shim: --max-loras-per-batch {args.max_loras_per_batch} is below 1")
    if args.sampling_defaults != "openai":
        sys.exit(f"sglang_shim: --sampling-defaults {args.sampling_defaults} takes sampling defaults from the model "
                 "folder, which burnqed serve does not read")
    if not 0 < args.mem_fraction_static < 1:
        sys.exit(f"sglang_shim: --mem-fraction-static {args.mem_fraction_static} is not in (0, 1)")
    os.execvp("burnqed", ["burnqed", "serve", "--model", args.model_path, "--host", args.host,
                          "--port", str(args.port), *(["--enable-lora"] if args.enable_lora else [])])


if __name__ == "__main__":
    main()
