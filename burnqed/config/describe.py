"""Every configuration key with its type, default and description, read from the pydantic models themselves: what
`burnqed config describe [KEY]` prints and what docs/config.md is generated from (a test fails when it is stale).

    keys = describe()                        # every key, in the order the models declare them
    keys = describe("search.max_nodes")      # one key; describe("search") a section's keys
    print(markdown())                        # docs/config.md

A key is `section.field` (`lean.workers`); a list of tables (`data.sources`) is one key whose entries' fields are
listed after it (`data.sources[].kind`). A key that is not one is `ConfigError` naming the closest key.
"""

from __future__ import annotations

import difflib
import json
import types
import typing
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from burnqed.config.loader import ENV_PREFIX, Config
from burnqed.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Key:
    """One configuration key as a user sets it."""

    path: str  # `lean.workers`, or `data.sources[].kind` for a field of a list's entries
    type: str  # in words: "integer", "list of strings", "one of step, whole, hybrid", …
    default: str  # as JSON ("required" for a field with none)
    description: str

    @property
    def section(self) -> str:
        return self.path.split(".", 1)[0]

    @property
    def settable(self) -> bool:
        """Set by `--set`/env/TOML under this name (entries of a list are set through the list)."""
        return "[]" not in self.path

    @property
    def env(self) -> str:
        """The environment variable that sets it (`BURNQED_LEAN__WORKERS`)."""
        section, _, rest = self.path.partition(".")
        return f"{ENV_PREFIX}{section.upper()}__{rest.upper()}"


def _type_words(annotation: Any) -> str:
    """A type annotation in words."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        present = [a for a in args if a is not type(None)]
        words = " or ".join(_type_words(a) for a in present)
        return f"{words} or null" if len(present) < len(args) else words
    if origin is Literal:
        return "one of " + ", ".join(str(a) for a in args)
    if origin is typing.Annotated:
        return _type_words(args[0])
    if origin in (list, tuple, set, frozenset):
        if not args:
            return "list"
        inner = _type_words(args[0])
        return f"list of values, each {inner}" if inner.startswith("one of ") else f"list of {_plural(inner)}"
    if origin is dict:
        return f"table of {_plural(_type_words(args[1]))}" if args else "table"
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return "one of " + ", ".join(str(member.value) for member in annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "table"
    return {bool: "boolean", int: "integer", float: "number", str: "string"}.get(annotation, str(annotation))


def _plural(words: str) -> str:
    if words.startswith("table of "):
        return "tables of " + words.removeprefix("table of ")
    return {"integer": "integers", "string": "strings", "number": "numbers", "boolean": "booleans",
            "table": "tables"}.get(words, words)


def _default(info: FieldInfo) -> str:
    if info.default_factory is not None:
        value = info.default_factory()  # type: ignore[call-arg]
    elif info.default is PydanticUndefined:
        return "required"
    else:
        value = info.default
    if isinstance(value, BaseModel):
        return "(its fields' defaults)"
    return json.dumps(_jsonable(value), ensure_ascii=False)


def _jsonable(value: Any) -> Any:
    """A default as the TOML/JSON a user would write it (a list of tables without their unset fields)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(item) for item in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


def _entry_model(annotation: Any) -> type[BaseModel] | None:
    """The model of a list's entries (`list[SourceSpec]` → SourceSpec), else None."""
    if typing.get_origin(annotation) in (list, tuple):
        args = typing.get_args(annotation)
        if args and isinstance(args[0], type) and issubclass(args[0], BaseModel):
            return args[0]
    return None


def _walk(model: type[BaseModel], prefix: str) -> list[Key]:
    keys: list[Key] = []
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        keys.append(Key(path, _type_words(info.annotation), _default(info), " ".join((info.description or "").split())))
        entry = _entry_model(info.annotation)
        if entry is not None:
            keys += _walk(entry, f"{path}[].")
    return keys


def all_keys() -> list[Key]:
    """Every key of every section, in the order the models declare them."""
    keys: list[Key] = []
    for section, info in Config.model_fields.items():
        model = info.annotation
        assert isinstance(model, type) and issubclass(model, BaseModel)
        keys += _walk(model, f"{section}.")
    return keys


def describe(key: str | None = None) -> list[Key]:
    """The keys under `key` (a whole key, a section, or a list's entries `data.sources`); every key without one.
    `ConfigError` for a name that is neither, naming the closest key."""
    keys = all_keys()
    if not key:
        return keys
    chosen = [k for k in keys if k.path == key or k.path.startswith(f"{key}.") or k.path.startswith(f"{key}[].")]
    if chosen:
        return chosen
    close = difflib.get_close_matches(key, [k.path for k in keys] + list(Config.model_fields), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]}?" if close else "; `burnqed config describe` lists every key"
    raise ConfigError(f"no configuration key or section {key!r}{hint}")


def _table(keys: list[Key]) -> list[str]:
    """The Markdown table of `keys`: their path, type, default and description, a row each."""
    lines = ["| key | type | default | description |", "|---|---|---|---|"]
    for key in keys:
        cells = [f"`{key.path}`", key.type, f"`{key.default}`", key.description]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return lines


def markdown(key: str | None = None) -> str:
    """docs/config.md: a table per section of every key with its type, default and description. With `key` (as
    `describe` reads it: a key, a section or a list's entries) only the table of its rows; `ConfigError` for a name
    that is neither."""
    if key:
        return "\n".join(_table(describe(key))) + "\n"
    lines = [
        "# Configuration keys",
        "",
        "Generated by `burnqed config describe --markdown` from the configuration models (`burnqed/config/`); a test",
        "fails when this page differs from what the models say, so edit the models' descriptions, not this page.",
        "",
        "A key is set in the TOML file given to `--config` (`[section]` then `key = value`), by the environment",
        f"variable `{ENV_PREFIX}SECTION__KEY`, or by `--set section.key=value` (a value that parses as JSON is JSON,",
        "else a string); each overrides the one before. Unknown keys are errors. `burnqed config show` prints the",
        "effective configuration, `burnqed config describe KEY` one key or section. Fields of a list's entries",
        "(`key[].field`) are set through the list (`--set 'data.sources=[{\"kind\": \"bundled\"}]'`).",
    ]
    keys = all_keys()
    for section in Config.model_fields:
        doc = (Config.model_fields[section].description or "").strip()
        lines += ["", f"## `{section}`", ""]
        if doc:
            lines += [doc, ""]
        lines += _table([entry for entry in keys if entry.section == section])
    return "\n".join(lines) + "\n"
