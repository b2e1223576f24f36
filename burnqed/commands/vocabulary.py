"""The one vocabulary of the `burnqed` command line: the command and group classes every command is built with, the
help panels of `burnqed --help`, and the options several commands share under one meaning (docs/commands.md,
"One vocabulary").

    app.command("eval", cls=Command.renaming({"--trajectories": "--trajectories-out"}),
                rich_help_panel=GETTING_STARTED)(evaluate)

`Command` and `Group` show help without typer's type noise (`<str>`, `<int range>`). `Command.renaming({OLD: NEW})`
keeps an old spelling of an option for one release, with a deprecation warning on stderr; `RENAMES` lists every
rename of this release. The shared options (`--model`, `--trajectories`, `--iter`) mean one thing wherever they
appear: docs/commands.md, "One vocabulary".
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, get_args

import typer

# typer names no public type for its (vendored click's) context (fastapi/typer#1867): `Any` here; every class and
# hook of typer's that the vocabulary uses comes through the adapter, burnqed.commands.typerapi
from burnqed.commands.typerapi import BaseCommand, BaseGroup, Option, group_help, named_arguments

if TYPE_CHECKING:
    from burnqed.layout import Layout
    from burnqed.storage import Store

# `burnqed --help` lists its commands in these panels, in this order (burnqed/cli.py registers them so).
GETTING_STARTED = "Getting started"
STAGES = "Pipeline stages"
ANALYSIS = "Analysis"
CLUSTER = "Cluster"
INTERNALS = "Internals"
PANELS = (GETTING_STARTED, STAGES, ANALYSIS, CLUSTER, INTERNALS)
# Every top-level command (or group) and its panel, in the order `burnqed --help` lists them.
LISTING: dict[str, str] = {
    "iterate": GETTING_STARTED, "run-all": GETTING_STARTED, "eval": GETTING_STARTED, "show": GETTING_STARTED,
    "config": GETTING_STARTED,
    "data": STAGES, "sft": STAGES, "rl": STAGES, "export": STAGES, "train-ebm": STAGES, "search": STAGES,
    "merge-trajectories": STAGES, "ebm": STAGES, "start": STAGES, "judge": STAGES,
    "report": ANALYSIS, "compare": ANALYSIS, "summary": ANALYSIS, "plan": ANALYSIS,
    "render": CLUSTER, "submit": CLUSTER, "cluster": CLUSTER, "fetch": CLUSTER,
    "serve": INTERNALS, "lean": INTERNALS, "model": INTERNALS, "world": INTERNALS, "joint-study": INTERNALS,
}
CONFIGURATION = "Configuration"  # the options panel of --config and --set in every command's help

# Old spelling → new spelling, per command path (`burnqed eval` → "eval"): accepted for one release with a
# deprecation line. The tests walk this table; docs/commands.md ("Renamed options") lists it.
RENAMES: dict[str, dict[str, str]] = {
    "eval": {"--trajectories": "--trajectories-out", "--no-trajectories": "--no-trajectories-out"},
    "export": {"--model": "--sft"},
}


def deprecation_line(old: str, new: str) -> str:
    """The line an old spelling prints on stderr (and nothing else changes)."""
    return f"warning: {old} is now {new}; the old spelling goes in the next release"


def _value_metavar(param: Option) -> str:
    """A value option's metavar when its declaration names none: its choices, else a word for its type."""
    desc = param.type_descriptor
    if desc.choices is not None:
        return "|".join(str(c.value if isinstance(c, Enum) else c) for c in desc.choices)
    base = get_args(desc.annotation)[0] if desc.is_list else desc.annotation
    if base is int:
        return "N"
    if base is float:
        return "X"
    if base is Path:
        return "PATH"
    return "TEXT"


def _plain(params: list[Any]) -> list[Any]:
    """`params` with typer's type noise taken out of their help: flags show nothing after their names, value
    options their metavar (arguments their name in capitals: `typerapi.named_arguments`, when the command is built).
    Idempotent (a command's help is rendered often)."""
    for param in params:
        if isinstance(param, Option) and param.metavar is None:
            param.metavar = "" if param.is_flag or param.count else _value_metavar(param)
    return params


