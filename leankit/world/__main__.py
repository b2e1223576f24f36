"""`python -m leankit.world`: write (or summarise) the generated world corpus.

    python -m leankit.world --summary                 # families, splits, goals, transitions
    python -m leankit.world --seed 3 --output world.json
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from leankit.corpus import load_corpus
from leankit.world import DEFAULT_SEED, generate_world, world_json, world_summary


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m leankit.world",
                                     description="Generate the world corpus (theorem families, train/pool/test).")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"generator seed (default {DEFAULT_SEED})")
    parser.add_argument("--output", type=Path, help="write the corpus JSON here (a replay --corpus file)")
    parser.add_argument("--summary", action="store_true", help="print one line per family")
    args = parser.parse_args(argv)
    corpus = generate_world(args.seed, reserved=(t.statement for t in load_corpus().theorems))
    if args.output is not None:
        _write_atomic(args.output, world_json(corpus))
        print(f"wrote {args.output}", file=sys.stderr)
    if args.summary or args.output is None:
        print(world_summary(corpus))
    return 0


def _write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` so that a reader sees the old file or the whole new one, never a part."""
    target = path.resolve()  # a link keeps pointing where it did; its target gets the new text
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with partial.open("w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)


if __name__ == "__main__":
    raise SystemExit(main())
