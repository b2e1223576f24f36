"""What `burnqed render` (and so `submit`) takes from the configuration verbatim, checked before a document leaves
(docs/cluster.md, "Values that reach a workflow"): Kubernetes names and label keys that the API server would refuse
only at submission, and values that Argo would read as a template.

    check_cluster_names(cfg.cluster)                 # InputError naming the key: cluster.namespace 'Burnqed' ...
    check_no_templates(cfg, docs, {"root": root})    # InputError: a value with {{…}} reaches a document

Argo substitutes `{{…}}` in every string of a workflow and has no escape for it, so such a value is refused, named.
Newlines, quotes and YAML syntax need nothing: documents are dumped by a YAML emitter (burnqed/cluster/yamlio.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from burnqed.config import ClusterConfig, Config
from burnqed.errors import InputError

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_SUBDOMAIN = re.compile(rf"{DNS_LABEL.pattern}(\.{DNS_LABEL.pattern})*")
LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
# The distribution reference grammar (github.com/distribution/reference): [host[:port]/]path[:tag][@digest]
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_HOST = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?"
IMAGE = re.compile(rf"(?:{_HOST}/)?{_COMPONENT}(?:/{_COMPONENT})*(?::[\w][\w.-]{{0,127}})?(?:@sha256:[0-9a-f]{{64}})?")
OPERATORS = ("Exists", "Equal")
EFFECTS = ("", "NoSchedule", "PreferNoSchedule", "NoExecute")
TEMPLATE_MARKS = ("{{", "}}")


def dns_label(value: str) -> str | None:
    """Why `value` is not a DNS-1123 label (None: it is one)."""
    if len(value) > 63 or not DNS_LABEL.fullmatch(value):
        return "a DNS-1123 label: at most 63 lower-case letters, digits and '-', starting and ending alphanumeric"
    return None


def dns_subdomain(value: str) -> str | None:
    """Why `value` is not a DNS-1123 subdomain (None: it is one)."""
    if len(value) > 253 or not DNS_SUBDOMAIN.fullmatch(value):
        return ("a DNS-1123 subdomain: at most 253 lower-case letters, digits, '-' and '.', each part starting and "
                "ending alphanumeric")
    return None


def label_key(value: str) -> str | None:
    """Why `value` is not a Kubernetes label key, a qualified name [prefix/]name (None: it is one)."""
    prefix, slash, name = value.rpartition("/")
    if slash and (not prefix or dns_subdomain(prefix) is not None):
        return "a label key: its prefix before '/' must be a DNS-1123 subdomain"
    if len(name) > 63 or not LABEL_NAME.fullmatch(name):
        return ("a label key: a name of at most 63 letters, digits, '-', '_' and '.', starting and ending "
                "alphanumeric, after an optional DNS-subdomain prefix and '/'")
    return None


def label_value(value: str) -> str | None:
    """Why `value` is not a Kubernetes label value (None: it is one; empty is one)."""
    if value and (len(value) > 63 or not LABEL_NAME.fullmatch(value)):
        return "a label value: empty, or at most 63 letters, digits, '-', '_' and '.', starting and ending alphanumeric"
    return None


def image_reference(value: str) -> str | None:
    """Why `value` is not an image reference (None: it is one)."""
    if not IMAGE.fullmatch(value):
        return ("an image reference: [registry[:port]/]lower-case/path[:tag][@sha256:digest], no spaces, a tag of at "
                "most 128 letters, digits, '_', '.' and '-'")
    return None


def _refuse(key: str, value: object, problem: str | None) -> None:
    if problem is not None:
        raise InputError(f"{key} = {value!r} is not {problem}; Kubernetes would refuse the workflow only when it is "
                         "submitted: fix the configuration")


def check_cluster_names(cluster: ClusterConfig) -> None:
    """`InputError` naming the first `cluster.*` value that is not the Kubernetes name, label key or value,
    toleration or image reference the rendered documents use it as."""
    from importlib.metadata import version

    _refuse("cluster.namespace", cluster.namespace, dns_label(cluster.namespace))
    for key in ("service_account", "config_map", "s3_secret", "priority_class_gpu", "priority_class_cpu",
                "artifact_repository"):
        value = getattr(cluster, key)
        if value is not None:
            _refuse(f"cluster.{key}", value, dns_subdomain(value))
    for i, secret in enumerate(cluster.image_pull_secrets):
        _refuse(f"cluster.image_pull_secrets[{i}]", secret, dns_subdomain(secret))
    for pool in ("gpu", "cpu"):
        for name, value in getattr(cluster, f"{pool}_node_selector").items():
            _refuse(f"cluster.{pool}_node_selector key", name, label_key(name))
            _refuse(f"cluster.{pool}_node_selector[{name!r}]", value, label_value(value))
        for i, toleration in enumerate(getattr(cluster, f"{pool}_tolerations")):
            _check_toleration(f"cluster.{pool}_tolerations[{i}]", toleration)
    if cluster.gpu_memory_label:
        _refuse("cluster.gpu_memory_label", cluster.gpu_memory_label, label_key(cluster.gpu_memory_label))
    tag = cluster.image_tag or version("burnqed")
    registry = cluster.image_registry.rstrip("/")
    _refuse("cluster.image_registry / cluster.image_tag", f"{registry}/burnqed-core:{tag}",
            image_reference(f"{registry}/burnqed-core:{tag}"))
    if cluster.sglang_image is not None:
        _refuse("cluster.sglang_image", cluster.sglang_image, image_reference(cluster.sglang_image))


def _check_toleration(key: str, toleration: Mapping[str, str]) -> None:
    """Kubernetes' ValidateTolerations: a qualified key (empty only with Exists), an operator and effect it knows,
    no value with Exists and a label value with Equal."""
    name, operator = toleration.get("key") or "", toleration.get("operator") or "Equal"
    value, effect = toleration.get("value") or "", toleration.get("effect") or ""
    if operator not in OPERATORS:
        _refuse(f"{key}.operator", operator, "a toleration operator (Exists or Equal)")
    if effect not in EFFECTS:
        _refuse(f"{key}.effect", effect, "a taint effect (NoSchedule, PreferNoSchedule or NoExecute)")
    if name:
        _refuse(f"{key}.key", name, label_key(name))
    elif operator != "Exists":
        _refuse(f"{key}.key", name, "empty here: a toleration without a key must use operator Exists")
    if operator == "Exists" and value:
        _refuse(f"{key}.value", value, "set with operator Exists (it takes no value)")
    _refuse(f"{key}.value", value, label_value(value))


# ------------------------------------------------------------------------------------------ templates


def strings(node: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Every string in a document (keys included) with its path, e.g. ("spec.templates[2].container.args[4]", …)."""
    if isinstance(node, str):
        yield path, node
    elif isinstance(node, Mapping):
        for key, value in node.items():
            yield from strings(key, f"{path} key")
            yield from strings(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, Sequence):
        for i, value in enumerate(node):
            yield from strings(value, f"{path}[{i}]")


