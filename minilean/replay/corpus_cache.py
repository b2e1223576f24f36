"""The replay server's built corpus, kept between starts in the embedded Lean's cache (`minilean.cache`).

    served = load_served(build, corpus=None, folder=cache_folder(os.environ))   # (corpus, vocabulary)

A start of `python -m minilean.replay` builds its corpus (the bundled theorems, the generated world and the
conformance theorems, or a `--corpus` file's theorems, all validated) and the corpus vocabulary: most of its
start-up CPU besides the imports. They are pickled into an entry whose key covers everything the build reads:
every file of the `leankit` and `minilean.replay` packages (the code that builds, validates and defines the corpus,
the bundled and conformance corpora), the `--corpus` files' names and bytes, the Python and pydantic versions.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pydantic
import pydantic_core

import leankit
from leankit.corpus import Corpus, corpus_files
from minilean.cache import cache_folder, cached, input_key

# The packages whose files build the corpus: leankit (the corpus model and checks, the world, the bundled corpus)
# and this one (the conformance theorems and how they are added).
PACKAGES = (Path(leankit.__file__).resolve().parent, Path(__file__).resolve().parent)


class Served(NamedTuple):
    """What a replay start serves: the corpus and its vocabulary (`leankit.world.messages.corpus_vocabulary`)."""

    corpus: Corpus
    vocabulary: frozenset[str]


def entry_key(corpus: Path | None, packages: tuple[Path, ...] = PACKAGES) -> str:
    """The key of the build of `corpus` (None: the embedded corpus): `minilean.cache.input_key` of the versions,
    the corpus files and the `packages`' files."""
    parts = [b"replay corpus", pydantic.VERSION.encode(), pydantic_core.__version__.encode(),
             str(pickle.HIGHEST_PROTOCOL).encode()]
    if corpus is None:
        parts.append(b"embedded")
    else:
        parts.append(b"dir" if corpus.is_dir() else b"file")
        for file in corpus_files(corpus):  # what load_corpus reads (none: the build says what is wrong)
            parts += [file.name.encode(), file.read_bytes()]
    return input_key(parts, packages)


def _dump(served: Served) -> bytes:
    return pickle.dumps((served.corpus, served.vocabulary), protocol=pickle.HIGHEST_PROTOCOL)


def _load(payload: bytes) -> Served | None:
    loaded = pickle.loads(payload)
    if not (isinstance(loaded, tuple) and len(loaded) == 2 and isinstance(loaded[0], Corpus)
            and isinstance(loaded[1], frozenset)):
        return None
    return Served(loaded[0], loaded[1])


def load_served(build: Callable[[], Served], corpus: Path | None, folder: Path | None) -> Served:
    """The cached `build()` of `corpus` (None: the embedded corpus) in `folder`, else `build()` written there
    (None: no cache). What `build` raises (a corpus that fails validation) propagates, and nothing is written."""
    return cached(folder, lambda: entry_key(corpus), build, _dump, _load)


__all__ = ["PACKAGES", "Served", "cache_folder", "entry_key", "load_served"]