def _one_paragraph_summary(text: str | None) -> str | None:
    """A docstring with each paragraph's lines joined: typer's rich help keeps single newlines in the first
    paragraph (the summary `burnqed --help` lists), which the terminal then wraps a second time. Paragraphs with
    indented lines (examples, lists) are kept as written."""
    if text is None:
        return None
    paragraphs = inspect.cleandoc(text).split("\n\n")
    joined = [p if p.startswith("\b") or any(line[:1].isspace() for line in p.splitlines()) else " ".join(p.split("\n"))
              for p in paragraphs]
    return "\n\n".join(joined)


class Command(BaseCommand):
    """Every burnqed command: help without type noise, and the old spellings of `renames` accepted with a
    deprecation line (`Command.renaming`)."""

    renames: ClassVar[Mapping[str, str]] = {}

    def __init__(self, name: str | None, **kwargs: Any) -> None:
        kwargs["help"] = _one_paragraph_summary(kwargs.get("help"))
        kwargs["params"] = named_arguments(kwargs.get("params") or [])
        super().__init__(name, **kwargs)

    @classmethod
    def renaming(cls, renames: Mapping[str, str]) -> type[Command]:
        """A `Command` class that reads each old spelling in `renames` (`--old` → `--new`) as the new one."""
        return type("RenamingCommand", (cls,), {"renames": dict(renames)})

    def get_params(self, ctx: Any) -> list[Any]:
        return _plain(super().get_params(ctx))

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if not self.renames:
            return super().parse_args(ctx, args)
        renames = {old.lstrip("-"): new.lstrip("-") for old, new in self.renames.items()}
        given: list[str] = []

        def new_spelling(name: str) -> str:
            # click asks for every option token it parses (without its dashes), and for each declared name
            if name in renames:
                given.append(name)
                return renames[name]
            return name

        ctx.token_normalize_func = new_spelling
        rest = super().parse_args(ctx, args)
        for old in dict.fromkeys(given):
            typer.echo(deprecation_line(f"--{old}", f"--{renames[old]}"), err=True)
        return rest


