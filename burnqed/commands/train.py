"""`burnqed sft`, `burnqed rl` and `burnqed export`: fine-tune the policy, train it on Lean's verdict (GRPO), and turn
the result into a servable model folder (docs/training.md).

    burnqed sft --iter 0 --data runs/iter_0/data --output runs/iter_0/sft
    burnqed sft --iter 1 --data runs/iter_0/data --trajectories runs/iter_0/trajectories \\
                --init runs/iter_0/sft --output runs/iter_1/sft [--force]
    burnqed rl --iter 0 --sft runs/iter_0/sft --theorems runs/iter_0/data/theorems.json --split train,pool \\
               --output runs/iter_0/rl
    burnqed export --sft runs/iter_0/sft --output runs/iter_0/export [--force]

Settings come from the `sft` section and the prompt format from `policy.prompt_format`; with no configuration both
fine-tune the tiny embedded model on CPU. A finished output made from other inputs is refused unless --force.
torch/transformers/trl/peft load inside the commands: `burnqed --help` stays light.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Annotated

import typer

from burnqed.commands.kit import ConfigOption, SetOption, already_done, check_packages, reports_errors, setup
from burnqed.commands.outputs import check_checkpoint_folder
from burnqed.commands.prove import SplitOption, TheoremsOption
from burnqed.commands.vocabulary import OUTPUT_METAVAR, StartOption
from burnqed.runner.requests import StageRequest


@reports_errors
def sft(
    data: Annotated[str, typer.Option("--data", help="Prepared-data folder (pairs.parquet), path or URI.")],
    output: Annotated[str, typer.Option("--output", "-o", metavar=OUTPUT_METAVAR,
                                                      help="SFT output folder to publish (path or URI).")],
    iteration: Annotated[int, typer.Option("--iter", min=0, metavar="I", help=(
        "The expert iteration: 0 trains on the data's pairs, I ≥ 1 also on the positives of --trajectories."))] = 0,
    trajectories: Annotated[
        list[str] | None,
        typer.Option("--trajectories", metavar="PREFIX", show_default=False,
                     help="Trajectory prefix to read (path or URI): the positives to mine (iterations ≥ 1). "
                     "Repeatable."),
    ] = None,
    init: Annotated[
        str | None,
        typer.Option("--init", help="Previous iteration's SFT output to warm-start from (iterations ≥ 1).",
                     show_default=False),
    ] = None,
    start: StartOption = None,
    force: Annotated[
        bool, typer.Option("--force", help="Redo OUTPUT even if it is finished (without it a finished one is reused "
                           "when made with the same inputs, refused when made with others); start over (drop "
                           "checkpoints).")
    ] = False,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Fine-tune the policy on tactic pairs (+ trajectory positives from iteration 1) with TRL.

    When sft.proof_examples says so (by default when search.mode is whole or hybrid, search.repair_rounds is above
    0, or rl.enabled), iteration 0 also trains the whole-proof format on the data's replayed proofs, and from
    iteration 1 the verified proofs of the trajectories train the proof formats and the failed proofs they recorded
    Lean's messages on the repair formats. When sft.sketch_examples says so (by default when search.mode is sketch),
    the sketches verified proofs are train the planner's format and the subgoals sketch searches proved train as
    theorems of their own.

    Progress lines (loss, lr, tokens/s, eval loss) go to stderr; a summary line to stdout. Checkpoints go to
    OUTPUT-checkpoints; a re-run after a crash resumes from the newest one. With sft.joint at iterations ≥ 1 the
    value model's head is trained with the policy; with sft.processes > 1 the command runs itself under torchrun.
    """
    from burnqed.config.sft import proof_examples_on, proofs_kept, sketch_examples_on
    from burnqed.data.theorems import check_training_inputs
    from burnqed.runner.request_inputs import sft_request_inputs
    from burnqed.runner.requests import SftRequest as Asked
    from burnqed.sft.launch import check_processes, is_main_process, needs_launch, stops_with_continue
    from burnqed.sft.model import resolve_base_model
    from burnqed.sft.train import SftRequest, run_sft

    cfg, store = setup(config, set_, output=output, folder=True, stage="sft")
    check_packages("sft", cfg)  # before the data is read
    check_checkpoint_folder(store, output)
    asked = Asked(iteration=iteration, data=data, trajectories=tuple(trajectories or ()), init=init, start=start,
                  sets=tuple(set_ or ()), output=output, force=force)
    if start is not None:  # --start names the best policy so far (under "base" none: the base): it replaces --init
        from burnqed.eval.best_so_far import read_start

        init = read_start(start, store).policy
    made_from = sft_request_inputs(asked, cfg, store)
    if already_done(store, output, "sft output", made_from=made_from, force=force):
        return
    decontaminated = check_training_inputs("sft", cfg, store, data=data, trajectories=trajectories or ())
    if needs_launch(cfg.sft.processes):
        check_processes(cfg.sft, cfg.sft.processes)
        resolve_base_model(cfg.sft.base_model, store=store)  # built or downloaded here, once (`_launched`)
        return _launched(cfg.sft.processes, replace(asked, init=init, start=None), config)  # --start read here
    request = SftRequest(iteration=iteration, data=data, output=output, trajectories=tuple(trajectories or ()),
                         init=init, force=force, made_from=made_from)
    with stops_with_continue("sft", output):  # a stop: one line with the command that resumes
        outcome = run_sft(request, cfg.sft, cfg.policy.prompt_format,
                          proof_examples=proof_examples_on(cfg.sft, cfg.search, cfg.rl),
                          sketch_examples=sketch_examples_on(cfg.sft, cfg.search),
                          proofs_per_theorem=proofs_kept(cfg.sft, cfg.search), store=store,
                          form=cfg.policy.declaration_form, ebm=cfg.ebm, salt=cfg.data.split_salt)
    if is_main_process():
        typer.echo(decontaminated, err=True)  # with the summary: a damaged input stays a refusal of one line
        typer.echo(outcome.summary)


