"""A JSON file read into a pydantic model, every problem one line (`BadInput`) naming the file and what is wrong.

    corpus = read_json_model(Path("corpus.json"), Corpus, "corpus file", hint="the format is in docs/replay-corpus.md")

burnqed's `storage.read_json_model` reads its local files through it (the same lines, as burnqed's `InputError`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from leankit.failures import BadInput

M = TypeVar("M", bound=BaseModel)


def read_json_model(
    path: Path, model: type[M], what: str, hint: str = "", defaults: Mapping[str, object] | None = None
) -> M:
    """Read `path` as JSON into `model`; any problem is a `BadInput` naming `what`, the file and the first offending
    field (`hint`, e.g. where the format is documented, is appended). `defaults` are top-level keys added to a JSON
    object that lacks them."""
    suffix = f" ({hint})" if hint else ""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInput(f"{what} {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{what} {path} cannot be read: {exc}") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInput(f"{what} {path} is not valid JSON: {exc}{suffix}") from None
    try:
        return model.model_validate(with_defaults(raw, defaults))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "top level"
        more = f" (and {exc.error_count() - 1} more problems)" if exc.error_count() > 1 else ""
        raise BadInput(f"{what} {path}: {where}: {first['msg']}{more}{suffix}") from None


def with_defaults(raw: object, defaults: Mapping[str, object] | None) -> object:
    """`raw` with the `defaults` keys it lacks, when it is a JSON object."""
    if defaults and isinstance(raw, dict):
        return {**defaults, **raw}
    return raw
