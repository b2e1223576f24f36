"""The parameters every burnqed workflow takes (root, run, iteration) and their placeholders; a helper of the
workflow files here."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from hera.workflows import Parameter

from burnqed.config import Config

ROOT = "{{workflow.parameters.root}}"
RUN = "{{workflow.parameters.run}}"
MODEL = "{{workflow.parameters.model}}"


def remote_root(cfg: Config) -> str | None:
    """`storage.root` when pods can share it (s3:// and the like); None for a local path."""
    scheme, sep, _ = cfg.storage.root.partition("://")
    return cfg.storage.root.rstrip("/") if sep and scheme != "file" else None


def run_name(root: str) -> str:
    """A label- and mutex-safe name of a run root: s3://bucket/runs/exp1 -> bucket-runs-exp1 (long roots are cut
    and get a hash)."""
    body = root.split("://", 1)[-1].lower()
    slug = re.sub(r"[^a-z0-9]+", "-", body).strip("-") or "run"
    if len(slug) > 50:
        digest = hashlib.sha256(root.encode()).hexdigest()[:8]
        slug = f"{slug[:41].rstrip('-')}-{digest}"
    return slug


@dataclass(frozen=True, slots=True)
class Param:
    """A workflow parameter: None as value = required at submission."""

    name: str
    value: str | None
    description: str
    enum: tuple[str, ...] = ()

    def hera(self) -> Parameter:
        if self.value is None:
            return Parameter(name=self.name, description=self.description)
        return Parameter(name=self.name, value=self.value, description=self.description, enum=list(self.enum) or None)


def resolve(params: Sequence[Param], values: Mapping[str, str]) -> list[Param]:
    """`params` with the given values; unknown names are a `ValueError` naming the known ones."""
    known = {p.name for p in params}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"unknown parameter(s) {', '.join(unknown)}; this workflow takes {', '.join(sorted(known))}")
    resolved = []
    for param in params:
        value = values.get(param.name, param.value)
        if value is not None and param.enum and value not in param.enum:
            raise ValueError(f"parameter {param.name} is fixed to {'|'.join(param.enum)} here, got {value!r}")
        resolved.append(replace(param, value=value))
    return resolved


def workflow_params(
    cfg: Config,
    values: Mapping[str, str],
    *,
    iteration: int | None = None,
    run: bool = True,
    extra: Sequence[Param] = (),
) -> list[Param]:
    """root (storage.root; required when that is a local path), run (the mutex name, derived from the root),
    for iterations the iteration (fixed: the DAG of iteration i depends on i), then `extra`; filled in from
    `values` (unknown names are a `ValueError`). A trailing slash of the root is dropped: `{root}/iter_0` must
    not become `…//iter_0`."""
    if values.get("root"):
        values = {**values, "root": values["root"].rstrip("/")}
    root = values.get("root") or remote_root(cfg)
    params = [Param("root", root, "Run root URI (s3://bucket/prefix): artifacts live under {root}/iter_{i}/{stage}/.")]
    if run:
        params.append(Param(
            "run",
            run_name(root) if root else None,
            "Name of the run: the mutex burnqed-run-{run} keeps two iterations of one run from overlapping. "
            "Derive it from the root (burnqed submit does).",
        ))
    if iteration is not None:
        params.append(
            Param("iteration", str(iteration), "Expert-iteration index (fixed for this DAG).", (str(iteration),))
        )
    return resolve([*params, *extra], values)
