"""Run `burnqed ARGS…` as if inside one of our images: every top-level module of an installed distribution that the
image does not install (burnqed/cluster/images.toml: its extras and torch, with everything they require, as this
environment's metadata resolves them) fails to import, as it would there.

    python -m tests.cluster.in_image core search --output … --set policy.backend=sglang …

More lenient than the image where this environment's versions require more than the image's do (a dependency
pulled in here but not there is allowed); stricter nowhere else. Used by tests/cluster/test_images.py.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import re
import sys
from collections.abc import Iterable, Sequence
from importlib import metadata
from types import ModuleType
from typing import cast

from packaging.markers import default_environment
from packaging.requirements import Requirement


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_closure(names: Sequence[str]) -> set[str]:
    """`names` and every distribution they require (markers evaluated here, extras followed), as installed."""
    env = cast(dict[str, str], default_environment())  # a TypedDict of str values
    seen: set[str] = set()
    pending: list[tuple[str, frozenset[str]]] = [(n, frozenset()) for n in names]
    while pending:
        name, extras = pending.pop()
        key = _norm(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        if key in seen and not extras:
            continue
        seen.add(key)
        for text in requires:
            requirement = Requirement(text)
            marker_ok = requirement.marker is None or any(
                requirement.marker.evaluate({**env, "extra": extra}) for extra in (extras or {""}))
            if marker_ok and _norm(requirement.name) not in seen:
                pending.append((requirement.name, frozenset(requirement.extras)))
    return seen


def denied_modules(image: str) -> set[str]:
    """Top-level modules of installed distributions the image does not have."""
    from burnqed.cluster.images import declared

    return denied_beyond(declared()[image].distributions())


def denied_beyond(distributions: Iterable[str]) -> set[str]:
    """Top-level modules of installed distributions outside `distributions` and what they require."""
    allowed = installed_closure(sorted(distributions))
    denied = set()
    for module, dists in metadata.packages_distributions().items():
        if module in sys.stdlib_module_names or "burnqed" in dists or module.startswith("_"):
            continue
        if not any(_norm(d) in allowed for d in dists):
            denied.add(module)
    return denied


class Denied(importlib.abc.MetaPathFinder):
    """Fails the import of `modules` (top-level names), saying they are not in `where`."""

    def __init__(self, where: str, modules: set[str]) -> None:
        self.where, self.modules = where, modules

    def find_spec(self, name: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if name.partition(".")[0] in self.modules:
            raise ModuleNotFoundError(f"No module named {name!r} (not in {self.where})", name=name)
        return None


def main() -> None:
    image, args = sys.argv[1], sys.argv[2:]
    sys.meta_path.insert(0, Denied(f"the {image} image: burnqed/cluster/images.toml", denied_modules(image)))
    sys.argv = ["burnqed", *args]
    from burnqed.cli import console

    console()


if __name__ == "__main__":
    main()
