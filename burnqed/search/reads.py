"""What a search mode reads of the configuration: the `section.key`s of the `[search]`, `[policy]` and `[planner]`
sections that building its settings reads, recorded while they are built (`recorded_reads`). A field marked
`read_by_mode` (`config.identity`) enters a mode's search and eval identities when the mode reads it
(`search.mode.Mode.reads`), so a mode's identity follows its builder and no mark names a mode.

    reads = recorded_reads(lambda search, policy, planner: MODES[mode].settings(Sections(search, policy, planner)),
                           SearchConfig(mode=mode), PolicyConfig(), PlannerConfig())

A read can depend on what another read found (a repair setting read only with search.repair_rounds above 0, the
subgoal mode's settings as search.sketch_subgoal_mode names it): each field read is also set, one at a time, to its
type's other values (the other members of a finite type, 0, 1 and one more for an integer), and the build recorded
again, until no read is new.
"""

from __future__ import annotations

import enum
import functools
import types
import typing
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

from pydantic import ValidationError

from burnqed.config import PlannerConfig, PolicyConfig, SearchConfig
from burnqed.config.section import Section

Build = Callable[[SearchConfig, PolicyConfig, PlannerConfig], object]
SECTIONS: tuple[tuple[str, type[Section]], ...] = (
    ("search", SearchConfig), ("policy", PolicyConfig), ("planner", PlannerConfig))
_NOTED: ContextVar[set[str] | None] = ContextVar("noted", default=None)  # the reads of the build being recorded


@functools.cache
def _noting(section: type[Section], name: str) -> type[Section]:
    """`section` whose instances note each field read, as `name.field`, while a build is recorded."""
    names = frozenset(section.model_fields)

    def __getattribute__(self: Section, key: str) -> Any:
        noted = _NOTED.get()
        if noted is not None and key in names:
            noted.add(f"{name}.{key}")
        return section.__getattribute__(self, key)

    return type(f"Noting{section.__name__}", (section,), {"__getattribute__": __getattribute__, "__module__": __name__})


def _record(build: Build, given: dict[str, dict[str, Any]]) -> set[str] | None:
    """The keys `build` reads over the sections `given` (by field), or None when they are no valid configuration."""
    try:
        search, policy, planner = (_noting(model, name).model_validate(given[name]) for name, model in SECTIONS)
    except ValidationError:
        return None
    noted: set[str] = set()
    token = _NOTED.set(noted)
    try:
        build(search, policy, planner)  # type: ignore[arg-type]
    except ValueError:  # settings these sections cannot have (a grammar no line fits): nothing learnt
        return None
    finally:
        _NOTED.reset(token)
    return noted


def _choices(annotation: Any) -> list[Any]:
    """The values of a finite type (a Literal, an enum, a bool), also inside a union."""
    if annotation is bool:
        return [False, True]
    if typing.get_origin(annotation) is typing.Literal:
        return list(typing.get_args(annotation))
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return list(annotation)
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return [value for arg in typing.get_args(annotation) for value in _choices(arg)]
    return []


def _others(value: Any, annotation: Any) -> Iterator[Any]:
    """The other values tried for a field that holds `value`: a branch on it may read more."""
    yield from (choice for choice in _choices(annotation) if choice != value)
    if isinstance(value, int) and not isinstance(value, bool):
        yield from (other for other in (0, 1, value + 1) if other != value)


def recorded_reads(build: Build, search: SearchConfig, policy: PolicyConfig, planner: PlannerConfig) -> frozenset[str]:
    """The `section.key`s `build` reads over these sections, and over them with each field it reads set to another
    value in turn (`_others`), until no read is new. The sections' own validation refuses a combination; a
    `ValueError` of `build` is settings the combination cannot have: neither adds a read."""
    base = {name: section.model_dump(exclude_unset=True)
            for name, section in (("search", search), ("policy", policy), ("planner", planner))}
    models = dict(SECTIONS)
    found = _record(build, base)
    if found is None:
        raise ValueError(f"the sections given cannot be built: {base}")
    tried: set[str] = set()
    while untried := sorted(found - tried):
        for key in untried:
            tried.add(key)
            name, _, field = key.partition(".")
            section = {"search": search, "policy": policy, "planner": planner}[name]
            for value in _others(getattr(section, field), models[name].model_fields[field].annotation):
                more = _record(build, {**base, name: {**base[name], field: value}})
                found |= more or set()
    return frozenset(found)
