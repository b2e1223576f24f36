"""What a command needs installed beyond burnqed's own dependencies, checked before it does any work: the one place
that knows it (docs/cluster.md, "Images and what runs where"; `render` reads the same table against each image).

    needs = command_needs("eval", cfg, ebm=ebm)   # (Need("torch", "value", …), Need("safetensors", "value", …))
    images.check_installed("eval", needs)         # ConfigError (exit 2): the first one not installed, in one line
    [n.distribution for n in needs if n.distribution not in image.distributions()]   # what an image lacks

Each need is every distribution of one of burnqed's extras (pyproject.toml: `train` for sft, rl and export, `value`
for the value model, `grammar` for a local planner sampling under the sketch grammar, `hub` for data sources named
on the Hugging Face hub, `modelfolder` (tokenizers) for `fetch
--model-folder`, a local value-model encoder and the served model's tokenizer check, `report` for the report's
plots), so the table names extras, not packages. A missing one is found by
asking importlib for its module's spec, without importing it: the refusal comes in the command's first second, not
when a lazy import is reached minutes in. tests/cluster/test_rehearsal.py records what each rehearsed step imported
and fails when it imported a distribution of an extra its command's needs do not name. The extras' packages come
from pyproject.toml beside the package, else from the installed package's metadata (`walk_extras`); the refusal,
which names the images that install a missing package, is `burnqed.cluster.images.check_installed`.
"""

from __future__ import annotations

import importlib.util
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from burnqed import storage
from burnqed.errors import ConfigError

if TYPE_CHECKING:
    from burnqed.config import Config

CHECKED: set[str] = set()  # the distributions this process's command checked (tests/cluster/rehearsal.py reads it)


@dataclass(frozen=True, slots=True)
class Need:
    """One distribution a command imports, the extra that installs it, and what the command uses it for."""

    distribution: str  # normalised, as pyproject.toml names it: "safetensors"
    extra: str         # burnqed's extra that installs it: "value"
    why: str           # "the value model (--ebm)"
    optional: bool = False  # the command runs without it and loses only `why` (the report's plots)

    @property
    def module(self) -> str:
        """The top-level module the distribution installs (each of burnqed's extras' is its name)."""
        return self.distribution.replace("-", "_")


def extra_distributions(extra: str) -> tuple[str, ...]:
    """The distributions of burnqed[EXTRA] beyond burnqed's own dependencies, as pyproject.toml declares them
    (`burnqed[model]` inside an extra followed), in declaration order."""
    base = {requirement_name(r) for r in extra_requirements("")}
    names = [requirement_name(r) for r in extra_requirements(extra)]
    return tuple(dict.fromkeys(name for name in names if name not in base))


def extra_needs(extra: str, why: str, *, optional: bool = False) -> list[Need]:
    """One need per distribution of burnqed[EXTRA] (`extra_distributions`), each for `why`."""
    return [Need(name, extra, why, optional) for name in extra_distributions(extra)]


def trainer_needs(what: str) -> list[Need]:
    """What training with TRL and peft on a transformers model imports: the `train` extra."""
    return extra_needs("train", what)


def value_model_needs(what: str) -> list[Need]:
    """What loading or training the value model's head imports: the `value` extra (torch, safetensors)."""
    return extra_needs("value", what)


