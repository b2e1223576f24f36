"""What a configuration makes the pods read, checked where `render`, `submit` and `cluster check` render
(docs/cluster.md, "What the pods read"): every benchmark, data source and model a pod opens is at a URI the pods
reach, never a path on the machine that renders; and every setting takes effect under the others.

    check_pod_inputs(cfg, root="s3://b/run")   # InputError, one line: each local path, how to upload it, the --set
    check_effect(cfg)                          # ConfigError, one line: each plan setting whose value changes nothing

A setting "has no effect" when it is one the iteration plan turns into the stages' command lines (a `[pipeline]`
field marked `recorded`, outside every identity: the commands are its only effect) and setting it back to its default
builds the very same stages for iterations 0 to 2: derived from `runner.plan`, not listed by hand
(`pipeline.eval_proof_budgets` without a whole or hybrid `eval_modes` stage, `pipeline.search_splits` beside
`pipeline.search_theorems`).
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from burnqed.config import Config, PipelineConfig
from burnqed.config.identity import mark_of
from burnqed.errors import ConfigError, InputError
from burnqed.storage import hub_shaped, is_remote

UPLOADS = "burnqed-inputs"  # the prefix the refusal suggests for uploads, in the run root's bucket
PLACEHOLDER_BUCKET = "s3://BUCKET"  # when no remote run root names one
# What a setting names, which decides what a pod can open: "benchmark" is read as `eval --theorems` reads it (no hub
# dataset), "data" as a data source or a model SFT loads (a hub name too), "model" as `burnqed fetch` downloads it (no
# hub model), "cache" is written by the pod (a URI or nothing)
Kind = Literal["benchmark", "data", "model", "cache"]


@dataclass(frozen=True, slots=True)
class PodInput:
    """A setting whose value a pod opens: its key, its value and what kind of thing it names."""

    key: str
    value: str
    kind: Kind


def pod_inputs(cfg: Config) -> list[PodInput]:
    """The settings of `cfg` whose values the pods open: the benchmark and the searched theorems (`eval|search
    --theorems`), each data source's path (prepare-data), the model `burnqed fetch` downloads for a sidecar
    (sft.base_model while eval-base evaluates it, planner.model when its sidecar serves it), the local backend's
    policy.model where eval-base runs it in-process (sft.base_model unset), the value model's embedding cache."""
    from burnqed.cluster.gpu_plan import planner_sidecar

    found = [PodInput(key, value, "benchmark") for key, value in (
        ("pipeline.benchmark", cfg.pipeline.benchmark), ("pipeline.search_theorems", cfg.pipeline.search_theorems))
        if value is not None]
    found += [PodInput(f"data.sources[{k}].path", source.path, "data")
              for k, source in enumerate(cfg.data.sources) if source.path is not None]
    if cfg.sft.base_model is not None:
        found.append(PodInput("sft.base_model", cfg.sft.base_model, "model" if cfg.pipeline.eval_base else "data"))
    if cfg.planner.model is not None and planner_sidecar(cfg):
        found.append(PodInput("planner.model", cfg.planner.model, "model"))
    if (cfg.policy.model is not None and cfg.policy.backend == "local" and cfg.pipeline.eval_base
            and cfg.sft.base_model is None):  # eval-base runs it in-process (every other step is served)
        found.append(PodInput("policy.model", cfg.policy.model, "data"))
    if cfg.ebm.cache_uri is not None:
        found.append(PodInput("ebm.cache_uri", cfg.ebm.cache_uri, "cache"))
    return found


def unreachable(item: PodInput) -> str | None:
    """Why no pod can open `item`'s value (None when one can): a path on this machine (it exists here, or it is no
    hub name), or a hub name where the reader takes none."""
    if is_remote(item.value):
        return None
    here = Path(item.value.removeprefix("file://")).expanduser()
    if here.is_dir():
        return "a folder on this machine"
    if here.exists():
        return "a file on this machine"
    if hub_shaped(item.value) and item.kind == "data":
        return None  # read from the Hugging Face hub in the pod
    if hub_shaped(item.value):
        return "a Hugging Face hub name, which " + ("`burnqed fetch` does not download" if item.kind == "model"
                                                    else "`eval --theorems` does not read")
    return "a local path, which does not exist here either"


def _bucket(cfg: Config, root: str | None) -> str:
    """`scheme://bucket` of the run root the pods share (`root`, else storage.root), or a placeholder."""
    for candidate in (root, cfg.storage.root):
        if candidate and is_remote(candidate):
            scheme, _, rest = candidate.partition("://")
            return f"{scheme}://{rest.split('/', 1)[0]}"
    return PLACEHOLDER_BUCKET


def _upload(item: PodInput, why: str, bucket: str) -> tuple[str, str]:
    """How to put `item` where the pods reach it (a command) and its URI there."""
    name = posixpath.basename(item.value.rstrip("/")) or "input"
    if "hub name" in why and item.kind == "model":
        uri = f"{bucket}/{UPLOADS}/{name}"
        return f"huggingface-cli download {item.value} --local-dir {name} && aws s3 cp --recursive {name} {uri}", uri
    if "hub name" in why:
        uri = f"{bucket}/{UPLOADS}/{name}.jsonl"
        return (f"python -c \"import datasets; datasets.load_dataset('{item.value}', split='train')"
                f".to_json('{name}.jsonl')\" && aws s3 cp {name}.jsonl {uri}"), uri
    uri = f"{bucket}/{UPLOADS}/{name}"
    recursive = "--recursive " if why.startswith("a folder") else ""
    return f"aws s3 cp {recursive}{item.value} {uri}", uri


