"""The core image's Lean triples are declared once (burnqed/cluster/images.toml, [lean_triples]): the Dockerfile's
build argument names one, its triple stage turns that entry into the pins the Lean stage uses (run here, as the
Dockerfile writes it), every triple is one the client speaks, and docs/cluster.md's table lists exactly them.
The image build itself is not run here (no Docker engine)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from burnqed.cluster.images import TRIPLE_ENV, declared, lean_triples
from leankit.version import PantographVersion, supported_version
from tests.cluster.conftest import ROOT
from tests.processes import cli

DOCKERFILE = ROOT / "images" / "core" / "Dockerfile"
IMAGES_TOML = ROOT / "burnqed" / "cluster" / "images.toml"


def instructions(text: str) -> list[str]:
    """The Dockerfile's instructions as Docker reads them: comments dropped, `\\` continuations joined."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    return [part for part in re.sub(r"\\\n", "", "\n".join(lines)).split("\n") if part.strip()]


def stage(text: str, name: str) -> list[str]:
    """The instructions of the stage `FROM … AS name` (the final stage for name "")."""
    stages: dict[str, list[str]] = {}
    current: list[str] | None = None
    for instruction in instructions(text):
        found = re.match(r"FROM\s+\S+(?:\s+AS\s+(\S+))?\s*$", instruction)
        if found is not None:
            current = stages.setdefault(found.group(1) or "", [])
        elif current is not None:
            current.append(instruction)
    return stages[name]


