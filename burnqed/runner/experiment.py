"""A run root is one experiment (docs/pipeline.md, "One root, one experiment"): the base model, the benchmark, the
world seed and every setting that defines what its iterations train from and are measured by, recorded in
`ROOT/experiment.json` by the first `iterate` or `run-all` that works under the root (iteration 0's, as a rule).
A later `iterate`, `run-all` or `plan` under the root takes from the record every setting it is not given, and is
refused, before any work, a setting of the experiment it is given otherwise.

    record = read_experiment(store, Layout(root))            # None: nothing recorded yet
    taken = continuation(record, cfg, given, store, root=root, carry=carry)   # InputError naming each difference
    cfg = load_config(path, [*taken, *sets])                  # the root's values under the user's
    write_experiment(store, Layout(root), experiment_of(cfg, given, store, command=...))   # once, before work

Which settings define the experiment is read from the configuration's marks (`config.identity.experiment_keys`:
the prepared data's and the evals' identities); the base model and the benchmark are also stamped by content
(`runner.reuse.stamp`), so a model folder rebuilt in place is another base. The other settings that shape a result
(`identity.result_keys`: how an iteration trains, what the report judges) are recorded too, and taken when not given,
but may be given otherwise: they are an iteration's, not the experiment's. The result-neutral ones (workers,
timeouts, where Lean and the model run) are this machine's: neither recorded nor taken.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from burnqed.config import Config
from burnqed.config.identity import experiment_keys, fields, result_keys
from burnqed.errors import InputError
from burnqed.layout import Layout
from burnqed.provenance import MISSING, InputStamp
from burnqed.runner.reuse import stamp
from burnqed.storage import Store, is_remote

# The settings that name an input read by content: recorded as the path they resolve to here, and stamped.
INPUTS = {"sft.base_model": "base model", "policy.model": "policy model", "pipeline.benchmark": "benchmark"}
UNSET = {"sft.base_model": "the tiny embedded model", "policy.model": "the tiny embedded model",
         "pipeline.benchmark": "the embedded benchmark"}


class Experiment(BaseModel):
    """What a run root's iterations share (`ROOT/experiment.json`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    written_at: datetime = Field(description="When the record was written (UTC).")
    command: str = Field(description="The command that wrote it, as the user typed it.")
    settings: dict[str, object] = Field(description="`section.key` → its value (JSON): every setting that shapes a "
                                        "result (`identity.result_keys`); a local path of `INPUTS` as the absolute "
                                        "path it named.")
    given: list[str] = Field(default_factory=list, description="The settings the command was given (file, env, "
                             "--set, --model), in the configuration's order.")
    inputs: dict[str, InputStamp] = Field(default_factory=dict, description="The base model, the policy model and "
                                          "the benchmark as read then (`runner.reuse.stamp`); absent when unset.")


def _path(value: object) -> object:
    """An input setting's value as recorded: a local path that exists as the absolute path it names from here (so
    that `m`, `./m` and `file://m` agree, and a later command from another folder reads the same one), anything else
    (a remote URI, a hub name, unset) as it is."""
    if not isinstance(value, str) or is_remote(value):
        return value
    path = os.path.expanduser(value.removeprefix("file://"))
    return os.path.abspath(path) if os.path.exists(path) else value


def _values(cfg: Config, keys: Sequence[str]) -> dict[str, object]:
    """`section.key` → its value in `cfg` (JSON; an input's path as `_path` records it), for each of `keys`."""
    data = cfg.model_dump(mode="json")
    values = {}
    for key in keys:
        section, _, name = key.partition(".")
        values[key] = _path(data[section][name]) if key in INPUTS else data[section][name]
    return values


def _recorded_keys() -> list[str]:
    """The settings a record holds: those that shape a result, in the configuration's order. The result-neutral ones
    (how many workers, timeouts, where Lean and the model run) are this machine's and this run's: never taken."""
    keys = set(result_keys(Config))
    return [key for key, _ in fields(Config) if key in keys]


def experiment_of(cfg: Config, given: Mapping[str, str], store: Store, *, command: str) -> Experiment:
    """The record of the experiment `cfg` defines (`given`: the settings the command was given, key → where from)."""
    settings = _values(cfg, _recorded_keys())
    inputs = {role: stamp(str(settings[key]), store) for key, role in INPUTS.items() if settings.get(key) is not None}
    return Experiment(written_at=datetime.now(UTC), command=command, settings=settings,
                      given=[key for key, _ in fields(Config) if key in given], inputs=inputs)


