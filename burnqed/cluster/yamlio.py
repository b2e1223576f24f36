"""YAML in and out for the cluster edge: several documents per file, block style, keys in the order given, no
line wrapping (stable golden files).

    text = dump_documents([doc1, doc2], header="# generated")
    docs = load_documents(text)           # empty documents are dropped
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from typing import Any

from burnqed.errors import InputError


def _yaml() -> Any:
    # PyYAML ships no type information; keep it behind this one Any.
    return importlib.import_module("yaml")


def dump_documents(docs: Iterable[Mapping[str, Any]], header: str = "") -> str:
    """`docs` as one YAML stream (`---` between documents), after the comment lines of `header`."""
    yaml = _yaml()
    body = yaml.safe_dump_all([dict(doc) for doc in docs], sort_keys=False, default_flow_style=False, width=10_000,
                              allow_unicode=True, explicit_start=True)
    prefix = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    return prefix + str(body)


def load_documents(text: str, source: str = "YAML") -> list[dict[str, Any]]:
    """The mapping documents of a YAML stream; `InputError` for invalid YAML or a document that is not a mapping."""
    yaml = _yaml()
    try:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: big renders load fast
        docs = [doc for doc in yaml.load_all(text, Loader=loader) if doc is not None]
    except yaml.YAMLError as exc:
        raise InputError(f"{source} is not valid YAML: {' '.join(str(exc).split())}") from None
    for doc in docs:
        if not isinstance(doc, dict):
            raise InputError(f"{source}: a document is a {type(doc).__name__}, expected a mapping")
    return docs
