"""Shared pieces of the `burnqed` command modules: the `--config`/`--set` options, configuration loading,
and the decorator that turns typed errors into one stderr line and the documented exit code.

Command modules (`burnqed/cli.py`, `burnqed/commands/*.py`) import from here; `cli.py` registers them.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Annotated, ParamSpec, TypeVar

import typer

from burnqed.config import Config, load_config
from burnqed.errors import BurnqedError, ConfigError, InputError, StoppedError

P = ParamSpec("P")
R = TypeVar("R")

ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", envvar="BURNQED_CONFIG", help="TOML configuration file.", show_default=False),
]
SetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="Override one key: section.key=value (JSON values are parsed: --set lean.workers=4, "
        "--set 'lean.command=[\"repl\",\"Mathlib\"]'). Repeatable; wins over env and file.",
        show_default=False,
    ),
]


def fail(message: str, code: int) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def reports_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Turn burnqed's typed errors into one stderr line and the documented exit code (2 bad input or configuration,
    128 + N stopped by signal N, 1 any other failure)."""

    @wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except (ConfigError, InputError) as exc:
            raise fail(str(exc), 2) from None
        except StoppedError as exc:
            raise fail(str(exc), 128 + exc.signum) from None
        except BurnqedError as exc:
            raise fail(str(exc), 1) from None
        except KeyboardInterrupt:
            raise fail("interrupted", 130) from None

    return wrapper


def configure(config: Path | None, sets: list[str] | None) -> Config:
    logging.basicConfig(
        level=os.environ.get("BURNQED_LOG_LEVEL", "WARNING").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    from burnqed import storage

    cfg = load_config(config, sets or (), os.environ)
    storage.configure(cfg.storage)
    return cfg