@reports_errors
def export(
    sft: Annotated[str, typer.Option(
        "--sft", metavar="DIR|URI", help="The SFT output to export (`burnqed sft`'s output folder, a path or URI): a "
        "LoRA/QLoRA adapter, merged into its base, or a fully fine-tuned model.")],
    output: Annotated[str, typer.Option("--output", "-o", metavar=OUTPUT_METAVAR,
                                                      help="Model folder to publish (path or URI).")],
    force: Annotated[bool, typer.Option("--force", help="Redo OUTPUT even if it is finished (without it a finished "
                                        "export is reused when made from the same SFT output, refused when made "
                                        "from another).")] = False,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Merge a LoRA/QLoRA adapter into its base (float32) or re-save a full model: safetensors shards + tokenizer.

    The result is checked by generating one tactic with the in-process policy before it is published; sizes
    (parameters, bytes per file) are printed.
    """
    from burnqed.runner.requests import ExportRequest as Asked
    from burnqed.runner.reuse import export_inputs
    from burnqed.sft.export import ExportRequest, run_export

    cfg, store = setup(config, set_, output=output, folder=True, stage="export")
    check_packages("export", cfg)
    asked = Asked(sft=sft, output=output)
    made_from = export_inputs(cfg, store, sft=asked.sft)
    if already_done(store, output, "export", made_from=made_from, force=force):
        return
    outcome = run_export(ExportRequest(model=sft, output=output, force=force, made_from=made_from), cfg.sft,
                         store=store)
    typer.echo(outcome.summary)


@reports_errors
def rl(
    sft: Annotated[str, typer.Option(
        "--sft", metavar="DIR|URI", help="The SFT output to train further (`burnqed sft`'s output folder, a path or "
        "URI): its weights, or its LoRA/QLoRA adapter on its base.")],
    output: Annotated[str, typer.Option("--output", "-o", metavar=OUTPUT_METAVAR,
                                        help="Model folder to publish (path or URI): the form of an SFT output, "
                                        "which `burnqed export --sft` reads.")],
    theorems: TheoremsOption = None,
    split: SplitOption = None,
    iteration: Annotated[int, typer.Option("--iter", min=0, metavar="I", help="The expert iteration.")] = 0,
    trajectories: Annotated[
        list[str] | None,
        typer.Option("--trajectories", metavar="PREFIX", show_default=False,
                     help="Trajectory prefix to read (path or URI): the theorems its search proved are left out when "
                     "rl.theorems is 'unsolved'; with search.repair_rounds > 0 its failed proofs give repair prompts. "
                     "Repeatable."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Redo OUTPUT even if it is finished (without it a finished "
                                        "one is reused when made with the same inputs, refused when made with "
                                        "others); start over (drop checkpoints).")] = False,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Train the policy on Lean's verdict of its own whole proofs (GRPO, TRL's GRPOTrainer).

    Each step samples rl.num_generations whole proofs for each of rl.prompts_per_step theorems (the prompts whole
    search sends, byte for byte), rewards 1.0 a completion that verifies as whole search counts a proof (guard,
    compile, axioms check, kernel recheck, on the Lean pool of the lean section) and 0.0 anything else, and updates
    the policy (rl.loss_type, rl.beta, rl.learning_rate). Theorems: --theorems/--split (the iteration's train and
    pool splits in `iterate`; without --split the train split, of the embedded index without --theorems), with
    rl.theorems = 'unsolved' less those the searches of --trajectories proved. A test-split theorem, or one of the
    benchmark the evals evaluate (pipeline.benchmark; by name or restated), is refused by name before any work. With
    search.repair_rounds > 0 each theorem with a failed proof recorded in --trajectories also gives one repair prompt
    (the prompt search revises that proof with), whose completions are judged alike.

    Progress lines (reward, solved, loss, KL, tokens, Lean seconds per step) go to stderr; a summary line to stdout.
    Checkpoints go to OUTPUT-checkpoints every rl.save_steps; a re-run after a crash or kill -9 resumes from the
    newest complete one. OUTPUT holds the weights or adapter, sft.json (of the SFT output: how export loads it),
    rl.json, rl-log.jsonl (one line per step) and rollouts.jsonl (every completion, its reward and Lean's reason).
    With rl.processes > 1 the command runs itself under torchrun (docs/training.md, "Data-parallel RL").
    """
    from burnqed.data.theorems import check_rl_theorems, rl_index
    from burnqed.lean.pool import LeanPool
    from burnqed.rl import grpo as stage
    from burnqed.runner.request_inputs import rl_request_inputs
    from burnqed.runner.requests import RlRequest as Asked
    from burnqed.sft.launch import World, is_main_process, needs_launch, stops_with_continue

    cfg, store = setup(config, set_, output=output, folder=True, stage="rl")
    check_packages("rl", cfg)  # before the theorems are read and the Lean pool starts
    check_checkpoint_folder(store, output)
    settings = stage.RlSettings.from_config(cfg)  # refuses a prompt format with no whole variant before any work
    index = rl_index(theorems, split, cfg, store=store)  # without --split: the train split
    decontaminated = check_rl_theorems(index, cfg, store=store)  # refuses test and benchmark theorems by name
    asked = Asked(iteration=iteration, sft=sft, theorems=theorems, split=split, trajectories=tuple(trajectories or ()),
                  output=output)
    made_from = rl_request_inputs(asked, cfg, store, index)
    if already_done(store, output, "rl output", made_from=made_from, force=force):
        return
    source = store.local_input(sft)
    record = stage.check_model_folder(source, sft)
    if needs_launch(cfg.rl.processes):  # the checks above ran once, here: each process runs them again, quietly
        stage.base_folder(source, record, store=store)  # an adapter's base, built or downloaded once (`_launched`)
        return _launched(cfg.rl.processes, replace(asked, force=force), config, set_ or ())
    if is_main_process():
        typer.echo(decontaminated, err=True)
        if (warning := stage.untrained_format(sft, store=store)) is not None:
            typer.echo(warning, err=True)
    proved = stage.proved_theorems(trajectories or (), store=store)
    selection = stage.select_theorems(index.theorems, cfg.rl.theorems, proved)
    selection = stage.with_failed_proofs(selection, trajectories or (), settings, store=store)
    request = stage.RlRequest(iteration=iteration, sft=sft, output=output, theorems=theorems, split=split,
                              trajectories=tuple(trajectories or ()), force=force, made_from=made_from)
    workers = max(1, cfg.lean.resolved_workers() // World.from_env().size)  # data-parallel: each pool its share
    pool = partial(LeanPool.from_config, cfg.lean, size=workers, theorems_per_worker=cfg.search.theorems_per_worker)
    with stops_with_continue("rl", output):  # a stop: one line with the command that resumes
        outcome = stage.run_rl(request, selection, settings, store=store, open_pool=pool)
    if is_main_process():
        typer.echo(outcome.summary)


def _launched(processes: int, request: StageRequest, config: Path | None, sets: Sequence[str] = ()) -> None:
    """The command `request` renders, with `--config` and `sets` (each a `--set`), under torchrun in `processes`
    processes (`sft.launch.launch`); typer.Exit with its exit code when it fails. The caller has the base model in
    place first: a default tiny model built under torchrun would be saved by process 0 only (transformers'
    `save_pretrained`), so the processes must find it built (`policy.modelpath.ensure_model` refuses to build it
    there)."""
    from burnqed.sft.launch import launch

    code = launch(processes, [*request.argv(), *(("--config", str(config)) if config else ()),
                              *(word for item in sets for word in ("--set", item))])
    if code:
        raise typer.Exit(code)
