"""A virtual environment per image that holds exactly the distributions its Dockerfile installs: burnqed's own
dependencies, the extras burnqed/cluster/images.toml declares for the image (each Dockerfile installs
`/src[EXTRAS]` from that file) and torch, with everything they require as this environment's metadata resolves it
(markers evaluated, extras followed). Its site-packages links each distribution's own files (the top-level entries
of its RECORD) from this environment, so a module of any other installed distribution fails to import there, as in
the image.

    venv = build_image_venv("core", tmp / "core")                  # venv.python, venv.bin
    venv = build_image_venv("train", tmp / "t", drop={"datasets"})  # the train image without datasets
    env = venv_env(venv, {IMPORTS_ENV: "/tmp/x.json"})  # its process writes what it imported there at exit

burnqed itself is this checkout's packages (`burnqed`, `leankit`, `minilean`; the Dockerfiles install the checkout),
with a `burnqed` console script. The serving side (`SERVING`, the `/opt/burnqed` environment of the sglang image) holds
burnqed's base dependencies and the `model` extra, as that environment sees the SGLang image's torch and
transformers (the versions of constraints.txt, which this environment has installed).

More lenient than the images where this environment's versions require more than the image's would (a dependency
pulled in here but not there is present), and where the image has files no distribution records (pip, setuptools,
the interpreter's own packages are not linked: the images' do not import them), and where a caller adds
distributions (`add`: what a stand-in needs that the image's own program does not); stricter nowhere else.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import cast

from packaging.markers import default_environment
from packaging.requirements import Requirement

from burnqed.cluster import images

ROOT = Path(__file__).parents[2]
SERVING = "sglang"  # the sidecar's /opt/burnqed environment: base dependencies + the model extra
SERVING_EXTRAS = ("model",)
# The `burnqed` console script as pyproject.toml declares it (`module:function`), which each venv's bin/burnqed runs
CONSOLE_SCRIPT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]["burnqed"]


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _top_requirements(extras: Iterable[str]) -> list[Requirement]:
    """What the image's Dockerfile asks pip for: `images.requirements` (the walk render checks steps with), parsed."""
    return [Requirement(text) for text in images.requirements(extras)]


def closure(extras: Iterable[str], also: Iterable[str] = ()) -> set[str]:
    """Normalised names of every distribution `pip install torch /src[EXTRAS]` puts in an image (with `also`, those
    distributions too), as this environment's metadata resolves the requirements. A required distribution this
    environment lacks is an error."""
    env = cast(dict[str, str], default_environment())
    seen: set[tuple[str, str]] = set()
    names: set[str] = set()
    pending = [(r.name, extra) for r in _top_requirements(extras) for extra in ("", *sorted(r.extras))]
    pending += [(name, "") for name in also]
    while pending:
        name, extra = pending.pop()
        key = (norm(name), extra)
        if key in seen:
            continue
        seen.add(key)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            raise AssertionError(f"the image installs {name}, which this environment does not have") from None
        names.add(norm(name))
        for text in requires:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({**env, "extra": extra}):
                pending += [(requirement.name, e) for e in ("", *sorted(requirement.extras))]
    return names


def image_distributions(image: str, also: Iterable[str] = ()) -> set[str]:
    """The distributions of an image of images.toml, or of the serving side (`SERVING`), with those of `also`."""
    if image == SERVING:
        return closure(SERVING_EXTRAS, also)
    return closure(images.declared()[image].extras, also)


@dataclass(frozen=True, slots=True)
class ImageVenv:
    image: str
    root: Path
    distributions: frozenset[str]

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def python(self) -> Path:
        return self.bin / "python"


def _link(source: Path, target: Path) -> None:
    """Link `source` at `target`; where another distribution already put a folder there (a namespace package
    shared by several), make it a real folder holding both's entries."""
    if not target.exists() and not target.is_symlink():
        target.symlink_to(source)
        return
    if target.is_symlink() and target.resolve() == source.resolve():
        return
    if not source.is_dir() or not target.is_dir():
        raise AssertionError(f"two distributions install {target.name} as a file")
    if target.is_symlink():
        earlier = target.resolve()
        target.unlink()
        target.mkdir()
        for entry in earlier.iterdir():
            (target / entry.name).symlink_to(entry)
    for entry in source.iterdir():
        if entry.name != "__pycache__":
            _link(entry, target / entry.name)