def command_needs(command: str, cfg: Config, *, ebm: bool = False, model_folder: bool = False) -> tuple[Need, ...]:
    """The distributions `burnqed COMMAND` (with `cfg` and the options given) imports beyond burnqed's own
    dependencies. `command` is the command's words ("data prepare"); `ebm`: --ebm was given; `model_folder`:
    fetch's --model-folder."""
    needs: list[Need] = []
    if command in ("sft", "rl", "export"):
        needs += trainer_needs("merging the adapter with peft" if command == "export" else
                               "training with TRL and peft")
    value_model = ebm or command == "train-ebm" or (command == "sft" and cfg.sft.joint)
    if value_model:
        needs += value_model_needs("the value model" + (" (--ebm)" if ebm else ""))
    if value_model and cfg.ebm.encoder_backend == "local":
        needs += extra_needs("modelfolder", "the value model's encoder in this process (ebm.encoder_backend = 'local')")
    if command in ("search", "eval") and cfg.policy.backend == "sglang" and cfg.policy.model:
        needs += extra_needs("modelfolder", "checking the served model's tokenizer (policy.backend = 'sglang', "
                                            "policy.model)")
    if command in ("search", "eval") and cfg.search.mode == "sketch" and cfg.planner.constrained and (
            cfg.planner.backend == "local" or (cfg.planner.backend is None and cfg.policy.backend == "local")):
        needs += extra_needs("grammar", "sampling sketches under the sketch grammar in this process "
                                        "(planner.constrained)")
    if command == "data prepare" and (hub := hub_sources(cfg)):
        needs += extra_needs("hub", f"reading data.sources {', '.join(hub)} from the Hugging Face hub")
    if command == "fetch" and model_folder:
        needs += extra_needs("modelfolder", "writing the model folder's tokenizer (--model-folder)")
    if command == "report":
        needs += extra_needs("report", "drawing the report's plots", optional=True)  # without: no plots
    unique: dict[str, Need] = {}
    for need in needs:  # the first reason for a distribution is the one a refusal gives
        unique.setdefault(need.distribution, need)
    return tuple(unique.values())


def missing(needs: Iterable[Need]) -> list[Need]:
    """The needs whose module this interpreter cannot find (nothing is imported; a finder that refuses the name
    counts as not finding it)."""
    return [need for need in needs if not _findable(need.module)]


def _findable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a meta path finder refusing it; a module set to None in sys.modules
        return False


def requirement_name(requirement: str) -> str:
    """The normalised distribution name of a requirement string (`trl>=1.16,<2` -> `trl`)."""
    found = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?", requirement)
    if found is None:
        raise ConfigError(f"cannot read the requirement {requirement!r}")
    return re.sub(r"[-_.]+", "-", found.group(1)).lower()


@cache
def _dependency_groups() -> dict[str, tuple[str, ...]]:
    """'' (the base) and each extra -> its requirement strings."""
    import burnqed

    pyproject = Path(burnqed.__file__).resolve().parents[1] / "pyproject.toml"
    if pyproject.is_file():
        project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
        groups = {"": tuple(project.get("dependencies", []))}
        groups.update({k: tuple(v) for k, v in project.get("optional-dependencies", {}).items()})
        return groups
    groups_lists: dict[str, list[str]] = {"": []}
    for requirement in metadata.requires("burnqed") or []:
        text, _, marker = requirement.partition(";")
        extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", marker)
        groups_lists.setdefault(extra.group(1) if extra else "", []).append(text.strip())
    return {k: tuple(v) for k, v in groups_lists.items()}


def extra_requirements(extra: str) -> tuple[str, ...]:
    """The requirement strings of burnqed[EXTRA] alone ('' for burnqed's own dependencies), following `burnqed[X]`
    inside it: what a command is checked for."""
    return walk_extras([extra])


def walk_extras(pending: list[str]) -> tuple[str, ...]:
    """The requirement strings of the groups `pending` names ('' the base), following `burnqed[X]` inside them."""
    groups = _dependency_groups()
    found: list[str] = []
    seen: set[str] = set()
    while pending:
        group = pending.pop()
        if group in seen:
            continue
        seen.add(group)
        if group not in groups:
            raise ConfigError(f"images.toml names the extra {group!r}, which pyproject.toml does not define")
        for requirement in groups[group]:
            if requirement_name(requirement) == "burnqed":  # burnqed[model] inside an extra
                inner = re.search(r"\[([^\]]*)\]", requirement)
                pending += [e.strip() for e in (inner.group(1) if inner else "").split(",") if e.strip()]
            else:
                found.append(requirement)
    return tuple(found)


def hub_sources(cfg: Config) -> list[str]:
    """The data sources a pod would load from the Hugging Face hub (`storage.hub_shaped`: a pod's files are not
    known here)."""
    return [source.path for source in cfg.data.sources if source.path and storage.hub_shaped(source.path)]
