"""Reading and writing theorem index files (docs/data.md).

    index = load_theorem_index("s3://bucket/minif2f-test.json", store=store)   # a path or URI
    index = load_local_theorem_index(Path("minif2f-test.json"))             # a local file, no store needed
    index = theorem_index(load_corpus(), "test")                            # a leankit corpus' (or world's)

    python -m burnqed.data.index --write-index burnqed/data/bundled [--corpus PATH]   # the bundled index files

A malformed file raises `InputError` naming the file and the first problem; a file that is no index names
`burnqed data prepare` (`prepare_hint`), and a JSON object of other keys is `OtherDocumentError`, saying what it is
(`other_document`). An index without a top-level `name` is named after its file. What `--theorems` reads, a
benchmark included, is `burnqed.data.theorems`.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from burnqed.errors import InputError
from burnqed.records.theorem import Theorem, TheoremIndex
from burnqed.storage import Store, is_remote, local_path, read_json_model

if TYPE_CHECKING:
    from leankit.corpus import Corpus
    from leankit.world.checked import World

# Files a user passes as --theorems that hold theorems but are no index: what `burnqed data prepare` reads.
NOT_AN_INDEX = {".lean": "a Lean source file", ".jsonl": "a JSON lines file", ".parquet": "a Parquet file"}

BUNDLED_DIR = Path(__file__).parent / "bundled"


BUNDLED_SPLITS: tuple[str | None, ...] = (None, "train", "test")  # the bundled index files: all theorems, two splits


def bundled_index_path(split: str | None = None) -> Path:
    """The bundled corpus' theorem index: all theorems, or one split (train | test)."""
    return BUNDLED_DIR / (f"theorems-{split}.json" if split else "theorems.json")


def load_theorem_index(path: Path | str, *, store: Store) -> TheoremIndex:
    """Parse and validate a theorem index file (a path, or a URI such as s3://…/theorems.json)."""
    if isinstance(path, str):
        refuse_empty(path)
    if isinstance(path, Path) or not is_remote(path):
        return load_local_theorem_index(local_path(str(path)) if isinstance(path, str) else path, shown=str(path))
    _refuse_other_formats(path)
    try:
        index = store.read_model(path, TheoremIndex, "theorem index", defaults={"name": _stem(path)})
    except InputError as exc:
        refusal = exc
    else:
        return _not_empty(index, path)
    try:
        other = other_document(_json_of(store.read_bytes(path)))
    except InputError:  # it cannot be read at all: the refusal says so
        other = None
    if other is None:
        raise refusal
    raise OtherDocumentError(path, other) from None


def load_local_theorem_index(path: Path, *, shown: str | None = None) -> TheoremIndex:
    """`load_theorem_index` of a local file (`shown`: the path as the user gave it, for the hint)."""
    given = shown if shown is not None else str(path)
    if path.is_dir():
        prepared = path / "theorems.json"
        way = f"did you mean {prepared}?" if prepared.is_file() else prepare_hint(given)
        raise InputError(f"theorem index {path} is a folder, not a theorem index file; {way}")
    if not path.exists():
        raise InputError(f"theorem index {path} does not exist")
    _refuse_other_formats(given)
    try:
        index = read_json_model(path, TheoremIndex, "theorem index", defaults={"name": _stem(path)})
    except InputError as exc:
        if not not_an_index(path):  # an index with a bad entry: the problem is in it, not in how it was made
            raise
        other = other_document(_json_of(path.read_bytes()))
        if other is not None:
            raise OtherDocumentError(str(path), other) from None
        raise InputError(f"{exc}; a theorem index is the theorems.json `burnqed data prepare` writes: "
                         f"{prepare_hint(given)}") from None
    return _not_empty(index, path)


INDEX_SHAPE = "a JSON object with a `theorems` list, as the theorems.json `burnqed data prepare` writes: docs/data.md"


class OtherDocumentError(InputError):
    """A JSON object given for a theorem index that is none: an eval result, a report, or other keys
    (`other_document` says which, in `other`)."""

    def __init__(self, path: str, other: str) -> None:
        super().__init__(f"theorem index {path} is {other}, not a theorem index ({INDEX_SHAPE})")
        self.path = path
        self.other = other


# The documents of the layers above data/ that a user may give for a theorem index, each known by the fields its
# model requires (`burnqed.eval.result.EvalResult`, `burnqed.report.document.Report`): named here, not imported, as
# data/ stands below eval/ and report/; tests/data/test_theorems.py holds each set to its model.
WRITTEN_ABOVE = (
    (frozenset({"benchmark", "budgets", "config_digest", "cumulative_solved", "ebm", "failure_reasons", "git_commit",
                "iteration", "lean_backend", "model", "pass_n", "per_theorem", "solved_names", "timestamp", "total"}),
     "an eval result (the file `burnqed eval --output` writes)"),
    (frozenset({"gates", "iteration", "iterations", "root", "rows"}),
     "an iteration report (the report.json `burnqed report` writes)"),
)


def other_document(document: object) -> str | None:
    """What a JSON object that is no theorem index is, in words: a document burnqed writes (an eval result, a
    report, a data report: one whose keys include every field its model requires), else the keys it has; None for
    anything else (an index, a list, what is not JSON)."""
    if not isinstance(document, dict) or isinstance(document.get("theorems"), list):
        return None
    from burnqed.data.data_report import DataReport

    data_report = frozenset(name for name, field in DataReport.model_fields.items() if field.is_required())
    written = (*WRITTEN_ABOVE, (data_report, "a data report (the report.json `burnqed data prepare` writes)"))
    for required, words in written:
        if required <= document.keys():
            return words
    keys = [str(key) for key in document]
    shown = ", ".join(keys[:6]) + (f" and {len(keys) - 6} more" if len(keys) > 6 else "")
    return f"a JSON object with the key{'s' if len(keys) > 1 else ''} {shown}" if keys else "an empty JSON object"


