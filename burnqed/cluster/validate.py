"""Offline validation of what we render (docs/cluster.md, "Validation and tests"): Argo documents against Argo's
JSON schema, plain Kubernetes objects with kubernetes-validate in strict mode. Used by `burnqed render --check`.

    problems = validate_documents(docs)            # [] when every document is valid
    argo_problems(doc)                             # one Argo document: ["spec.templates[0].nodeSelecter: ..."]
    kubernetes_problems(doc)                       # one plain Kubernetes object

The vendored schema (burnqed/cluster/schemas/, see its README) is patched in memory: the kind's own definition as
the root, integers for IntOrString and Quantity, `additionalProperties: false` everywhere so a typo is an error. It
checks structure only (template references and `{{…}}` are the Argo Server's lint). Needs the dev extra.
"""

from __future__ import annotations

import copy
import functools
import importlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from burnqed.errors import ConfigError

SCHEMA_DIR = Path(__file__).parent / "schemas"
ARGO_SCHEMA = SCHEMA_DIR / "argo-workflows-v4.0.10.schema.json"
ARGO_API_GROUP = "argoproj.io"
ARGO_DEFINITION = "io.argoproj.workflow.v1alpha1."
INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
KUBERNETES_VERSION = "1.33"
MAX_PROBLEMS = 20  # per document


def _module(name: str) -> Any:
    # jsonschema and kubernetes_validate ship no type information; they are dev-extra tools.
    try:
        return importlib.import_module(name)
    except ImportError:
        raise ConfigError(f"validation needs {name} (pip install 'burnqed[dev]')") from None


def patch_definitions(definitions: Mapping[str, Any], *, strict: bool = True) -> dict[str, Any]:
    """A copy of the schema's definitions with integers allowed for IntOrString / Quantity and, when `strict`,
    `additionalProperties: false` on every definition that lists properties and says nothing about extras."""
    patched = copy.deepcopy(dict(definitions))
    patched[INT_OR_STRING] = {"type": ["string", "integer"]}
    patched[QUANTITY] = {"type": ["string", "integer", "number"]}
    if strict:
        for definition in patched.values():
            if isinstance(definition, dict) and "properties" in definition:
                definition.setdefault("additionalProperties", False)
    return patched


@functools.cache
def _argo_definitions(path: Path, strict: bool) -> dict[str, Any]:
    try:
        schema = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read the Argo schema {path}: {exc}") from None
    return patch_definitions(schema["definitions"], strict=strict)


@functools.cache
def _argo_validator(path: Path, kind: str, strict: bool) -> Any:
    definitions = _argo_definitions(path, strict)
    if ARGO_DEFINITION + kind not in definitions:
        return None
    root = {"$ref": f"#/definitions/{ARGO_DEFINITION}{kind}", "definitions": definitions}
    return _module("jsonschema").Draft202012Validator(root)


def _where(path: Iterable[Any]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text or "(document)"


def argo_problems(
    doc: Mapping[str, Any], *, schema: Path = ARGO_SCHEMA, strict: bool = True, kind: str | None = None
) -> list[str]:
    """What is wrong with one Argo document (Workflow, WorkflowTemplate, ...) as 'path: message' lines. `kind`
    validates a bare object against another Argo definition (e.g. ArtifactRepository) instead of doc's kind."""
    kind = kind or str(doc.get("kind", ""))
    validator = _argo_validator(schema, kind, strict)
    if validator is None:
        return [f"kind {kind!r} is not an Argo kind in {schema.name}"]
    errors = sorted(validator.iter_errors(dict(doc)), key=lambda e: [str(p) for p in e.absolute_path])
    return [f"{_where(e.absolute_path)}: {e.message}" for e in errors[:MAX_PROBLEMS]]


def kubernetes_problems(doc: Mapping[str, Any], *, version: str = KUBERNETES_VERSION) -> list[str]:
    """What is wrong with one plain Kubernetes object (kubernetes-validate, strict: unknown fields are errors)."""
    kv = _module("kubernetes_validate")
    try:
        kv.validate(dict(doc), version, strict=True)
    except kv.ValidationError as exc:
        return [f"{_where(exc.path)}: {exc.message}"]
    except (kv.SchemaNotFoundError, kv.InvalidSchemaError) as exc:
        return [str(exc.message)]
    return []


def is_argo(doc: Mapping[str, Any]) -> bool:
    return str(doc.get("apiVersion", "")).split("/")[0] == ARGO_API_GROUP


def describe(doc: Mapping[str, Any]) -> str:
    meta = doc.get("metadata") or {}
    name = meta.get("name") or meta.get("generateName") or "?"
    return f"{doc.get('kind', '?')}/{name}"


def validate_documents(docs: Iterable[Mapping[str, Any]], *, schema: Path = ARGO_SCHEMA) -> list[str]:
    """Every problem of every document, each prefixed with KIND/NAME; Argo kinds go to the Argo schema, the rest
    to kubernetes-validate."""
    problems = []
    for doc in docs:
        found = argo_problems(doc, schema=schema) if is_argo(doc) else kubernetes_problems(doc)
        problems += [f"{describe(doc)}: {problem}" for problem in found]
    return problems