def build_image_venv(image: str, dest: Path, *, drop: Iterable[str] = (), add: Iterable[str] = ()) -> ImageVenv:
    """A venv at `dest` with the image's distributions only (without those of `drop`: an image missing them; with
    those of `add`: what a stand-in needs that the image's own program does not), and this checkout's burnqed."""
    dropped = {norm(name) for name in drop}
    wanted = image_distributions(image, add)
    if not dropped <= wanted:
        raise AssertionError(f"the {image} image does not install {', '.join(sorted(dropped - wanted))}")
    venv = build_venv(image, wanted - dropped, dest)
    site = site_packages(dest)
    from tests.cluster.test_images import distribution_packages

    for package in distribution_packages():
        (site / package).symlink_to(ROOT / package)
    info = site / "burnqed-0.1.0.dist-info"
    info.mkdir()
    from burnqed import __version__

    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: burnqed\nVersion: {__version__}\n")
    module, function = CONSOLE_SCRIPT.split(":")
    (info / "entry_points.txt").write_text(f"[console_scripts]\nburnqed = {CONSOLE_SCRIPT}\n")
    script = dest / "bin" / "burnqed"
    script.write_text(f"#!{dest / 'bin' / 'python'}\nimport sys\nfrom {module} import {function}\n"
                      f"sys.exit({function}())\n")
    script.chmod(0o755)
    (site / "sitecustomize.py").write_text(RECORDER, encoding="utf-8")
    return venv


IMPORTS_ENV = "BURNQED_REHEARSAL_IMPORTS"
# Each image venv's sitecustomize: with IMPORTS_ENV naming a file, the process started with it (not its children:
# the variable is taken out of its environment, and a fork of it records nothing) writes there at exit the top-level
# modules it imported and the distributions its command checked it could import (burnqed.cluster.needs.CHECKED).
# The `burnqed` program ends with `os._exit` once the exit handlers registered after its command started ran
# (burnqed.base.ending), which this one, registered before, is not among: it also records just before `os._exit`
# (what coverage.py's `[run] patch = _exit` does for the same reason).
RECORDER = f"""import atexit, json, os, sys

_path = os.environ.pop({IMPORTS_ENV!r}, None)
_pid = os.getpid()


def _record(path=_path):
    if os.getpid() != _pid:
        return
    needs = sys.modules.get("burnqed.cluster.needs")
    with open(path, "w", encoding="utf-8") as out:
        json.dump({{"modules": sorted({{name.partition(".")[0] for name in list(sys.modules)}}),
                   "checked": sorted(getattr(needs, "CHECKED", ()))}}, out)


def _recorded_exit(status, _exit=os._exit):
    _record()
    _exit(status)


if _path:
    atexit.register(_record)
    os._exit = _recorded_exit
"""


def site_packages(dest: Path) -> Path:
    """The site-packages folder of the venv at `dest`."""
    purelib = Path(sysconfig.get_path("purelib", vars={"base": str(dest), "platbase": str(dest)}))
    return purelib if purelib.is_dir() else next(dest.glob("lib/python*/site-packages"))


def build_venv(label: str, distributions: Iterable[str], dest: Path) -> ImageVenv:
    """A venv at `dest` (no pip, no burnqed) whose site-packages links exactly `distributions` of this environment
    (normalised names), each distribution's own top-level entries."""
    wanted = frozenset(norm(name) for name in distributions)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(dest)], check=True, timeout=120)
    site = site_packages(dest)
    for name in sorted(wanted):
        dist = metadata.distribution(name)
        base = Path(str(dist.locate_file("")))
        tops = {file.parts[0] for file in dist.files or [] if file.parts and file.parts[0] != ".."}
        for top in sorted(tops - {"__pycache__"}):
            if (base / top).exists():
                _link(base / top, site / top)
    return ImageVenv(label, dest, wanted)


def venv_env(venv: ImageVenv, extra: dict[str, str] | None = None) -> dict[str, str]:
    """A minimal process environment whose `python` and `burnqed` are the venv's (no PYTHONPATH), with the host's
    torch thread budget (OMP_NUM_THREADS, where set: the share of the cores a pod's CPU limit would give)."""
    env = {"PATH": os.pathsep.join([str(venv.bin), "/usr/local/bin", "/usr/bin", "/bin"]), "LANG": "C.UTF-8"}
    if "OMP_NUM_THREADS" in os.environ:
        env["OMP_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"]
    return {**env, **(extra or {})}