def read_experiment(store: Store, at: Layout) -> Experiment | None:
    """The run root's record, None when it has none (a root made before burnqed recorded it, or a new one)."""
    if not store.exists(at.experiment()):
        return None
    try:
        return Experiment.model_validate_json(store.read_bytes(at.experiment()))
    except ValueError as exc:
        raise InputError(f"{at.experiment()} is not a run root's experiment record ({str(exc).splitlines()[0]}): "
                         "restore it, or use another --root") from None


def write_experiment(store: Store, at: Layout, record: Experiment) -> None:
    """Write the record (`read_experiment`)."""
    store.write_bytes(at.experiment(), (record.model_dump_json(indent=2) + "\n").encode())


def _show(key: str, value: object) -> str:
    if value is None:
        return UNSET.get(key, "unset")
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _content(role: str, was: InputStamp, now: InputStamp) -> str | None:
    """How an input read from the same place holds something else now, or None."""
    if was.uri != now.uri or was.stamp == now.stamp or not was.stamp or not now.stamp:
        return None
    if now.stamp == MISSING:
        return f"{role} {now.uri}: nothing is there any more"
    return f"{role} {now.uri}: it holds something else now (digest {was.stamp} → {now.stamp})"


class Difference(NamedTuple):
    """One way a command changes the root's experiment: in words (`setting: root's → given`), and the arguments that
    give the root's value instead (none for an input that holds something else now)."""

    text: str
    roots: tuple[str, ...] = ()


def _flag(key: str, value: object) -> tuple[str, ...]:
    """The arguments that give `key` its recorded `value`: `--model DIR` for the model, else `--set key=JSON`."""
    if key == "--model":
        return ("--model", str(value))
    return ("--set", f"{key}={value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}")


def differences(record: Experiment, cfg: Config, given: Mapping[str, str], store: Store) -> list[Difference]:
    """Each way the settings `cfg` was `given` differ from the root's experiment, `setting: root's → given` (--model,
    which sets policy.model and sft.base_model alike, as one), and a base model or benchmark that holds something
    else now than when the root recorded it. The settings not given are not compared: they are taken from the
    record (`taken_sets`)."""
    now = _values(cfg, [key for key in experiment_keys(Config) if key in given])
    changed = {key: (record.settings.get(key), value) for key, value in now.items()
               if key in record.settings and record.settings[key] != value}
    both = ("policy.model", "sft.base_model")
    if all(key in changed for key in both) and changed[both[0]] == changed[both[1]]:
        changed = {"--model": changed.pop(both[0]), **{k: v for k, v in changed.items() if k != both[1]}}
    shown = {"--model": both[1]}
    found = [Difference(f"{key}: {_show(shown.get(key, key), was)} → {_show(shown.get(key, key), value)}",
                        _flag(key, was) if was is not None else ()) for key, (was, value) in changed.items()]
    for key, role in INPUTS.items():
        was, value = record.inputs.get(role), now.get(key, record.settings.get(key))
        if was is not None and value is not None and key not in changed and "--model" not in changed:
            moved = _content(role, was, stamp(str(value), store))
            if moved is not None and moved not in (found_.text for found_ in found):
                found.append(Difference(moved))
    return found


def taken_sets(record: Experiment, cfg: Config, given: Mapping[str, str]) -> list[str]:
    """The `--set key=value` that give `cfg` the root's value of every recorded setting it was not given and holds
    otherwise (the root's experiment continued: `iterate --iter 1` alone on a root made with --model M)."""
    current = _values(cfg, [key for key in record.settings if key not in given])
    return [f"{key}={json.dumps(record.settings[key], ensure_ascii=False)}" for key, value in current.items()
            if record.settings[key] != value]


def refusal(root: str, found: Sequence[Difference], anew: str | None) -> str:
    """The one line that refuses a command giving the root's experiment other settings (`found`): each difference,
    then the two ways on: the root's settings (left out, they are taken from it; or given as the root has them), or
    `anew`, the command that starts the new experiment under a new root (None: a command that reads a run, which
    another root made with them serves)."""
    roots = shlex.join(arg for difference in found for arg in difference.roots)
    same = "leave these settings out (the root's are taken)" + (f" or give the root's ({roots})" if roots else "")
    other = (f"start the new experiment under a new root: `{anew}`" if anew is not None
             else "give --root a run root made with them")
    return f"{root} holds one experiment, and this command changes it: {'; '.join(d.text for d in found)}; {same}, " \
           f"or {other}"
