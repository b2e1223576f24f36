"""What each image installs, and whether a step can run in the image and container it is placed in
(docs/cluster.md, "Images and what runs where").

    image = declared()["core"]                       # from burnqed/cluster/images.toml (the Dockerfiles read it)
    image.distributions()                            # {"pydantic", …, "torch", "safetensors", "datasets"}
    pins = step_requirements(stage, cfg, image, gpu=False, where="step search")   # [("BURNQED_EBM__DEVICE", "cpu")]
    triple = lean_triples()[image.lean_triple]       # Pantograph, Lean and Mathlib the core image builds by default
    lean_image_warning(cfg)                          # the core image's Pantograph is not lean.pantograph_version's

`step_requirements` refuses (ConfigError, exit 2 at render and submit) a step whose command would fail in its pod
only after earlier steps spent their GPU hours (the rl step: `rl_requirements`), reading the table each command
checks at its own start (`burnqed.cluster.needs`, `stage_needs`); `fetch_requirements` refuses a core image without
`tokenizers`; `check_installed` is a command's own refusal at its start, naming the images that hold what it lacks.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from importlib import metadata, resources
from typing import TYPE_CHECKING, Any

from burnqed.cluster.needs import (
    CHECKED,
    Need,
    command_needs,
    hub_sources,
    missing,
    requirement_name,
    walk_extras,
)
from burnqed.config import Config
from burnqed.errors import ConfigError
from burnqed.runner.requests import RlRequest, TrainEbmRequest

if TYPE_CHECKING:  # in annotations only: a command checking its own needs (`check_installed`) loads no plan
    from burnqed.runner.plan import Stage

DEVICE_ENV = "BURNQED_EBM__DEVICE"
TRIPLE_ENV = "BURNQED_LEAN_TRIPLE"  # set by images/core/Dockerfile: the key of the triple the image was built with
TRIPLES = "lean_triples"  # the table of images.toml that holds the Lean triples (every other table is an image)


@dataclass(frozen=True, slots=True)
class Image:
    """One image as images.toml declares it."""

    name: str
    extras: tuple[str, ...]
    torch_index: str
    cuda: bool
    provided: frozenset[str] = field(default=frozenset(), repr=False)
    lean_triple: str | None = None  # the Lean triple the image builds by default (core)
    lean_command: tuple[str, ...] = ()  # how its Lean starts (lean.command), and where (lean.cwd)
    lean_cwd: str | None = None

    @property
    def holds_lean(self) -> bool:
        """Whether the image has Pantograph's REPL and Mathlib (a Lean triple, and how to start it)."""
        return self.lean_triple is not None and bool(self.lean_command)

    def distributions(self) -> frozenset[str]:
        """Normalised names of the distributions installed: burnqed's dependencies, its extras', and torch."""
        return self.provided


def requirements(extras: Iterable[str]) -> tuple[str, ...]:
    """The requirement strings of what an image with `extras` installs: torch (every image's Dockerfile installs it
    first, from its torch_index), burnqed's dependencies and each extra's, following `burnqed[X]` inside an extra
    (not itself listed). `ConfigError` for an extra pyproject.toml does not define. The one walk of the extras: the
    tests' image environments (tests/cluster/image_venv.py) resolve these further."""
    return ("torch", *walk_extras(["", *extras]))


def _provided(extras: tuple[str, ...]) -> frozenset[str]:
    """Normalised names of the distributions an image with `extras` installs directly (`requirements`)."""
    return frozenset(requirement_name(requirement) for requirement in requirements(extras))


@dataclass(frozen=True, slots=True)
class LeanTriple:
    """One Lean triple images/core can build, as images.toml declares it (see its comments)."""

    name: str
    pantograph: str  # what `repl --version` prints
    repository: str
    ref: str
    commit: str
    lean_toolchain: str  # elan's name, `leanprover/lean4:v4.29.1`
    mathlib: str  # Mathlib's tag
    use: str
    comparator: str = ""  # the standalone comparator's commit ("": none built, see images.toml)
    lean4export: str = ""  # lean4export's tag it exports with

    @property
    def lean(self) -> str:
        """The Lean version of the toolchain as `lean --version` prints it: `4.29.1`."""
        return self.lean_toolchain.rpartition(":")[2].removeprefix("v")

    def describe(self) -> str:
        return f"Pantograph {self.pantograph}, Lean {self.lean}, Mathlib {self.mathlib}"


def _toml() -> dict[str, Any]:
    return tomllib.loads(resources.files("burnqed.cluster").joinpath("images.toml").read_text(encoding="utf-8"))


