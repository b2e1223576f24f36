"""Which configuration keys make up each stage's identity: every field of every section carries a mark (its
`json_schema_extra`) naming the identities its value enters, or saying why it enters none (docs/pipeline.md,
"Reused or refused": what an identity decides).

    revisits: int = Field(default=16, description="…", json_schema_extra=read_by_mode())
    workers: int | None = Field(default=None, description="…", json_schema_extra=neutral("how many processes work"))

    identity_keys(Config, "sft")                    # every `section.key` whose value enters SFT's identity
    experiment_keys(Config)                         # the keys that define a run root's experiment (EXPERIMENT)
    identity_values(cfg, "eval", reads)             # eval's in a mode that reads `reads`, by value (JSON)
    unclassified(Config)                            # the fields without a mark: none (tests/config/test_identity.py)

Which search and eval identities a field enters is not listed here by mode: a field the search engine reads in every
mode (the guard's, the policy's backend and sampling) is `searched()`; one only some modes read is `read_by_mode()`,
and enters a mode's identities when that mode's settings read it. What a mode reads is recorded from its settings'
builder in the search layer (`search.mode.Mode.reads`), which passes it here as `reads`; a new mode needs no mark.

A section whose fields split in two declares its `ROLES`, and each of its fields adds its role to its mark
(`with_role`): the cluster's "client" keys only the submitting side reads (`config.digest.CLIENT_ONLY`), the
planner's "second model" keys that describe a served planner (`config.planner.SECOND_MODEL_KEYS`).

    url: str = Field(..., json_schema_extra=with_role(neutral("where its server listens"), "second model"))
    fields_with_role(PlannerConfig, "second model")  # ("url", …), in the section's order
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Any, Literal, cast, get_args

from pydantic import BaseModel
from pydantic.fields import FieldInfo

Identity = Literal[
    "prepare-data", "trace-data",
    "sft",  # the SFT output
    "sft-joint",  # added to SFT's when sft.joint trains the value model's head too
    "sft-later",  # added to SFT's from iteration 1: what only an iteration ≥ 1 reads (iteration 0's output is shared)
    "sft-checkpoints",  # what an SFT checkpoint may resume under (`sft.checkpoints`)
    "rl",  # the GRPO stage's output (`rl.grpo`)
    "rl-checkpoints",  # what a GRPO checkpoint may resume under
    "export", "train-ebm", "joint-study", "report",
    "search", "eval",  # in every mode, or in the modes that read the key (`read_by_mode`)
]
IDENTITIES: tuple[Identity, ...] = get_args(Identity)
# What a run root's iterations share and are compared by (`experiment_keys`, burnqed.runner.experiment): the prepared
# data every iteration trains from and the evals every iteration is measured by. The other identities (how each
# iteration trains, what the report judges) may change from one iteration to the next.
EXPERIMENT: tuple[Identity, ...] = ("prepare-data", "eval")
KEY = "identity"  # the mark's key in a field's json_schema_extra
ROLE = "role"  # the key of a field's role in its section's split (`with_role`), beside the mark


@dataclass(frozen=True, slots=True)
class Mark:
    """A field's mark: the identities its value enters (search and eval: in every mode, or `by_mode` in the modes
    whose settings read it), and why it enters none (or a note on the ones it does not); `reaches` the identities its
    value decides by another way than its key (a command-line argument the plan builds from it, an input stamped by
    content)."""

    enters: tuple[Identity, ...]
    by_mode: bool
    why: str
    reaches: tuple[Identity, ...] = ()

    @property
    def neutral(self) -> bool:
        """True when the value changes no stage's result (`neutral`)."""
        return not self.enters and not self.reaches and self.why.startswith(NEUTRAL)


def shapes(*identities: Identity, by_mode: bool = False, note: str = "",
           reaches: tuple[Identity, ...] = ()) -> dict[str, Any]:
    """The mark of a field whose value enters `identities` (search and eval: in every mode, or `by_mode` in the
    modes whose settings read it); `note` says how the others see it, if they do, and `reaches` names those it
    decides by another way (`Mark.reaches`)."""
    unknown = [name for name in (*identities, *reaches) if name not in IDENTITIES]
    if not identities or unknown:
        raise ValueError(f"a mark names at least one identity of {IDENTITIES}: {unknown}")
    return {KEY: {"enters": list(identities), "by_mode": by_mode, "why": note, "reaches": list(reaches)}}


def searched(*, stages: tuple[Identity, ...] = (), note: str = "") -> dict[str, Any]:
    """The mark of a field the search engine reads in every mode (the stage reads it whatever the mode: the guard,
    the policy's backend and sampling): it enters search's and eval's identities in every mode, and `stages`'."""
    return shapes("search", "eval", *stages, note=note)


def read_by_mode(*, stages: tuple[Identity, ...] = (), note: str = "") -> dict[str, Any]:
    """The mark of a field some search modes' settings read: it enters search's and eval's identities in each mode
    that reads it (`reads` of `identity_keys`: what the mode's builder reads, `search.mode.Mode.reads`), and
    `stages`'."""
    return shapes("search", "eval", *stages, by_mode=True, note=note)


NEUTRAL = "result-neutral:"  # how a neutral field's `why` starts


def neutral(why: str) -> dict[str, Any]:
    """The mark of a field that changes no stage's result: `why` says what it changes instead."""
    return _outside(f"{NEUTRAL} {why}")