class Group(BaseGroup):
    """Every burnqed command group: help without type noise (its own options: `--version`, `-v`, `-h`); called
    without a command (`burnqed`, `burnqed lean`), its help and exit code 2 (`typerapi.group_help`)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs["help"] = _one_paragraph_summary(kwargs.get("help"))
        super().__init__(**kwargs)

    def get_params(self, ctx: Any) -> list[Any]:
        return _plain(super().get_params(ctx))

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if not args and self.no_args_is_help and not ctx.resilient_parsing:
            raise group_help(ctx)
        return super().parse_args(ctx, args)


def command(renames: Mapping[str, str] | None = None) -> type[Command]:
    """The class of a command (`cls=` of `app.command`), with its old spellings when it has any."""
    return Command.renaming(renames) if renames else Command


# ------------------------------------------------------------------------------------------- shared options

# Every --output that a store writes (a path or a URI): one placeholder, what the option takes; a local-only one is a
# Path option, which typer shows as PATH (render's YAML folder, model init-tiny's folder)
OUTPUT_METAVAR = "PATH|URI"
THEOREMS_HELP = ("The theorems: a theorem index (JSON), a prepared-data folder, or a benchmark as you have it, read "
                 "on the fly as `burnqed data prepare --source benchmark=PATH` reads it: a .lean file or a folder of "
                 "them, a DeepSeek/miniF2F .jsonl (docs/data.md). A path or URI.")

MODEL_HELP = ("The policy model: a model folder, path or URI (an `export` output, a Hugging Face folder). The same as "
              "--set policy.model=DIR|URI.")
ModelOption = Annotated[
    str | None,
    typer.Option("--model", metavar="DIR|URI", show_default=False,
                 help=f"{MODEL_HELP} Default: policy.model, else the tiny embedded model."),
]
StartOption = Annotated[
    str | None,
    typer.Option("--start", metavar="PATH|URI", show_default=False,
                 help="The iteration's start record (`burnqed start`, iter_I/start.json): sft reads the policy it "
                 "starts from (none: the base) and train-ebm the value model it warm-starts from (none: afresh), "
                 "each in place of --init; search reads whether to use --ebm (not when it did not help last)."),
]
# iterate, run-all and plan: the policy an iteration starts from is also the base its SFT fine-tunes, so that the
# iteration trains the model its base eval evaluates (`model_set(..., base=True)`).
IterationModelOption = Annotated[
    str | None,
    typer.Option("--model", metavar="DIR|URI", show_default=False,
                 help=f"{MODEL_HELP} Here it is also SFT's base (--set sft.base_model=DIR|URI): iteration 0 evaluates "
                 "it as the untrained base and fine-tunes it, and every export merges into it. The run root keeps it: "
                 "a later iteration there takes it when not given, and refuses another (a new --root is a new "
                 "experiment). Default: the run root's, else sft.base_model (and policy.model), else the tiny "
                 "embedded model."),
]


def model_set(model: str | None, sets: list[str] | None, *, base: bool = False) -> list[str] | None:
    """`--model DIR` as the `--set policy.model=DIR` it equals (last, so it wins over an earlier --set), the value
    JSON-quoted so that a folder named `1` or `true` stays a path; with `base` (iterate, run-all, plan) also
    `--set sft.base_model=DIR`."""
    if model is None:
        return sets
    if not model.strip():  # `--model "$MODEL"` with MODEL unset: never the default model
        from burnqed.errors import InputError

        default = "sft.base_model and policy.model" if base else "policy.model"
        raise InputError(f"--model is empty (an unset variable?): give a model folder (a path or URI), or leave "
                         f"--model out for {default} (unset: the tiny embedded model)")
    value = json.dumps(model, ensure_ascii=False)
    return [*(sets or ()), f"policy.model={value}", *((f"sft.base_model={value}",) if base else ())]


def last_iteration(at: Layout, *, store: Store, finished: Callable[[int], str] | None = None) -> int | None:
    """The `--iter` default of the commands that read a finished run (report, show, joint-study): the last iteration
    under the run root `at` (iterations run in order from 0), or with `finished` the last whose artifact
    `finished(i)` exists; None when there is none."""
    last = None
    i = 0
    while store.exists(at.iter_dir(i)):
        if finished is None or store.exists(finished(i)):
            last = i
        i += 1
    return last


def require_run_root(at: Layout, *, store: Store, command: str) -> None:
    """`InputError` when the run root `at` does not exist (it holds no iteration), naming the run roots beside it
    whose names are near (a mistyped --root) and `command`, which starts a new run there."""
    from burnqed.errors import InputError

    if not store.exists(at.root):
        near = near_run_roots(at.root)
        meant = f"; did you mean {' or '.join(f'--root {name}' for name in near)}? a" if near else "; a"
        raise InputError(f"{at.root} does not exist, so it holds no run{meant} new run starts there with `{command}`")


def near_run_roots(root: str) -> list[str]:
    """The run roots (folders holding iter_0) beside the local `root` whose names are close to its name (a typo's
    distance: difflib's ratio ≥ 0.6), as a user would type them here; none for a remote root."""
    import difflib
    import os

    from burnqed.storage import is_remote, local_path

    if is_remote(root):
        return []
    path = local_path(root)
    try:
        runs = [entry.name for entry in path.parent.iterdir() if (entry / "iter_0").is_dir()]
    except OSError:
        return []
    shown = []
    for name in difflib.get_close_matches(path.name, runs, n=3, cutoff=0.6):
        relative = os.path.relpath(path.parent / name)
        shown.append(str(path.parent / name) if relative.startswith("..") else relative)
    return shown


def last_evaluated(at: Layout, *, store: Store, command: str) -> int:
    """The last iteration under the run root `at` whose eval finished (`start`'s and `report`'s `--iter` base);
    `InputError` naming `command` when none did."""
    from burnqed.errors import InputError

    last = last_iteration(at, store=store, finished=at.eval_result)
    if last is None:
        raise InputError(f"{at.root} holds no iteration with a finished eval ({at.eval_result(0)}, …): run "
                         f"`{command}` first, or give --root and --iter")
    return last