def _json_of(data: bytes) -> object:
    try:
        return json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None


def prepare_hint(path: str) -> str:
    """How to make a theorem index of the theorems in `path`: with `burnqed data prepare`, which writes one."""
    return (f"prepare one with `burnqed data prepare --source benchmark={shlex.quote(path)} --output DIR` "
            "(a benchmark; other kinds of source in docs/data.md), which reports what it read, and pass --theorems DIR")


def refuse_empty(path: str) -> None:
    if not path.strip():  # `--theorems "$BENCH"` with BENCH unset: never the default set
        raise InputError("--theorems is empty: give a theorem index file, or leave --theorems out to use the "
                         "embedded benchmark")


def not_an_index(path: Path) -> bool:
    """True when `path` reads but is not a JSON object with a `theorems` list (not JSON, not text, or JSON of
    another shape); False for an index, whatever is wrong inside it, and for a file that cannot be read at all."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError:
        return False
    except (UnicodeDecodeError, json.JSONDecodeError):
        return True
    return not (isinstance(document, dict) and isinstance(document.get("theorems"), list))


def _refuse_other_formats(path: str) -> None:
    suffix = PurePosixPath(path).suffix.lower()
    if suffix in NOT_AN_INDEX:
        raise InputError(f"theorem index {path} is {NOT_AN_INDEX[suffix]}, not a theorem index (JSON); "
                         f"{prepare_hint(path)}")


def _stem(path: Path | str) -> str:
    return PurePosixPath(str(path).rstrip("/")).name.removesuffix(".json") or "theorems"


def _not_empty(index: TheoremIndex, path: Path | str) -> TheoremIndex:
    if not index.theorems:
        raise InputError(f"theorem index {path} lists no theorems")
    return index


def select_split(index: TheoremIndex, split: str) -> TheoremIndex:
    """The theorems of one split (train | valid | pool | test), or of several (`train,pool`), in index order;
    InputError when none has any of them."""
    wanted = [part.strip() for part in split.split(",") if part.strip()]
    kept = [t for t in index.theorems if t.split in wanted]
    if not kept:
        present = sorted({t.split or "none" for t in index.theorems})
        raise InputError(f"theorem index {index.name!r} has no {split!r} theorems (splits: {', '.join(present)})")
    skipped = [declaration for declaration in index.skipped if declaration.split in wanted]
    return TheoremIndex(name=f"{index.name}-{'+'.join(wanted)}", theorems=kept, skipped=skipped)


def embedded_index(split: str | None = None, world_seed: int = 0, world_sketches: bool = False) -> TheoremIndex:
    """The theorem index of the embedded defaults: the bundled hand-written theorems and the checked world of
    `world_seed` (`data.world_seed`; leankit.world.checked, served by minilean; with `world_sketches`,
    `data.world_sketches`, its sketch family too), all theorems or one split (train | pool | test)."""
    from leankit.corpus import SPLITS, load_corpus
    from leankit.world import EMBEDDED_NAME
    from leankit.world.checked import embedded_world

    if split is not None and split not in SPLITS:
        raise InputError(f"unknown split {split!r}; use one of {', '.join(SPLITS)}")
    bundled = theorem_index(load_corpus(), split).theorems
    name = EMBEDDED_NAME if split is None else f"{EMBEDDED_NAME}-{split}"
    world = embedded_world(world_seed, world_sketches)
    return TheoremIndex(name=name, theorems=[*bundled, *theorem_index(world, split).theorems])


def theorem_index(recorded: Corpus | World, split: str | None = None) -> TheoremIndex:
    """The theorem index of a leankit corpus or of the checked world, all theorems or one split, in their order."""
    from leankit.corpus import SPLITS

    if split is not None and split not in SPLITS:
        raise InputError(f"unknown split {split!r}; use one of {', '.join(SPLITS)}")
    name = recorded.name if split is None else f"{recorded.name}-{split}"
    return TheoremIndex(name=name, theorems=[Theorem.from_recorded(theorem) for theorem in recorded.theorems
                                             if split is None or theorem.split == split])


def index_json(index: TheoremIndex) -> str:
    """The exact text of an index file (so a test can compare the bundled files byte for byte)."""
    return json.dumps(index.model_dump(mode="json", exclude_none=True), ensure_ascii=False, indent=2) + "\n"


def write_bundled_index(corpus: Corpus, out_dir: Path) -> list[Path]:
    """Write a corpus' `theorems.json`, `theorems-train.json` and `theorems-test.json` into `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for split in BUNDLED_SPLITS:
        path = out_dir / bundled_index_path(split).name
        path.write_text(index_json(theorem_index(corpus, split)), encoding="utf-8")
        written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m burnqed.data.index --write-index DIR [--corpus PATH]`: the bundled index files of a corpus."""
    from leankit.corpus import load_corpus
    from leankit.failures import BadInput

    parser = argparse.ArgumentParser(prog="python -m burnqed.data.index",
                                     description="Write the theorem index files of a replay corpus.")
    parser.add_argument("--corpus", type=Path, default=None, help="corpus file or folder (default: bundled)")
    parser.add_argument("--write-index", type=Path, metavar="DIR", required=True, help="write theorems*.json into DIR")
    args = parser.parse_args(argv)
    try:
        corpus = load_corpus(args.corpus)
    except BadInput as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for path in write_bundled_index(corpus, args.write_index):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