def recorded(how: str, reaches: tuple[Identity, ...] = ()) -> dict[str, Any]:
    """The mark of a field whose effect a stage records otherwise (`how`): an input stamped by content, the
    command-line argument it becomes, an effective value; `reaches` the identities whose stages it so decides (of
    `EXPERIMENT`'s, the ones that make it define a run root's experiment)."""
    unknown = [name for name in reaches if name not in IDENTITIES]
    if unknown:
        raise ValueError(f"a mark reaches identities of {IDENTITIES}: {unknown}")
    return _outside(f"recorded otherwise: {how}", reaches)


def _outside(why: str, reaches: tuple[Identity, ...] = ()) -> dict[str, Any]:
    if not why.split(":", 1)[1].strip():
        raise ValueError("a field outside every identity says why")
    return {KEY: {"enters": [], "by_mode": False, "why": why, "reaches": list(reaches)}}


def mark_of(info: FieldInfo) -> Mark | None:
    """The mark a field carries, or None."""
    extra = info.json_schema_extra
    raw = extra.get(KEY) if isinstance(extra, dict) else None
    if not isinstance(raw, dict):
        return None
    return Mark(enters=tuple(cast("list[Identity]", raw["enters"])), by_mode=bool(raw["by_mode"]),
                why=str(raw["why"]), reaches=tuple(cast("list[Identity]", raw.get("reaches", []))))


def fields(config_model: type[BaseModel]) -> Iterator[tuple[str, FieldInfo]]:
    """Every `section.key` of the configuration model (`Config`) with its field."""
    for section, info in config_model.model_fields.items():
        model = info.annotation
        if isinstance(model, type) and issubclass(model, BaseModel):
            for name, field in model.model_fields.items():
                yield f"{section}.{name}", field


def unclassified(config_model: type[BaseModel]) -> list[str]:
    """The `section.key`s that carry no mark: each must enter an identity or say why not."""
    return [key for key, info in fields(config_model) if mark_of(info) is None]


def identity_keys(config_model: type[BaseModel], identity: Identity,
                  reads: Collection[str] | None = None) -> tuple[str, ...]:
    """The `section.key`s whose value enters `identity`, in the configuration's order: search and eval in a mode
    whose settings read the keys `reads` (`search.mode.Mode.reads`), a key marked `by_mode` when it is one of
    them (None: every key marked for the identity, in any mode)."""
    keys = []
    for key, info in fields(config_model):
        mark = mark_of(info)
        if mark is not None and identity in mark.enters and (reads is None or not mark.by_mode or key in reads):
            keys.append(key)
    return tuple(keys)


def experiment_keys(config_model: type[BaseModel]) -> tuple[str, ...]:
    """The `section.key`s that define a run root's experiment: those whose value enters or reaches an identity of
    `EXPERIMENT` (the prepared data, the evals), in the configuration's order."""
    keys = []
    for key, info in fields(config_model):
        mark = mark_of(info)
        if mark is not None and set(EXPERIMENT) & {*mark.enters, *mark.reaches}:
            keys.append(key)
    return tuple(keys)


def result_keys(config_model: type[BaseModel]) -> tuple[str, ...]:
    """The `section.key`s whose value changes some stage's result: every key but the result-neutral ones."""
    return tuple(key for key, info in fields(config_model) if (mark := mark_of(info)) is not None and not mark.neutral)


def identity_values(config: BaseModel, identity: Identity,
                    reads: Collection[str] | None = None) -> dict[str, object]:
    """`section.key` → its value (JSON) in `config`, for every key of `identity_keys(type(config), identity,
    reads)`."""
    data = config.model_dump(mode="json")
    values: dict[str, object] = {}
    for key in identity_keys(type(config), identity, reads):
        section, _, name = key.partition(".")
        values[key] = data[section][name]
    return values


@functools.cache
def default_values(config_model: type[BaseModel]) -> dict[str, object]:
    """`section.key` → its default value (JSON) for every key of the configuration model: what a setting was in a
    run whose record predates the key (a knob added later defaults to the behaviour before it). Computed once per
    model; do not change the mapping returned."""
    data = config_model().model_dump(mode="json")
    return {key: data[key.partition(".")[0]][key.partition(".")[2]] for key, _ in fields(config_model)}


def with_role(mark: dict[str, Any], role: str) -> dict[str, Any]:
    """`mark` with the field's `role` among its section's `ROLES` (the side of the section's split it is on)."""
    return {**mark, ROLE: role}


def role_of(info: FieldInfo) -> str | None:
    """The role a field's mark gives it (`with_role`), or None."""
    extra = info.json_schema_extra
    role = extra.get(ROLE) if isinstance(extra, dict) else None
    return role if isinstance(role, str) else None


def fields_with_role(section: type[BaseModel], role: str) -> tuple[str, ...]:
    """The names of `section`'s fields whose mark gives them `role`, in the section's order."""
    return tuple(name for name, info in section.model_fields.items() if role_of(info) == role)


def misplaced_roles(config_model: type[BaseModel]) -> list[str]:
    """The `section.key`s whose role is not one of their section's `ROLES`: a field of a split section without its
    role, or with another, and a field with a role in a section that declares none (tests/config/test_identity.py)."""
    misplaced = []
    for key, info in fields(config_model):
        section = config_model.model_fields[key.partition(".")[0]].annotation
        roles: tuple[str, ...] = getattr(section, "ROLES", ())
        role = role_of(info)
        if (role is None and roles) or (role is not None and role not in roles):
            misplaced.append(key)
    return misplaced