@cache
def declared() -> dict[str, Image]:
    """Every image of images.toml, with the distributions it installs."""
    images = {}
    for name, body in _toml().items():
        if name == TRIPLES:
            continue
        extras = tuple(body["extras"])
        images[name] = Image(name, extras, str(body["torch_index"]), bool(body["cuda"]), _provided(extras),
                             lean_triple=body.get("lean_triple"), lean_command=tuple(body.get("lean_command", ())),
                             lean_cwd=body.get("lean_cwd"))
    return images


@cache
def lean_triples() -> dict[str, LeanTriple]:
    """Every Lean triple of images.toml, by name, in the order declared (the default first)."""
    return {name: LeanTriple(name=name, **{key: str(value) for key, value in body.items()})
            for name, body in _toml()[TRIPLES].items()}


def lean_image_warning(cfg: Config) -> str | None:
    """Why the core image the pods run (`burnqed-core:TAG`, built with images.toml's `[core] lean_triple`) does not
    hold the Pantograph that `lean.pantograph_version` pins, and how to render the one that does (the triple of that
    version, built and tagged `TAG-TRIPLE` as images/README.md builds one, `cluster.image_tag`); None when it holds
    it, when no version is pinned, or when the tag (cluster.image_tag, else the package version) already names that
    triple."""
    wanted = cfg.lean.pantograph_version
    tag = cfg.cluster.image_tag or metadata.version("burnqed")  # as burnqed.workflows names the images
    core = declared()["core"]
    triples = lean_triples()
    if wanted is None or core.lean_triple is None:
        return None
    built = triples[core.lean_triple]
    if built.pantograph == wanted:
        return None
    matching = [t for t in triples.values() if t.pantograph == wanted]
    if matching and tag.endswith(f"-{matching[0].name}"):
        return None
    pod = f"the core image burnqed-core:{tag} (triple {built.name}: Pantograph {built.pantograph}, Lean {built.lean})"
    if not matching:
        return (f"lean.pantograph_version {wanted} is no triple of burnqed/cluster/images.toml, and the pods run "
                f"{pod}: their Lean is not the one the configuration pins")
    triple = matching[0]
    base = tag.rsplit("-lean-", 1)[0]
    return (f"lean.pantograph_version {wanted} is triple {triple.name} (Lean {triple.lean}, Mathlib {triple.mathlib}), "
            f"but the pods run {pod}: build it (`docker build -f images/core/Dockerfile --build-arg "
            f"LEAN_TRIPLE={triple.name} -t REGISTRY/burnqed-core:{base}-{triple.name} .`, images/README.md) and render "
            f"with --set cluster.image_tag={base}-{triple.name}")


def fetch_requirements(image: Image, *, where: str) -> None:
    """ConfigError unless `image` can run the sidecar's `burnqed fetch --model-folder`, which writes the served
    model's tokenizer with `tokenizers` (burnqed.policy.modelfolder)."""
    if "tokenizers" not in image.distributions():
        raise ConfigError(f"{where} writes the served model's tokenizer (`burnqed fetch --model-folder`) with the "
                          f"`tokenizers` package, which the {image.name} image does not install (extras "
                          f"{', '.join(image.extras)} in burnqed/cluster/images.toml): add the `modelfolder` extra "
                          "there and rebuild")


def rl_requirements(cfg: Config, image: Image, *, gpu: bool, where: str) -> None:
    """ConfigError unless `image` and its container can run `burnqed rl`: the trainer's packages (the `train`
    extra), the reward's Lean (Pantograph and Mathlib in the image), and a CUDA GPU when sft.device asks for one."""
    lacking = [need.distribution for need in lacking_needs(command_needs("rl", cfg), image)]
    if lacking:
        raise ConfigError(f"{where} trains with TRL's GRPOTrainer, which needs {', '.join(lacking)}, not in the "
                          f"{image.name} image (extras {', '.join(image.extras)} in burnqed/cluster/images.toml): add "
                          "the `train` extra there and rebuild")
    if not image.holds_lean:
        raise ConfigError(f"{where} runs its reward's Lean workers in its own container, and the {image.name} image "
                          "holds no Lean (no lean_triple and lean_command in burnqed/cluster/images.toml): the rl "
                          "image copies the core image's")
    if cfg.sft.device.startswith("cuda") and not (gpu and image.cuda):
        raise ConfigError(f"{where}: sft.device = {cfg.sft.device!r}, but its container has no CUDA GPU (the "
                          f"{image.name} image's torch is {'a CUDA' if image.cuda else 'the CPU'} build)")


