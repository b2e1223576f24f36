"""Saved documents read across their schema versions: a registry of migrations, version N → N + 1, applied at the
edge where a document is read, so that the rest of burnqed sees the current record only.

    MIGRATIONS = Migrations("eval result", {1: add_mode, 2: add_wall_s, …, 9: settings_as_config})
    MIGRATIONS.current                 # 10: one past the last step
    MIGRATIONS.upgrade(raw)            # a version-4 document (JSON, as read) made a version-10 one

A document records its `schema_version`; a change of its format (a field renamed, moved or dropped, a configuration
key renamed: `rename_keys`) is a new version and one more step here, never an edit of an earlier step.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Step = Callable[[dict[str, Any]], dict[str, Any]]  # a version-N document (JSON) → the same as a version N + 1 one


@dataclass(frozen=True, slots=True)
class Migrations:
    """The migrations of one kind of saved document: `steps[N]` makes a version-N document a version N + 1 one;
    the steps run from version 1 without a gap (`ValueError` otherwise)."""

    document: str  # what the document is called in messages ("eval result")
    steps: dict[int, Step]

    def __post_init__(self) -> None:
        if sorted(self.steps) != list(range(1, len(self.steps) + 1)):
            raise ValueError(f"the migrations of the {self.document} must run from version 1 without a gap, "
                             f"not {sorted(self.steps)}")

    @property
    def current(self) -> int:
        """The version this burnqed writes: one past the last step."""
        return len(self.steps) + 1

    def upgrade(self, raw: dict[str, Any]) -> dict[str, Any]:
        """`raw` (a document as read, JSON) made a current one by the steps from its `schema_version` on. A document
        that records no version, or a version that is not an earlier one (current, future, not a number), is
        returned as it is: the record's own validation says what is wrong with it."""
        version = raw.get("schema_version")
        if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version < self.current:
            return raw
        data = copy.deepcopy(raw)
        for step in range(version, self.current):
            data = self.steps[step](data)
            data["schema_version"] = step + 1
        return data


def added(top: Mapping[str, Any] | None = None, **items: Mapping[str, Any]) -> Step:
    """The step of a version that added fields: each absent one gets the value that means "not recorded" in a
    document written before it; `top` at the document's top level, `items` in each entry of the list a document
    holds under that name (`per_theorem={"task": None}`). A version that added nothing a reader must fill has
    `added()`."""

    def step(data: dict[str, Any]) -> dict[str, Any]:
        data = {**(top or {}), **data}
        for name, fields in items.items():
            entries = data.get(name)
            if isinstance(entries, list):
                data[name] = [{**fields, **entry} if isinstance(entry, dict) else entry for entry in entries]
        return data

    return step


def rename_keys(renames: Mapping[str, str], maps: Sequence[tuple[str, ...]]) -> Step:
    """The step of a version that renamed configuration keys (`section.key`, old → new): each map of the document at
    a path of `maps` (`("settings", "config")`: `data["settings"]["config"]`) holds its value under the new name, in
    the same place. A map that is not there is left alone."""

    def step(data: dict[str, Any]) -> dict[str, Any]:
        for path in maps:
            holder: Any = data
            for part in path[:-1]:
                holder = holder.get(part) if isinstance(holder, dict) else None
            if isinstance(holder, dict) and isinstance(holder.get(path[-1]), dict):
                holder[path[-1]] = {renames.get(key, key): value for key, value in holder[path[-1]].items()}
        return data

    return step
