"""Which Lean a worker argv runs: the label results record as their `lean_backend` (eval.json, a judged merge's
record), from the argv alone.

    lean_backend_label(["python3", "-m", "minilean"])   # 'minilean'
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

REPLAY_MODULE = "minilean.replay"
MINILEAN_MODULE = "minilean"


def lean_backend_label(command: Sequence[str]) -> str:
    """The `lean_backend` of results produced with the Lean worker argv `command`: 'replay' for the
    embedded replay server, 'minilean' for minilean (`-m minilean`), else 'pantograph'."""
    if any(a == "-m" and b == MINILEAN_MODULE for a, b in pairwise(command)):
        return "minilean"  # also with the replay server as its fallback (minilean/fallback.py)
    if any(REPLAY_MODULE in part for part in command):
        return "replay"
    return "pantograph"