def triple_env(name: str, tmp_path: Path) -> tuple[int, str, str]:
    """Run the triple stage's RUN as the Dockerfile writes it, on this checkout's images.toml."""
    (run,) = [i for i in stage(DOCKERFILE.read_text(), "triple") if i.startswith("RUN ")]
    out = tmp_path / "triple.env"
    command = run.removeprefix("RUN ").replace("/tmp/images.toml", str(IMAGES_TOML)).replace("/triple.env", str(out))
    bin_dir = tmp_path / "bin"  # the python image's `python`: this interpreter (3.11+, with tomllib)
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    done = subprocess.run(["sh", "-c", command], env={"LEAN_TRIPLE": name, "PATH": f"{bin_dir}:/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=60, check=False)
    return done.returncode, out.read_text() if out.exists() else "", done.stderr


def test_the_dockerfile_builds_images_toml_default_triple_and_pins_nothing_itself() -> None:
    text = DOCKERFILE.read_text()
    defaults = re.findall(r"^ARG LEAN_TRIPLE=(\S+)$", text, re.MULTILINE)
    assert defaults == [declared()["core"].lean_triple] == ["lean-4.29"]
    assert next(iter(lean_triples())) == "lean-4.29"  # the default is listed first
    # no second copy of a pin: no commit, toolchain or Mathlib tag, and none of the old per-pin build arguments
    for triple in lean_triples().values():
        assert triple.commit not in text and triple.lean_toolchain not in text
    assert not re.search(r"ARG (LEAN_TOOLCHAIN|PANTOGRAPH_\w+|MATHLIB_\w+)", text)
    assert f"{TRIPLE_ENV}=${{LEAN_TRIPLE}}" in text  # the image says which triple it was built with


@pytest.mark.parametrize("name", list(lean_triples()))
def test_the_triple_stage_turns_the_declaration_into_the_lean_stage_pins(name: str, tmp_path: Path) -> None:
    code, env, err = triple_env(name, tmp_path)
    assert code == 0, err
    triple = lean_triples()[name]
    sourced = subprocess.run(["sh", "-c", f'. "{tmp_path / "triple.env"}" && printf "%s\\n" "$LEAN_TRIPLE" '
                              '"$PANTOGRAPH" "$REPOSITORY" "$COMMIT" "$LEAN_TOOLCHAIN" "$MATHLIB" "$USE"'],
                             capture_output=True, text=True, check=True).stdout.splitlines()
    assert sourced == [name, triple.pantograph, triple.repository, triple.commit, triple.lean_toolchain,
                       triple.mathlib, triple.use]
    # every variable the Lean stage and the final checks read is one the triple stage sets
    used = set(re.findall(r"\$\{([A-Z_]+)(?:##[^}]*)?\}", "\n".join(stage(DOCKERFILE.read_text(), "lean")
                                                                    + stage(DOCKERFILE.read_text(), ""))))
    provided = {line.split("=", 1)[0] for line in env.splitlines()}
    assert used - provided <= {"ELAN_VERSION", "PATH", "LEAN_UID", "TORCH_VERSION", "LEAN_SYSROOT"}  # own ARGs
    assert {"LEAN_TOOLCHAIN", "REPOSITORY", "COMMIT", "PANTOGRAPH", "MATHLIB"} <= used


def test_an_unknown_triple_fails_the_build_naming_the_known_ones(tmp_path: Path) -> None:
    code, _, err = triple_env("lean-4.99", tmp_path)
    assert code == 1
    assert err.strip().splitlines()[-1] == ("LEAN_TRIPLE='lean-4.99' is no triple of burnqed/cluster/images.toml: "
                                            "['lean-4.21', 'lean-4.27', 'lean-4.29', 'lean-4.9']")


@pytest.mark.parametrize("name", list(lean_triples()))
def test_every_triple_is_one_the_client_speaks_on_one_toolchain(name: str) -> None:
    triple = lean_triples()[name]
    version = supported_version(triple.pantograph, f"images.toml {name}")
    assert re.fullmatch(r"[0-9a-f]{40}", triple.commit)
    assert re.fullmatch(r"leanprover/lean4:v\d+\.\d+\.\d+", triple.lean_toolchain)
    assert triple.mathlib == f"v{triple.lean}"  # Mathlib's tag for a toolchain is named after it
    assert name == "lean-" + ".".join(triple.lean.split(".")[:2])
    if version.lean is not None:  # a backport build names its Lean in its version line
        assert version.lean == f"v{triple.lean}"


def test_the_triples_are_the_newest_release_and_the_older_eras() -> None:
    triples = lean_triples()
    assert [(t.pantograph, t.lean, t.mathlib) for t in triples.values()] == [
        ("0.3.15", "4.29.1", "v4.29.1"), ("0.3.4", "4.21.0", "v4.21.0"), ("0.3.13", "4.27.0", "v4.27.0"),
        ("0.3.2/v4.9.0", "4.9.0", "v4.9.0")]
    assert triples["lean-4.29"].repository == "https://github.com/leanprover/Pantograph.git"
    assert PantographVersion.parse(triples["lean-4.9"].pantograph).protocol == "0.3.2"


def test_docs_cluster_lists_exactly_the_declared_triples() -> None:
    docs = (ROOT / "docs" / "cluster.md").read_text()
    rows = [line for line in docs.splitlines() if line.startswith("| `lean-")]
    expected = []
    for name, triple in lean_triples().items():
        protocol = PantographVersion.parse(triple.pantograph).protocol
        expected.append(f"| `{name}`{' (default)' if name == declared()['core'].lean_triple else ''} | "
                        f"`{triple.pantograph}` ({triple.ref}, {triple.commit[:8]}) | `{triple.lean_toolchain}` | "
                        f"`{triple.mathlib}` | {protocol} | {triple.use} |")
    assert rows == expected


def test_the_images_lean_command_is_the_wrapper_the_dockerfile_installs() -> None:
    core, text = declared()["core"], DOCKERFILE.read_text()
    assert core.lean_command == ("pantograph-repl", "Mathlib") and core.lean_cwd == "/opt/mathlib-project"
    assert f"<<'WRAPPER' /opt/pantograph/bin/{core.lean_command[0]}" in text  # the wrapper ...
    assert any(i.startswith("ENV ") and "PATH=/opt/pantograph/bin:" in i for i in stage(text, ""))  # on its PATH
    assert f"WORKDIR {core.lean_cwd}" in stage(text, "") and f"/mathlib4.git {core.lean_cwd}" in text


def test_render_says_when_the_core_images_lean_is_not_the_pinned_one(tmp_path: Path) -> None:
    """configs/putnambench.toml pins Pantograph 0.3.13 (triple lean-4.27), the core image is built with lean-4.29:
    `render` says so in one warning line naming the build and the tag to render with; that tag, or the default
    Lean, says nothing."""
    from importlib import metadata

    from burnqed.cluster.images import lean_image_warning
    from burnqed.config import load_config

    version = metadata.version("burnqed")
    putnam = load_config(ROOT / "configs" / "putnambench.toml", (), {})
    assert lean_image_warning(putnam) == (
        f"lean.pantograph_version 0.3.13 is triple lean-4.27 (Lean 4.27.0, Mathlib v4.27.0), but the pods run the core "
        f"image burnqed-core:{version} (triple lean-4.29: Pantograph 0.3.15, Lean 4.29.1): build it (`docker build -f "
        f"images/core/Dockerfile --build-arg LEAN_TRIPLE=lean-4.27 -t REGISTRY/burnqed-core:{version}-lean-4.27 .`, "
        f"images/README.md) and render with --set cluster.image_tag={version}-lean-4.27")
    tagged = load_config(ROOT / "configs" / "putnambench.toml", (f"cluster.image_tag={version}-lean-4.27",), {})
    assert lean_image_warning(tagged) is None
    assert lean_image_warning(load_config(None, ("lean.pantograph_version=0.3.15",), {})) is None
    assert lean_image_warning(load_config(None, (), {})) is None
    unknown = lean_image_warning(load_config(None, ("lean.pantograph_version=0.3.8",), {}))
    assert unknown is not None and unknown.startswith("lean.pantograph_version 0.3.8 is no triple of ")

    uploaded = ["--set", "pipeline.benchmark=s3://b/putnam/src",  # the pods read no local path (cluster/podinputs.py)
                "--set", 'data.sources=[{"kind": "benchmark", "path": "s3://b/putnam/src", "answers": "both"}]']
    done = cli("render", "eval", "--config", str(ROOT / "configs" / "putnambench.toml"),
               "--output", str(tmp_path / "out"), *uploaded)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [f"warning: {lean_image_warning(putnam)}"]
