"""`burnqed world`: the generated world of the embedded defaults (leankit.world.checked, docs/replay-corpus.md)."""

from __future__ import annotations

from typing import Annotated

import typer

from burnqed.commands.kit import HELP_OPTIONS, ConfigOption, SetOption, configure, reports_errors
from burnqed.commands.vocabulary import Command, Group

world_app = typer.Typer(help="The generated world the embedded defaults run on (served by minilean).",
                        no_args_is_help=True, context_settings=HELP_OPTIONS, cls=Group)


@world_app.command("stats", cls=Command)
@reports_errors
def stats(
    seed: Annotated[int | None, typer.Option("--seed", min=0, help="World seed (default: data.world_seed).",
                                             show_default=False)] = None,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Print the world's splits, proof depths and template overlap (held-out templates, renamed duplicates); with
    data.world_sketches set, the sketch family's theorems too."""
    from leankit.world.checked import embedded_world, world_stats

    data = configure(config, set_).data
    typer.echo(world_stats(embedded_world(data.world_seed if seed is None else seed, data.world_sketches)))
