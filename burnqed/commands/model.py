"""`burnqed model …` and `burnqed serve`: the tiny embedded model and the SGLang-compatible local server.

    burnqed model init-tiny --output DIR [--steps N] [--seed S] [--force]
    burnqed serve [--model DIR] [--host 127.0.0.1] [--port 30000] [--config FILE] [--set policy.device=cpu]

`serve` without --model serves `policy.model`, else the default tiny model (built on first use).
torch/transformers load inside the commands (and `burnqed.policy.tiny` imports neither at module level):
`burnqed --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from burnqed.clikit import ConfigOption, SetOption, configure, reports_errors
from burnqed.policy.tiny import DEFAULT_SEED, DEFAULT_STEPS, default_model_dir, ensure_model

model_app = typer.Typer(help="Model folders: build the tiny embedded model.", no_args_is_help=True)


@model_app.command("init-tiny")
@reports_errors
def init_tiny(
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Folder to build. Default: the default model folder "
                     "($BURNQED_HOME/models/tiny-v2 or ~/.cache/burnqed/models/tiny-v2).", show_default=False),
    ] = None,
    steps: Annotated[int, typer.Option("--steps", min=1, help="Training steps (batch 16).")] = DEFAULT_STEPS,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the initialisation and data order.")] = DEFAULT_SEED,
    corpus: Annotated[
        Path | None,
        typer.Option("--corpus", help="Replay corpus to learn from (train split). Default: the bundled corpus plus "
                     "the generated pretraining families (the embedded base policy).", show_default=False),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace a non-empty --output folder.")] = False,
) -> None:
    """Build the tiny Llama-shaped policy (byte-level BPE tokenizer + ~140k parameters) from the corpus.

    Deterministic for a seed; takes about 15 s on 2 CPU cores. Prints a summary line on stdout.
    """
    from burnqed.policy.tiny import build_tiny_model

    build = build_tiny_model(output or default_model_dir(), steps=steps, seed=seed, corpus=corpus, force=force)
    typer.echo(build.summary)


@reports_errors
def serve(
    model: Annotated[
        str | None,
        typer.Option("--model", help="Model folder. Default: policy.model, else the tiny embedded model.",
                     show_default=False),
    ] = None,
    host: Annotated[str, typer.Option("--host", help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port (0 = any free port).")] = 30000,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Serve SGLang's native HTTP API (/generate, /encode, /health, /get_model_info) on a local model.

    Prints `serving MODEL on http://HOST:PORT` on stderr when listening; /health answers 503 until the
    model is loaded. Stops cleanly (exit 0) on SIGTERM or Ctrl-C. Uses policy.device and policy.seed.
    """
    from burnqed.policy.server import serve as run_server

    cfg = configure(config, set_)
    chosen = model if model is not None else cfg.policy.model
    if chosen is not None:
        folder = ensure_model(chosen)  # fails now, before binding, when the folder is not a model
        run_server(folder, host, port, device=cfg.policy.device, seed=cfg.policy.seed)
    else:
        # The default model may need building (~15 s): do it behind /health's 503, not before the bind.
        run_server(default_model_dir(), host, port, device=cfg.policy.device, seed=cfg.policy.seed,
                   prepare=lambda: ensure_model(None))