def uses_value_model(stage: Stage) -> bool:
    """Whether the step's burnqed loads the value model's head (scores with it, or trains it)."""
    return stage.ebm is not None or isinstance(stage.request, TrainEbmRequest)


def lacking_needs(needs: Iterable[Need], image: Image) -> list[Need]:
    """The needs (burnqed.cluster.needs) whose distribution `image` does not install."""
    return [need for need in needs if need.distribution not in image.distributions()]


def stage_needs(stage: Stage, cfg: Config) -> tuple[Need, ...]:
    """What the step's command imports beyond burnqed's dependencies (`burnqed.cluster.needs.command_needs`, the
    table the command itself checks at its start)."""
    command = " ".join(stage.request.command) or stage.argv[0]  # a command line of its own: its first word
    return command_needs(command, cfg, ebm=stage.ebm is not None, model_folder="--model-folder" in stage.argv)


def step_requirements(stage: Stage, cfg: Config, image: Image, *, gpu: bool, where: str) -> list[tuple[str, str]]:
    """The environment pins of the step's main container (the value model's device); `ConfigError` when the step
    cannot run there (docs/cluster.md, "Images and what runs where")."""
    if isinstance(stage.request, RlRequest):
        rl_requirements(cfg, image, gpu=gpu, where=where)
    lacking = lacking_needs(stage_needs(stage, cfg), image)
    hub = [need.distribution for need in lacking if need.extra == "hub"]
    if hub:
        raise ConfigError(
            f"{where}: data.sources {', '.join(hub_sources(cfg))} are Hugging Face hub names, read with the "
            f"`{hub[0]}` package, which the {image.name} image does not install (extras {', '.join(image.extras)} in "
            "burnqed/cluster/images.toml): add the `hub` extra there and rebuild, or give the sources as s3:// "
            "URIs of downloaded copies"
        )
    value = [need.distribution for need in lacking if need.extra == "value"]
    if value:
        raise ConfigError(f"{where} loads the value model, which needs {' and '.join(value)}, not in the "
                          f"{image.name} image (extras {', '.join(image.extras)} in burnqed/cluster/images.toml): add "
                          "the `value` extra there and rebuild")
    if lacking:
        need = lacking[0]
        raise ConfigError(f"{where}: {need.why} needs {', '.join(n.distribution for n in lacking)}, not in the "
                          f"{image.name} image (extras {', '.join(image.extras)} in burnqed/cluster/images.toml): add "
                          f"the `{need.extra}` extra there and rebuild")
    if not uses_value_model(stage):
        return []
    has_gpu = gpu and image.cuda
    device = cfg.ebm.device
    if device == "auto":
        device = "cuda" if has_gpu else "cpu"
    elif device.startswith("cuda") and not has_gpu:
        why = "the pod's GPU belongs to its SGLang sidecar" if stage.policy_model else "it requests no GPU"
        raise ConfigError(f"{where}: ebm.device = {cfg.ebm.device!r}, but its main container has no GPU ({why}; the "
                          f"{image.name} image's torch is {'a CUDA' if image.cuda else 'the CPU'} build): set "
                          "ebm.device = \"auto\" (render pins cuda where a step has a GPU, cpu elsewhere) or \"cpu\"")
    return [(DEVICE_ENV, device)]


def check_installed(command: str, needs: Iterable[Need]) -> list[Need]:
    """`ConfigError` (exit 2, one line) naming the first of `needs` that is not installed and not optional, the extra
    that installs it and the images that hold it; else the optional needs not installed (the command says what it
    goes without). Records what was checked in `burnqed.cluster.needs.CHECKED`."""
    needs = list(needs)
    CHECKED.update(need.distribution for need in needs)
    absent = missing(needs)
    lacking = [need for need in absent if not need.optional]
    if not lacking:
        return [need for need in absent if need.optional]
    need = lacking[0]
    holding = [name for name, image in declared().items() if need.distribution in image.distributions()]
    where = f"the {', '.join(holding)} image{'s' if len(holding) > 1 else ''} install it" if holding else \
        "no image of burnqed/cluster/images.toml installs it"
    others = f" (also missing: {', '.join(n.distribution for n in lacking[1:])})" if lacking[1:] else ""
    raise ConfigError(f"burnqed {command}: {need.why} needs the {need.distribution} package, which is not installed "
                      f"here{others}: pip install 'burnqed[{need.extra}]' ({where})")
