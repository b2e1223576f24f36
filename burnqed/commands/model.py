"""`burnqed model …` and `burnqed serve`: the tiny embedded model and the SGLang-compatible local server.

    burnqed model init-tiny --output DIR [--steps N] [--seed S] [--force]
    burnqed serve [--model DIR] [--host 127.0.0.1] [--port 30000] [--config FILE] [--set policy.device=cpu]
    burnqed serve --encode-only [--memory-gib 17] ...      # the value model's encoder (the GPU sidecar)

`serve` serves `--model` (the same as `--set policy.model=…`), else the tiny model (built on first use); /encode
embeds with the `ebm` section's settings (docs/ebm.md). torch/transformers load inside the commands: `burnqed --help`
stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from burnqed.commands.kit import ConfigOption, SetOption, reports_errors, setup
from burnqed.commands.vocabulary import Command, Group, ModelOption, model_set
from burnqed.policy.modelpath import default_model_dir, ensure_model
from burnqed.policy.tiny import DEFAULT_SEED, DEFAULT_STEPS

model_app = typer.Typer(help="Model folders: build the tiny embedded model.", no_args_is_help=True, cls=Group)


@model_app.command("init-tiny", cls=Command)
@reports_errors
def init_tiny(
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Folder to build. Default: the default model folder "
                     "($BURNQED_HOME/models/tiny-v3 or ~/.cache/burnqed/models/tiny-v3).", show_default=False),
    ] = None,
    steps: Annotated[int, typer.Option("--steps", min=1, help="Training steps (batch 16).")] = DEFAULT_STEPS,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the initialisation and data order.")] = DEFAULT_SEED,
    corpus: Annotated[
        Path | None,
        typer.Option("--corpus", help="Replay corpus to learn from (train split). Default: the bundled corpus plus "
                     "the generated pretraining families (the embedded base policy).", show_default=False),
    ] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Replace a tiny model folder init-tiny built before (never a folder holding other files).")
    ] = False,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Build the tiny Llama-shaped policy (byte-level BPE tokenizer + ~140k parameters) from the corpus.

    Deterministic for a seed; takes about 15 s on 2 CPU cores. Prints a summary line on stdout.
    """
    from burnqed.policy.tiny import build_tiny_model

    target = output or default_model_dir()
    setup(config, set_, output=str(target), folder=True)

    build = build_tiny_model(target, steps=steps, seed=seed, corpus=corpus, force=force)
    typer.echo(build.summary)


@reports_errors
def serve(
    model: ModelOption = None,
    host: Annotated[str, typer.Option("--host", help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port (0 = any free port).")] = 30000,
    encode_only: Annotated[
        bool, typer.Option("--encode-only", help="Serve /encode (the value model's encoder) but not /generate.")
    ] = False,
    memory_gib: Annotated[
        float | None,
        typer.Option("--memory-gib", min=0.1, help="On a GPU: cap this process's GPU memory (weights included) at "
                     "this many GiB; with --encode-only the largest encode batch is run once before /health turns "
                     "200. Set by the workflows from the GPU memory plan.", show_default=False),
    ] = None,
    enable_lora: Annotated[
        bool, typer.Option("--enable-lora", help="Serve LoRA adapters (SGLang's flag): /load_lora_adapter, "
                           "/unload_lora_adapter and /generate's lora_path; --model is then the adapters' base.")
    ] = False,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Serve SGLang's native HTTP API (/generate, /encode, /tokenize, /health, /v1/models, /model_info,
    /update_weights_from_disk, and with --enable-lora /load_lora_adapter and /unload_lora_adapter) and
    burnqed's /encoder_info on a local model.

    Prints `serving MODEL on http://HOST:PORT` on stderr when listening; /health answers 503 until the
    model is loaded. Stops cleanly (exit 0) on SIGTERM or Ctrl-C. Uses policy.device and policy.seed, and
    the ebm section's encoder settings for /encode.
    """
    from burnqed.policy.server import serve as run_server
    from burnqed.policy.wire import EncodeSettings

    cfg, store = setup(config, model_set(model, set_))
    ebm = cfg.ebm
    encode = EncodeSettings(pooling=ebm.pooling, normalize=ebm.normalize, max_tokens=ebm.encoder_max_tokens,
                            batch_tokens=ebm.encode_batch_tokens)
    chosen = cfg.policy.model
    # Without a model the default one may need building (~15 s): done behind /health's 503, not before the bind.
    # With one, a folder that is not a model fails now, before binding.
    folder = ensure_model(chosen, store=store) if chosen is not None else default_model_dir()
    prepare = (lambda: ensure_model(None, store=store)) if chosen is None else None
    run_server(folder, host, port, device=cfg.policy.device, seed=cfg.policy.seed, prepare=prepare, encode=encode,
               encode_only=encode_only, memory_gib=memory_gib, enable_lora=enable_lora)
