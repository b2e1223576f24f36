"""`burnqed sft` and `burnqed export`: fine-tune the policy, and turn the result into a servable model folder.

    burnqed sft --iter 0 --data runs/iter_0/data --output runs/iter_0/sft
    burnqed sft --iter 1 --data runs/iter_0/data --trajectories runs/iter_0/trajectories \\
                --init runs/iter_0/sft --output runs/iter_1/sft [--force]
    burnqed export --model runs/iter_0/sft --output runs/iter_0/export [--force]

Settings come from the `sft` section (`--set sft.method=lora --set sft.max_steps=200`) and the prompt format
from `policy.prompt_format`. With no configuration both run on the embedded defaults: full fine-tuning of
the tiny embedded model on CPU. Paths may be URIs (file://, s3://). A finished output is skipped (exit 0)
unless --force. torch/transformers/trl/peft load inside the commands: `burnqed --help` stays light.
"""

from __future__ import annotations

from typing import Annotated

import typer

from burnqed.clikit import ConfigOption, SetOption, reports_errors, setup


@reports_errors
def sft(
    data: Annotated[str, typer.Option("--data", help="Prepared-data folder (pairs.parquet), path or URI.")],
    output: Annotated[str, typer.Option("--output", "-o", help="SFT output folder to publish (path or URI).")],
    iteration: Annotated[int, typer.Option("--iter", min=0, help="Expert-iteration index.")] = 0,
    trajectories: Annotated[
        list[str] | None,
        typer.Option("--trajectories", help="Trajectory prefix to mine positives from (iterations ≥ 1). Repeatable.",
                     show_default=False),
    ] = None,
    init: Annotated[
        str | None,
        typer.Option("--init", help="Previous iteration's SFT output to warm-start from (iterations ≥ 1).",
                     show_default=False),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Redo a finished output; start over (drop checkpoints).")
    ] = False,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Fine-tune the policy on tactic pairs (+ trajectory positives from iteration 1) with TRL.

    From iteration 1 the verified proofs of the trajectories also train the proof formats, and the failed proofs
    they recorded Lean's messages on the repair formats, when sft.proof_examples says so (by default when
    search.mode is whole or hybrid, or search.repair_rounds is above 0).

    Progress lines (loss, lr, tokens/s, eval loss) go to stderr; a summary line to stdout. Checkpoints go to
    OUTPUT-checkpoints; a re-run after a crash resumes from the newest one. With sft.joint at iterations ≥ 1 the
    value model's head is trained with the policy; with sft.processes > 1 the command runs itself under torchrun.
    """
    from burnqed.outputs import check_checkpoint_folder
    from burnqed.sft.joint import check_processes
    from burnqed.sft.launch import is_main_process, launch, needs_launch
    from burnqed.sft.train import SftRequest, run_sft

    cfg, store = setup(config, set_, output=output, folder=True, stage="sft")
    check_checkpoint_folder(store, output)
    if needs_launch(cfg.sft.processes):
        check_processes(cfg.sft, cfg.sft.processes)
        args = ["sft", "--data", data, "--output", output, "--iter", str(iteration),
                *(arg for uri in trajectories or () for arg in ("--trajectories", uri)),
                *(("--init", init) if init else ()), *(("--force",) if force else ()),
                *(("--config", str(config)) if config else ()),
                *(arg for item in set_ or () for arg in ("--set", item))]
        code = launch(cfg.sft.processes, args)
        if code:
            raise typer.Exit(code)
        return
    request = SftRequest(iteration=iteration, data=data, output=output, trajectories=tuple(trajectories or ()),
                         init=init, force=force)
    proofs = cfg.sft.proof_examples if cfg.sft.proof_examples is not None else (
        cfg.search.mode != "step" or cfg.search.repair_rounds > 0)
    outcome = run_sft(request, cfg.sft, cfg.policy.prompt_format, proof_examples=proofs, store=store,
                      form=cfg.policy.declaration_form, ebm=cfg.ebm, salt=cfg.data.split_salt)
    if is_main_process():
        typer.echo(outcome.summary)


@reports_errors
def export(
    model: Annotated[str, typer.Option("--model", help="SFT output folder (path or URI) to export.")],
    output: Annotated[str, typer.Option("--output", "-o", help="Model folder to publish (path or URI).")],
    force: Annotated[bool, typer.Option("--force", help="Redo a finished export.")] = False,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Merge a LoRA/QLoRA adapter into its base (float32) or re-save a full model: safetensors shards + tokenizer.

    The result is checked by generating one tactic with the in-process policy before it is published; sizes
    (parameters, bytes per file) are printed.
    """
    from burnqed.sft.export import ExportRequest, run_export

    cfg, store = setup(config, set_, output=output, folder=True, stage="export")
    outcome = run_export(ExportRequest(model=model, output=output, force=force), cfg.sft, store=store)
    typer.echo(outcome.summary)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the `burnqed` app."""
    app.command("sft")(sft)
    app.command("export")(export)
