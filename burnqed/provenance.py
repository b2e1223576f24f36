"""What a stage output was made from, and how two such records differ (docs/pipeline.md, "Reused or refused").

    made = StageInputs(inputs={"--data": InputStamp(uri="runs/iter_0/data", stamp="3f2a…", finished=when)},
                       settings={"--iter": 0, "sft.learning_rate": 0.0002})
    made.difference(now)   # None when `now` would make the same output, else the first difference, in words:
                           # "sft.learning_rate was 0.0002, now 0.001"

A finished output records the `StageInputs` of the run that made it (a completion marker's `made_from`, an eval
result's, a trajectory prefix's `_INPUTS.json`); `burnqed.runner.reuse` builds the record of the run a command
would do and reuses the output only when the two do not differ. A key the finished record lacks counts as its
default there (`StageInputs.defaults`).
"""

from __future__ import annotations

import json
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

MISSING = "missing"  # the stamp of an input that is not there (no completion marker, no file)
INPUTS_NAME = "_INPUTS.json"  # in a trajectory prefix (search, merge-trajectories): its `StageInputs`
IDENTITY_NAME = "_EVAL.json"  # in each pass prefix, written before its first search: what the eval is
OLD_SEARCH_KEY = "search setting "  # + a search setting's name: how earlier records name `section.name`


def when(moment: datetime | None) -> str:
    """A finish time as the reuse lines show it: `2026-11-27 10:02:31 UTC`."""
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC") if moment is not None else "at an unknown time"


class InputStamp(BaseModel):
    """One input of a stage output: where it was read from and what it held then."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    uri: str | None = Field(description="The path or URI read (a local path that exists as its absolute file:// "
                            "URI); None when the input was not given.")
    given: str | None = Field(default=None, description="The path as the command named it, when `uri` records it "
                              "in another form (a relative path).")
    stamp: str = Field(default="", description="Digest of the input's completion marker (a folder output) or of its "
                       "bytes (a file); 'missing' when nothing was there; empty when it is a name, not a path.")
    finished: datetime | None = Field(default=None, description="When the input was finished, as its marker says.")


def _show(value: object) -> str:
    if value is None:
        return "unset"
    return repr(value) if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _item(value: object) -> str:
    return f"'{value}'" if isinstance(value, str) else _show(value)  # a pattern as written, one backslash each


def _changed(key: str, was: object, now: object) -> str:
    """`key was WAS, now NOW`; for two long lists, what was added and removed (a deny list of 35 patterns)."""
    if isinstance(was, list) and isinstance(now, list) and len(_show(was)) + len(_show(now)) > 120:
        added = [_item(item) for item in now if item not in was]
        removed = [_item(item) for item in was if item not in now]
        changes = [f"{item} added" for item in added] + [f"{item} removed" for item in removed]
        return f"{key} changed: " + (", ".join(changes) if changes else "the same items in another order")
    return f"{key} was {_show(was)}, now {_show(now)}"


def _where(stamp: InputStamp) -> str:
    """Where an input was read from, as the command named it and as recorded: `./x (file:///a/x)`."""
    if stamp.uri is None:
        return "not given"
    return f"{stamp.given} ({stamp.uri})" if stamp.given not in (None, stamp.uri) else stamp.uri


def _moved(role: str, was: InputStamp, now: InputStamp) -> str:
    """The difference of an input read from another place, saying why when the command named it alike."""
    line = f"{role} was {_where(was)}, now {_where(now)}"
    named = (was.given or was.uri, now.given or now.uri)
    if named[0] != named[1] or None in named:
        return line
    if now.stamp == MISSING:
        return f"{line}: the same path, and nothing is there from this working folder"
    return f"{line}: the same path, read from another working folder"


class StageInputs(BaseModel):
    """What one stage output was made from (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    inputs: dict[str, InputStamp] = Field(default_factory=dict, description="Role (the option that named it, e.g. "
                                          "`--data`, `--trajectories[1]`, `model`) → the input.")
    settings: dict[str, object] = Field(default_factory=dict, description="Arguments and configuration keys that "
                                        "shape the output → their values (JSON).")
    defaults: dict[str, object] = Field(default_factory=dict, exclude=True, description="Not written: each "
                                        "configuration key's default, what a record written before the key was "
                                        "recorded is compared with (the record a command builds has them).")

    def difference(self, now: StageInputs) -> str | None:
        """The first way `now` (the run a command would do) differs from this record (the finished output's), in
        words, or None when it would make the same output."""
        for role in dict.fromkeys([*self.inputs, *now.inputs]):
            was = self.inputs.get(role, InputStamp(uri=None))
            is_ = now.inputs.get(role, InputStamp(uri=None))
            if was.uri != is_.uri:
                return _moved(role, was, is_)
            if was.stamp == is_.stamp or not was.stamp or not is_.stamp:
                continue
            if is_.stamp == MISSING:
                return f"{role} {is_.uri} is not there any more (it was finished {when(was.finished)})"
            if was.stamp == MISSING:
                return f"{role} {is_.uri} was not there then, now it is (finished {when(is_.finished)})"
            dates = (f"it was finished {when(was.finished)}, now {when(is_.finished)}"
                     if was.finished is not None and is_.finished is not None else "its content differs")
            return f"{role} {is_.uri} was made again since ({dates})"
        for key, value in self.settings.items():
            if key in now.settings and now.settings[key] != value:
                return _changed(key, value, now.settings[key])
        return next(filter(None, (self._unrecorded(key, value, now) for key, value in now.settings.items()
                                  if key not in self.settings)), None)

    def _unrecorded(self, key: str, value: object, now: StageInputs) -> str | None:
        """How this record, which lacks `key`, differs on it from `now`: under the name an earlier burnqed gave a
        search setting, else as the key's default."""
        named = f"{OLD_SEARCH_KEY}{key.partition('.')[2]}"
        if named in self.settings:
            return _changed(key, self.settings[named], value) if self.settings[named] != value else None
        if key in now.defaults and value != now.defaults[key]:
            return f"{key} was not recorded (the output predates it: its default {_show(now.defaults[key])} then), " \
                   f"now {_show(value)}"
        return None
