"""Typed configuration: one TOML file, overridden by `BURNQED_<SECTION>__<KEY>` env vars, overridden by
repeated `--set section.key=value`.

    cfg = load_config(Path("burnqed.toml"), sets=["lean.workers=4"], environ=os.environ)

A value from env or `--set` that parses as JSON is taken as JSON (`--set 'lean.command=["repl","Mathlib"]'`),
anything else as a string. Unknown sections and keys are errors. With no file, no env and no `--set`, every command
runs on the embedded defaults: the replay Lean server on the bundled corpus. Loading is explicit (nothing reads the
environment at import) and every failure is a `ConfigError` naming the key and where its value came from.
"""

from __future__ import annotations

import difflib
import json
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from burnqed.config.cluster import ClusterConfig
from burnqed.config.data import DataConfig
from burnqed.config.ebm import EbmConfig
from burnqed.config.lean import LeanConfig
from burnqed.config.pipeline import PipelineConfig
from burnqed.config.planner import PlannerConfig
from burnqed.config.policy import PolicyConfig
from burnqed.config.rl import RlConfig
from burnqed.config.search import SearchConfig
from burnqed.config.serving import ServingConfig
from burnqed.config.sft import SftConfig
from burnqed.config.storage import StorageConfig
from burnqed.errors import ConfigError

ENV_PREFIX = "BURNQED_"


class Config(BaseModel):
    """The whole configuration; one attribute per section. Frozen, like its sections."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    lean: LeanConfig = Field(default_factory=LeanConfig, description="The Lean edge.")
    policy: PolicyConfig = Field(default_factory=PolicyConfig, description="The policy edge.")
    search: SearchConfig = Field(default_factory=SearchConfig, description="Proof search.")
    planner: PlannerConfig = Field(default_factory=PlannerConfig,
                                   description="The planner of sketch search: the policy, or a second model.")
    data: DataConfig = Field(default_factory=DataConfig, description="Data preparation.")
    sft: SftConfig = Field(default_factory=SftConfig, description="Policy fine-tuning.")
    ebm: EbmConfig = Field(default_factory=EbmConfig, description="The value model.")
    rl: RlConfig = Field(default_factory=RlConfig, description="Reinforcement learning from Lean's verdict (GRPO).")
    storage: StorageConfig = Field(default_factory=StorageConfig, description="Artifact storage.")
    pipeline: PipelineConfig = Field(default_factory=PipelineConfig, description="One expert iteration.")
    cluster: ClusterConfig = Field(default_factory=ClusterConfig, description="Argo / Kubernetes.")
    serving: ServingConfig = Field(default_factory=ServingConfig, description="The GPU sidecar's memory plan.")

    @model_validator(mode="after")
    def _consistent(self) -> Config:
        if self.sft.joint and self.rl.enabled:
            raise ValueError(JOINT_WITH_RL)
        self.planner.grammar(self.lean.max_text_chars)  # the grammar admits no text lean.max_text_chars refuses
        return self


# The joint head reads the hidden states of the policy SFT trained; with the rl stage, export (whose encoder search
# scores with, and which `train-ebm --joint` checks the head against) reads RL's output, another policy.
JOINT_WITH_RL = ("sft.joint and rl.enabled cannot both be on: the joint head is trained on the SFT policy's hidden "
                 "states, but with rl.enabled export and search embed with RL's further-trained policy, another one "
                 "(train-ebm --joint refuses the head only after sft, rl and export have run); turn one off")


def parse_value(raw: str) -> Any:
    """A value from env or `--set`: JSON if it parses as JSON, else the string itself."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def _assign(tree: dict[str, Any], dotted: str, value: Any, origin: str, origins: dict[str, str]) -> None:
    parts = dotted.split(".")
    if len(parts) < 2 or any(not p for p in parts):
        raise ConfigError(f"{origin}: expected section.key, got {dotted!r}")
    node = tree
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"{origin}: {dotted!r} goes inside {part!r}, which is not a table")
        node = child
    node[parts[-1]] = value
    origins[".".join(parts[:2])] = origin