def config_strings(cfg: Config) -> Iterator[tuple[str, str]]:
    """Every string of the configuration with its dotted key (lists indexed, a dict's keys as "KEY key")."""
    yield from strings(cfg.model_dump(mode="json"))


def _marked(value: str) -> str | None:
    """The part of `value` from its first to its last template mark (`{{` or `}}`), None without one."""
    starts = [value.find(mark) for mark in TEMPLATE_MARKS if mark in value]
    if not starts:
        return None
    end = max(value.rfind(mark) for mark in TEMPLATE_MARKS if mark in value) + 2
    return value[min(starts):end]


def check_no_templates(cfg: Config, docs: Sequence[Mapping[str, Any]], parameters: Mapping[str, str],
                       where: str) -> None:
    """`InputError` when a workflow parameter or a configuration value holding `{{` or `}}` reaches a string of
    `docs` (the rendered `where`): Argo would substitute or evaluate it (module docstring)."""
    for name, value in parameters.items():
        if _marked(value) is not None:
            raise InputError(f"parameter {name} = {value!r} holds Argo template syntax ({{{{ or }}}}): Argo would "
                             "substitute it when the workflow runs, and it has no escape; pass the value without it")
    texts = [(path, text) for doc in docs for path, text in strings(doc) if _marked(text) is not None]
    if not texts:
        return
    for key, value in config_strings(cfg):
        fragment = _marked(value)
        if fragment is None:
            continue
        for path, text in texts:
            if fragment in text:
                raise InputError(
                    f"{key} = {value!r} holds Argo template syntax ({{{{ or }}}}) and reaches {where} ({path}): Argo "
                    "would substitute or evaluate it when the workflow runs, and it has no escape; remove it from "
                    "the value")