def _sets(cfg: Config, uris: dict[str, str]) -> list[str]:
    """The `--set`s that name the uploads (`uris`: key → URI): one per plain key, one for the whole data.sources
    list when a source's path moved (an entry's field is set through its list)."""
    sets = [f"--set {key}={uri}" for key, uri in uris.items() if not key.startswith("data.sources[")]
    if any(key.startswith("data.sources[") for key in uris):
        sources: list[dict[str, Any]] = []
        for k, source in enumerate(cfg.data.sources):
            entry = source.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
            entry["kind"] = source.kind
            if f"data.sources[{k}].path" in uris:
                entry["path"] = uris[f"data.sources[{k}].path"]
            sources.append(entry)
        sets.append(f"--set 'data.sources={json.dumps(sources, ensure_ascii=False)}'")
    return sets


def pod_input_refusal(cfg: Config, root: str | None = None) -> str | None:
    """One line naming every setting whose value no pod can open, with the upload and the `--set` that fix each
    (`root`: the run root the workflow is given, whose bucket the uploads go to); None when the pods reach them all."""
    bucket = _bucket(cfg, root)
    bad: list[str] = []
    commands: list[str] = []
    uris: dict[str, str] = {}
    for item in pod_inputs(cfg):
        why = unreachable(item)
        if why is None:
            continue
        bad.append(f"{item.key} = {item.value!r} ({why})")
        if item.kind == "cache":
            continue
        command, uri = _upload(item, why, bucket)
        if command not in commands:
            commands.append(command)
        uris[item.key] = uri
    if not bad:
        return None
    fix = (f"upload (`{'`; `'.join(commands)}`) and name the URIs in the configuration the pods read "
           f"(the file the chart installs; for render: {' '.join(_sets(cfg, uris))})") if commands else ""
    cache = any(item.startswith("ebm.cache_uri") for item in bad)
    cache_fix = "leave ebm.cache_uri unset (beside train-ebm's output) or name an s3:// URI" if cache else ""
    return (f"the pods cannot open {len(bad)} of this configuration's inputs, which must be URIs they reach "
            f"(s3://…), not paths on this machine: {'; '.join(bad)}: {'; '.join(p for p in (fix, cache_fix) if p)}")


def check_pod_inputs(cfg: Config, root: str | None = None) -> None:
    """`InputError` (exit 2) with `pod_input_refusal`'s line when the pods cannot open an input of `cfg`."""
    refusal = pod_input_refusal(cfg, root)
    if refusal is not None:
        raise InputError(refusal)


# ------------------------------------------------------------------------------ settings without effect

ITERATIONS = (0, 1, 2)  # iteration 2 is the first that reads every start setting (pipeline.start = "base")


def _plan_settings() -> list[str]:
    """The `[pipeline]` fields whose only effect is the commands the plan builds: marked `recorded`, in no
    identity (`config.identity`)."""
    names = []
    for name, info in PipelineConfig.model_fields.items():
        mark = mark_of(info)
        if mark is not None and not mark.enters and mark.why.startswith("recorded otherwise"):
            names.append(name)
    return names


def _commands(cfg: Config) -> tuple[tuple[str, tuple[str, ...]], ...] | None:
    """Every stage's name and command line of iterations 0 to 2 (None when the plan refuses the configuration)."""
    from burnqed.runner.plan import iteration_of

    try:
        return tuple((stage.name, stage.argv) for i in ITERATIONS for stage in iteration_of(cfg, "s3://b/r", i).stages)
    except ValueError:
        return None


def without_effect(cfg: Config) -> list[str]:
    """The plan settings (`_plan_settings`) set away from their defaults in `cfg` whose default builds the same
    stages: their value changes nothing under the other settings."""
    default = PipelineConfig()
    built = _commands(cfg)
    if built is None:
        return []
    found = []
    for name in _plan_settings():
        value, reset = getattr(cfg.pipeline, name), getattr(default, name)
        if value == reset:
            continue
        other = cfg.model_copy(update={"pipeline": cfg.pipeline.model_copy(update={name: reset})})
        if _commands(other) == built:
            found.append(name)
    return found


def check_effect(cfg: Config) -> None:
    """`ConfigError` (exit 2), one line, naming each setting of `without_effect` with its value and what it is for
    (its description), so that the setting it depends on can be set or it can be removed."""
    names = without_effect(cfg)
    if not names:
        return
    fields = PipelineConfig.model_fields
    said = "; ".join(f"pipeline.{name} = {json.dumps(getattr(cfg.pipeline, name))} ({fields[name].description})"
                     for name in names)
    raise ConfigError(f"{len(names)} setting(s) would have no effect under the others (every stage of an iteration "
                      f"runs the same command with or without it): {said}: remove it, or set what it depends on")
