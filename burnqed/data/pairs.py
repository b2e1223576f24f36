"""Tactic pairs and the prepared-data folder that `burnqed data prepare` writes and `burnqed sft` reads (docs/data.md,
"The output folder": theorems.json, pairs.parquet, contrastive.json, report.json).

    pairs = read_pairs(folder)            # list[TacticPair]
    write_pairs(folder / "pairs.parquet", pairs)
    pool = read_contrastive(folder)       # ContrastivePool

`state_before` is the pretty-printed goal list *before* the tactic, as Lean printed it; it is what the policy's
prompt shows (`text.prompt.build_prompt`), never the state after.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field

from burnqed.errors import InputError
from burnqed.records.theorem import stable_split
from burnqed.storage import read_json_model
from leankit.corpus import goal_pp, load_corpus

THEOREMS_FILE = "theorems.json"
PAIRS_FILE = "pairs.parquet"
CONTRASTIVE_FILE = "contrastive.json"
REPORT_FILE = "report.json"

PAIRS_SCHEMA = pa.schema(
    [
        pa.field("theorem", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("split", pa.string(), nullable=False),  # train | valid | test
        pa.field("state_before", pa.string(), nullable=False),
        pa.field("tactic", pa.string(), nullable=False),
        pa.field("state_after", pa.string(), nullable=True),  # None when unknown (text-only sources)
        pa.field("depth", pa.int32(), nullable=False),  # 0 = the tactic applied to the root state
    ]
)


@dataclass(frozen=True, slots=True)
class TacticPair:
    """One supervised example: the state before a tactic, and the tactic."""

    theorem: str
    source: str
    split: str
    state_before: str
    tactic: str
    state_after: str | None
    depth: int


def corpus_pairs(limit: int | None = None, valid_fraction: float = 0.2) -> list[TacticPair]:
    """The bundled corpus' recorded proofs (the first proof of each of its first `limit` theorems) as tactic pairs:
    train theorems split train/valid by name hash, test theorems kept as 'test'. The proofs run from where the
    theorem starts (its binder-form start, as data preparation replays them) and states are the whole goal list
    before each tactic, as search sees them. For tests and benchmarks that need pairs without a Lean replay."""
    pairs: list[TacticPair] = []
    for theorem in load_corpus().theorems[:limit]:
        split = "test" if theorem.split == "test" else stable_split(theorem.name, valid_fraction)
        for proof in theorem.binder_proofs()[:1]:
            goals = [theorem.start_goal()]
            for depth, tactic in enumerate(proof):
                state = "\n\n".join(goal_pp(theorem.goals[g]) for g in goals)
                transition = theorem.lookup(goals[0], tactic)
                # load_corpus checked that every recorded proof closes its theorem step by step.
                assert transition is not None and transition.result is not None
                after = "\n\n".join(goal_pp(theorem.goals[g]) for g in [*transition.result, *goals[1:]])
                pairs.append(TacticPair(theorem.name, "bundled", split, state, tactic, after, depth))
                goals = [*transition.result, *goals[1:]]
    return pairs


def pairs_to_table(pairs: Iterable[TacticPair]) -> pa.Table:
    rows = [asdict(pair) for pair in pairs]
    return pa.Table.from_pylist(rows, schema=PAIRS_SCHEMA)


def write_pairs(path: Path, pairs: Sequence[TacticPair]) -> None:
    """Write `pairs` as zstd Parquet at `path` (atomically: temp name, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    # Page checksums: a reader verifies them, so a damaged page is refused instead of read as other pairs.
    pq.write_table(pairs_to_table(pairs), tmp, compression="zstd", write_page_checksum=True)
    tmp.replace(path)


def read_pairs(source: Path, splits: Sequence[str] | None = None) -> list[TacticPair]:
    """Read `pairs.parquet` (or a folder holding one), optionally keeping only `splits`."""
    path = source / PAIRS_FILE if source.is_dir() else source
    if not path.exists():
        raise InputError(f"tactic pairs {path} do not exist (run `burnqed data prepare` first)")
    advice = "restore it, or run `burnqed data prepare` again"
    try:
        table = pq.read_table(path, page_checksum_verification=True)
        missing = [name for name in PAIRS_SCHEMA.names if name not in table.column_names]
        if missing:
            raise InputError(f"tactic pairs {path} lack column(s) {', '.join(missing)} (format: docs/data.md)")
        table = table.select(PAIRS_SCHEMA.names)
        table.validate(full=True)  # text that is not UTF-8 (a flipped bit in a file without page checksums)
        rows = table.to_pylist()
    except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:
        raise InputError(f"tactic pairs {path} are not a readable Parquet file ({' '.join(str(exc).split())}): "
                         f"{advice}") from None
    wanted = set(splits) if splits is not None else None
    return [TacticPair(**row) for row in rows if wanted is None or row["split"] in wanted]


class ContrastivePool(BaseModel):
    """`contrastive.json`: the theorems whose proofs are long enough to give the EBM hard negatives."""

    model_config = ConfigDict(extra="forbid")

    min_depth: int = Field(description="data.contrastive_min_depth: a proof of this many tactics qualifies.")
    theorems: list[str] = Field(description="Theorem names, in theorem index order.")


def read_contrastive(folder: Path) -> ContrastivePool:
    """Read `contrastive.json` of a prepared-data folder (or the file itself)."""
    path = folder / CONTRASTIVE_FILE if folder.is_dir() else folder
    return read_json_model(path, ContrastivePool, "contrastive pool", hint="written by `burnqed data prepare`")
