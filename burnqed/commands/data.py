"""Commands of the data area (being written)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this module's commands to the `burnqed` app."""
