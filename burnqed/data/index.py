"""Reading and writing theorem index files (docs/data.md).

    index = load_theorem_index("s3://bucket/minif2f-test.json", store=store)   # a path or URI
    index = load_local_theorem_index(Path("minif2f-test.json"))             # a local file, no store needed

A malformed file raises `InputError` with one line naming the file and the first problem. An index without a
top-level `name` (the prototype's published benchmark indexes are `{"theorems": [{"name", "statement"}]}`) is
named after its file: `minif2f_test.json` → `minif2f_test`.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from burnqed.errors import InputError
from burnqed.records import TheoremIndex
from burnqed.storage import Store, read_json_model

BUNDLED_DIR = Path(__file__).parent / "bundled"


def bundled_index_path(split: str | None = None) -> Path:
    """The bundled corpus' theorem index: all theorems, or one split (train | test)."""
    return BUNDLED_DIR / (f"theorems-{split}.json" if split else "theorems.json")


def load_theorem_index(path: Path | str, *, store: Store) -> TheoremIndex:
    """Parse and validate a theorem index file (a path, or a URI such as s3://…/theorems.json)."""
    if isinstance(path, Path):
        return load_local_theorem_index(path)
    index = store.read_model(path, TheoremIndex, "theorem index", defaults={"name": _stem(path)})
    return _not_empty(index, path)


def load_local_theorem_index(path: Path) -> TheoremIndex:
    """`load_theorem_index` of a local file."""
    index = read_json_model(path, TheoremIndex, "theorem index", defaults={"name": _stem(path)})
    return _not_empty(index, path)


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
    return TheoremIndex(name=f"{index.name}-{'+'.join(wanted)}", theorems=kept)


def embedded_index(split: str | None = None, world_seed: int = 0) -> TheoremIndex:
    """The theorem index of the embedded defaults: the bundled hand-written theorems and the checked world of
    `world_seed` (`data.world_seed`; burnqed.world.checked, served by minilean), all theorems or one split
    (train | pool | test)."""
    from burnqed.lean.corpus import SPLITS, load_corpus, theorem_index
    from burnqed.world import EMBEDDED_NAME
    from burnqed.world.checked import embedded_world

    if split is not None and split not in SPLITS:
        raise InputError(f"unknown split {split!r}; use one of {', '.join(SPLITS)}")
    bundled = theorem_index(load_corpus(), split).theorems
    name = EMBEDDED_NAME if split is None else f"{EMBEDDED_NAME}-{split}"
    return TheoremIndex(name=name, theorems=[*bundled, *embedded_world(world_seed).index(split).theorems])


def load_index(theorems: str | None, split: str | None, default_split: str | None = None, *, store: Store,
               world_seed: int = 0) -> TheoremIndex:
    """The theorems of `burnqed search|eval --theorems THEOREMS --split SPLIT`: the index file (path or URI), else
    the embedded index (`default_split` of it: eval's is the test split), then only the `split` theorems."""
    index = load_theorem_index(theorems, store=store) if theorems else embedded_index(default_split, world_seed)
    return select_split(index, split) if split else index
