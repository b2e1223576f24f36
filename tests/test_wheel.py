"""burnqed as a user installs it: the wheel built from this checkout, installed into a fresh virtual environment
that holds only the distributions `pip install 'burnqed[k8s]'` brings (tests/cluster/image_venv.py links them from
this environment; no network), renders the workflows from a folder outside the checkout with its `burnqed`
console script, and what it writes (and the Workflow `submit --dry-run` prints) equals the checkout's render
(docs/cluster.md, "Workflows").

More lenient than a real `pip install` where this environment's versions stand in for the ones pip would resolve
(the same as the images' test environments); the wheel itself is the one `pip wheel` builds from pyproject.toml.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import burnqed
from burnqed.cluster import images
from burnqed.cluster.render import default_workflows_dir, render_templates, render_workflow, write_documents
from burnqed.cluster.yamlio import load_documents
from burnqed.config import Config
from burnqed.errors import BurnqedError
from tests.cluster.image_venv import ImageVenv, build_venv, closure, venv_env

ROOT = Path(__file__).parents[1]
EXTRAS = ("k8s",)  # what rendering needs beyond the base dependencies: Hera and the schema validators


def source_tree(dest: Path) -> Path:
    """Copy what the build reads (pyproject.toml, its readme, the packages `packages.find` includes) to `dest`, so
    building leaves nothing in the checkout."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = project["tool"]["setuptools"]["packages"]["find"]["include"]
    dest.mkdir()
    for name in ("pyproject.toml", project["project"]["readme"]):
        shutil.copy(ROOT / name, dest / name)
    tops = [p for p in ROOT.iterdir() if p.is_dir() and any(fnmatch.fnmatch(p.name, pat) for pat in patterns)]
    assert tops, f"no folder of the checkout matches packages.find include = {patterns}"
    for top in tops:
        shutil.copytree(top, dest / top.name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dest


def build_wheel(source: Path, dist: Path) -> Path:
    """The wheel of `source`, built with this environment's setuptools (no build isolation, no index)."""
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                           "--quiet", "-w", str(dist), str(source)], check=False, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, f"pip wheel failed (needs setuptools in this environment):\n{done.stderr}"
    (wheel,) = dist.glob("burnqed-*.whl")
    return wheel


def normalised(texts: Iterable[str]) -> list[str]:
    """Requirement strings as packaging writes them (the metadata orders a specifier set its own way)."""
    return sorted(str(Requirement(text)) for text in texts)


@dataclass(frozen=True, slots=True)
class Installed:
    venv: ImageVenv
    elsewhere: Path  # a folder outside the checkout, the current folder of every command run here

    def run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        env = venv_env(self.venv, {"KUBECONFIG": str(self.elsewhere / "no-kubeconfig")})  # no cluster reachable
        return subprocess.run(list(argv), check=False, cwd=self.elsewhere, env=env, capture_output=True, text=True,
                              timeout=300)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    work = tmp_path_factory.mktemp("wheel")
    wheel = build_wheel(source_tree(work / "src"), work / "dist")
    # torch is not needed to render; leaving it out shows it (its own dependencies stay: harmless here)
    venv = build_venv("burnqed[k8s]", closure(EXTRAS) - {"torch"}, work / "venv")
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv.python), "install", "--no-deps",
                           "--no-index", "--no-compile", "--quiet", str(wheel)],
                          check=False, capture_output=True, text=True, timeout=300,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})  # else pip sees a checkout
    assert done.returncode == 0, done.stderr
    elsewhere = work / "elsewhere"
    elsewhere.mkdir()
    return Installed(venv, elsewhere)


@pytest.mark.slow
def test_the_installed_package_renders_what_the_checkout_renders(installed: Installed, tmp_path: Path) -> None:
    where = installed.run(str(installed.venv.python), "-c", "import json, sys, burnqed\n"
                          "from burnqed.cluster.render import default_workflows_dir\n"
                          "print(json.dumps([burnqed.__file__, str(default_workflows_dir()), sys.path]))")
    assert where.returncode == 0, where.stderr
    module, folder, path = json.loads(where.stdout)
    assert Path(module).is_relative_to(installed.venv.root) and Path(folder).is_relative_to(installed.venv.root)
    assert not [entry for entry in path if entry and Path(entry).resolve().is_relative_to(ROOT)], path

    result = installed.run(str(installed.venv.bin / "burnqed"), "render", "--check", "-o", "out")
    assert result.returncode == 0, result.stderr
    assert "6 documents valid against the Argo schema" in result.stdout

    expected = tmp_path / "expected"
    write_documents(render_templates(Config(), [], default_workflows_dir()), expected, prune=True)
    written = sorted(p.name for p in (installed.elsewhere / "out").glob("*.yaml"))
    assert written == sorted(p.name for p in expected.glob("*.yaml")) and written
    for name in written:
        assert (installed.elsewhere / "out" / name).read_text() == (expected / name).read_text(), name


@pytest.mark.slow
def test_the_installed_metadata_declares_what_pyproject_does(installed: Installed) -> None:
    """Outside a checkout images.py reads the extras from the installed metadata, not pyproject.toml: the same
    requirements for every image."""
    code = ("import json\nfrom burnqed.cluster import images\n"
            "print(json.dumps({name: images.requirements(image.extras) for name, image in images.declared().items()}))")
    result = installed.run(str(installed.venv.python), "-c", code)
    assert result.returncode == 0, result.stderr
    there = {name: normalised(texts) for name, texts in json.loads(result.stdout).items()}
    here = {name: normalised(images.requirements(image.extras)) for name, image in images.declared().items()}
    assert there == here and here
    # the version, said once (burnqed.__version__; pyproject.toml's is dynamic), is the installed distribution's, which
    # the images are tagged with
    shown = installed.run(str(installed.venv.python), "-c", "from importlib.metadata import version\n"
                          "import burnqed\nprint(version('burnqed'), burnqed.__version__)")
    assert shown.stdout.split() == [burnqed.__version__] * 2, shown.stderr


def test_the_checkouts_workflows_are_the_packages() -> None:
    assert default_workflows_dir() == ROOT / "burnqed" / "workflows"


@pytest.mark.slow
def test_the_installed_package_builds_the_workflow_submit_sends(installed: Installed) -> None:
    root = "s3://bucket/run"
    result = installed.run(str(installed.venv.bin / "burnqed"), "submit", "iteration", "--iter", "2", "--root", root,
                           "--server", "http://127.0.0.1:9", "--dry-run")  # a dry run sends nothing
    assert result.returncode == 0, result.stderr
    (doc,) = load_documents(result.stdout)
    assert doc == render_workflow(Config(), "iteration", default_workflows_dir(), iteration=2,
                                  parameters={"root": root})


def test_a_zipped_install_names_the_way_out_and_other_folders_still_load(monkeypatch: pytest.MonkeyPatch,
                                                                          tmp_path: Path) -> None:
    from burnqed.cluster import render

    archive = tmp_path / "burnqed.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("burnqed/workflows/__init__.py", "")
    real = resources.files
    monkeypatch.setattr(resources, "files", lambda package: (
        zipfile.Path(archive, "burnqed/workflows/") if package == render.WORKFLOWS_PACKAGE else real(package)))
    with pytest.raises(BurnqedError, match=r"are not a folder on disk: .* or pass --workflows DIR$"):
        default_workflows_dir()
    folder = tmp_path / "dags"
    shutil.copytree(ROOT / "burnqed" / "workflows", folder, ignore=shutil.ignore_patterns("__pycache__"))
    assert [doc.source for doc in render_templates(Config(), ["eval"], folder)] == ["eval"]