def _env_overrides(environ: Mapping[str, str]) -> list[tuple[str, str, str]]:
    overrides = []
    for name in sorted(environ):
        if not name.startswith(ENV_PREFIX):
            continue
        dotted = ".".join(p.lower() for p in name[len(ENV_PREFIX) :].split("__"))
        if "." not in dotted:
            # BURNQED_CONFIG and the like are not config keys; only SECTION__KEY names are.
            continue
        overrides.append((dotted, environ[name], f"env {name}"))
    return overrides


def _format_validation_error(exc: ValidationError, origins: Mapping[str, str]) -> str:
    problems = []
    for error in exc.errors():
        loc = ".".join(str(part) for part in error["loc"])
        origin = origins.get(".".join(str(p) for p in error["loc"][:2])) or next(
            (o for key, o in origins.items() if key.startswith(loc + ".")), ""
        )
        where = f" (from {origin})" if origin else ""
        if not loc:  # a rule across sections: its message names the keys
            problems.append(str(error["msg"]).removeprefix("Value error, "))
        elif error["type"] == "extra_forbidden":
            problems.append(f"unknown key {loc}{where}{_did_you_mean(error['loc'])}")
        elif (broken := _broken_json(error.get("input"))) is not None:
            problems.append(f"{loc}: {error['input']!r} is not valid JSON ({broken}){where}")
        else:
            value = error.get("input")
            shown = f" got {value!r}" if not isinstance(value, dict) else ""
            problems.append(f"{loc}: {error['msg']};{shown}{where}")
    return "invalid configuration: " + "; ".join(problems)


def _broken_json(value: object) -> str | None:
    """What is wrong with `value` as JSON when it is a string meant as a JSON list or table (it starts with `[` or
    `{`) that `parse_value` kept as a string because it does not parse, else None: such a value was refused for not
    being valid JSON, not for being a string."""
    if not isinstance(value, str) or value.lstrip()[:1] not in ("[", "{"):
        return None
    try:
        json.loads(value)
    except json.JSONDecodeError as exc:
        return f"{exc.msg} at column {exc.colno}"
    return None


def _did_you_mean(loc: Sequence[int | str]) -> str:
    """`, did you mean section.key?` for an unknown key with a close known one beside it (a typo), else ""."""
    model: type[BaseModel] = Config
    for part in loc[:-1]:
        field = model.model_fields.get(str(part))
        annotation = field.annotation if field is not None else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return ""
        model = annotation
    close = difflib.get_close_matches(str(loc[-1]), list(model.model_fields), n=1, cutoff=0.6)
    return f", did you mean {'.'.join([*map(str, loc[:-1]), close[0]])}?" if close else ""


def _read_toml(path: Path) -> dict[str, Any]:
    """The configuration file's tree; `ConfigError` with one line when it cannot be read or parsed."""
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"config file {path} is a directory; give the TOML file in it") from None
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path} is not UTF-8 text ({exc.reason})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None


def load_config(
    path: Path | None = None,
    sets: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
) -> Config:
    """Build the configuration from file < env < `--set`. Raises `ConfigError` with one clear line."""
    tree, origins = _tree(path, sets, environ)
    try:
        return Config.model_validate(tree)
    except ValidationError as exc:
        raise ConfigError(_format_validation_error(exc, origins)) from None


def given_keys(path: Path | None = None, sets: Sequence[str] = (),
               environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every `section.key` the file, the environment or a `--set` gives a value, and where the last one came from
    (`file PATH`, `env NAME`, `--set KEY`); the others hold their defaults. `ConfigError` as `load_config`."""
    return _tree(path, sets, environ)[1]


def _tree(path: Path | None, sets: Sequence[str],
          environ: Mapping[str, str] | None) -> tuple[dict[str, Any], dict[str, str]]:
    """The raw settings of file < env < `--set`, and where each `section.key` came from."""
    tree: dict[str, Any] = {}
    origins: dict[str, str] = {}
    if path is not None:
        tree = _read_toml(path)
        for section, body in tree.items():
            if isinstance(body, dict):
                for key in body:
                    origins[f"{section}.{key}"] = f"file {path}"
    for dotted, raw, origin in _env_overrides(environ if environ is not None else {}):
        _assign(tree, dotted, parse_value(raw), origin, origins)
    for item in sets:
        key, sep, raw = item.partition("=")
        if not sep:
            raise ConfigError(f"--set {item!r}: expected section.key=value")
        _assign(tree, key.strip(), parse_value(raw), f"--set {key.strip()}", origins)
    return tree, origins
