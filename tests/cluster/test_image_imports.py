"""Each step placed in the core image runs with only what the core image installs. The workflow's own core-image steps
(data prepare, fetch --require-done, search and eval with the value model against the sidecar's `burnqed serve`
and encoder, merge-trajectories, report, start) run in a venv holding only the core image's distributions in the
rehearsal (tests/cluster/test_rehearsal.py, which asserts each of those commands ran there); here, as real
subprocesses in which every module the image lacks fails to import (tests/cluster/in_image.py, from
burnqed/cluster/images.toml): the smoke workflow's `lean selftest`, the sidecar's fetch, and the in-process policy
on the tiny model (read without transformers on the CPU), with a control run on a folder that needs transformers,
which fails there, so the restriction is real. burnqed.policy.modelfolder reads a tokenizer with burnqed's
dependencies and the `modelfolder` extra alone (no torch, no transformers)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from burnqed.cluster.images import requirements
from burnqed.data.index import bundled_index_path
from burnqed.lean.selftest import FACTORIAL_PROOF, PI_PROOF
from burnqed.policy.modelfolder import PROBE_TEXT, encode_texts, load_tokenizer
from tests.cluster.conftest import WORKFLOWS, by_name
from tests.cluster.in_image import denied_beyond
from tests.cluster.test_fetch import deepseek_shaped_base
from tests.conftest import double_argv

ROOT = Path(__file__).parents[2]


def with_root(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Python with `argv`, this checkout first on its path."""
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=timeout, check=False,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": path})


def in_core(*args: str) -> subprocess.CompletedProcess[str]:
    return with_root("-m", "tests.cluster.in_image", "core", *args)


def test_the_core_images_steps_are_the_ones_covered_here(rendered) -> None:
    from burnqed.cluster.render import render_templates
    from burnqed.config import Config, PipelineConfig

    # the defaults' workflows, and the start step that pipeline.start = "best" adds to iterations ≥ 1
    best = render_templates(Config(pipeline=PipelineConfig(start="best")), ["iteration"], WORKFLOWS)
    commands = set()
    for doc in [*rendered, *best]:
        for template in doc.doc["spec"]["templates"]:
            for container in [template.get("container"), *(template.get("initContainers") or [])]:
                if container and container["image"].split("/")[-1].startswith("burnqed-core:"):
                    commands.add(" ".join(container["args"][:2] if container["args"][0] == "data"
                                          else container["args"][:1]))
    # `lean` is the smoke workflow's `lean selftest`, against the core image's own Lean
    assert commands == {"data prepare", "search", "eval", "merge-trajectories", "report", "fetch", "lean", "start"}
    assert by_name(rendered, "burnqed-iteration-1")  # the value model's steps are among them


@pytest.mark.slow
def test_the_smoke_selftest_runs_with_only_what_the_core_image_installs() -> None:
    """`burnqed lean selftest` (the smoke workflow's first step, in the core image) against the strict double of the
    newest Pantograph: it names the triple it met with the core image's packages alone."""
    argv = double_argv("--pantograph-version", "0.3.15", "--closes", PI_PROOF, "--closes", FACTORIAL_PROOF)
    done = in_core("lean", "selftest", "--set", "lean.command=" + json.dumps(argv), "--set", "lean.verifier_workers=0")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "burnqed lean selftest: Pantograph 0.3.15, Lean " in done.stdout and "all 8 items conform" in done.stdout


def test_the_sidecars_fetch_writes_the_served_model_folder_in_the_core_image(tmp_path: Path) -> None:
    """`burnqed fetch --model-folder` (the fetch-model init container) writes the tokenizer with `tokenizers`,
    which the core image installs, without transformers, which it does not."""
    base = deepseek_shaped_base(tmp_path / "base")
    fetched = in_core("fetch", str(base), str(tmp_path / "policy"), "--model-folder")
    assert fetched.returncode == 0, fetched.stderr
    written = json.loads((tmp_path / "policy" / "tokenizer_config.json").read_text())
    assert written["tokenizer_class"] == "PreTrainedTokenizerFast" and "add_bos_token" not in written


# Reads a model folder's tokenizer where only the modules outside argv[1] (a JSON list) import; prints what it read.
MODELFOLDER_ALONE = """
import json, sys
from tests.cluster.in_image import Denied
sys.meta_path.insert(0, Denied("burnqed[modelfolder] without torch", set(json.loads(sys.argv[1]))))
from pathlib import Path
from burnqed.policy.modelfolder import encode_texts, folder_probe, load_tokenizer
tokenizer = load_tokenizer(Path(sys.argv[2]), avoid_transformers=True)
padded = tokenizer.pad({"input_ids": encode_texts(tokenizer, sys.argv[3:])}, padding=True, padding_side="left")
print(json.dumps({"class": type(tokenizer).__name__, "probe": folder_probe(Path(sys.argv[2])),
                  "padded": {key: padded[key] for key in ("input_ids", "attention_mask")},
                  "loaded": sorted(name for name in ("torch", "transformers") if name in sys.modules)}))
"""


@pytest.mark.slow
def test_the_model_folder_module_reads_a_tokenizer_with_only_the_modelfolder_extra(tiny_model_dir: Path) -> None:
    """burnqed.policy.modelfolder with burnqed's dependencies and the `modelfolder` extra alone (tokenizers; no torch,
    no transformers): it imports, and the tiny model's tokenizer is read, encoded and padded as transformers does."""
    extra = {Requirement(text).name for text in requirements(["modelfolder"])} - {"torch"}
    denied = denied_beyond(extra)
    assert {"torch", "transformers"} <= denied
    texts = ["theorem t : 1 = 1", "x"]
    done = with_root("-c", MODELFOLDER_ALONE, json.dumps(sorted(denied)), str(tiny_model_dir), *texts, timeout=120)
    assert done.returncode == 0, done.stderr
    reference = load_tokenizer(tiny_model_dir)  # transformers' PreTrainedTokenizerFast
    theirs = reference.pad({"input_ids": encode_texts(reference, texts)}, padding=True, padding_side="left")
    assert theirs["attention_mask"][1][0] == 0  # the short row is padded
    assert json.loads(done.stdout) == {
        "class": "TokenizersOnlyTokenizer", "probe": encode_texts(reference, [PROBE_TEXT])[0],
        "padded": {"input_ids": theirs["input_ids"], "attention_mask": theirs["attention_mask"]}, "loaded": []}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_core_image_steps_import_only_what_the_image_installs(tiny_model_dir: Path, tmp_path: Path) -> None:
    """The in-process policy's search, which no workflow step runs (the workflows' search and eval ask the sidecar:
    those run in the core image's venv in the rehearsal, tests/cluster/test_rehearsal.py)."""
    # the in-process policy on the CPU reads the tiny model without transformers (decoder.load_torch_llama,
    # modelfolder.TokenizersOnlyTokenizer), so it runs in the core image ...
    local = in_core("search", "--output", str(tmp_path / "local"), "--theorems", str(bundled_index_path("test")),
                    "--set", f"policy.model={tiny_model_dir}", "--set", "lean.workers=1", "--set", "search.max_nodes=2")
    assert local.returncode == 0, local.stderr
    # ... and the control: a folder that only transformers reads (its tokenizer asks for a clean-up of spaces) needs
    # transformers, which the core image does not install
    other = tmp_path / "other-model"
    shutil.copytree(tiny_model_dir, other)
    config = json.loads((other / "tokenizer_config.json").read_text(encoding="utf-8"))
    (other / "tokenizer_config.json").write_text(json.dumps({**config, "clean_up_tokenization_spaces": True}))
    refused = in_core("search", "--output", str(tmp_path / "refused"), "--theorems", str(bundled_index_path("test")),
                      "--set", f"policy.model={other}", "--set", "lean.workers=1", "--set", "search.max_nodes=2")
    assert refused.returncode != 0
    assert "not in the core image" in refused.stderr, refused.stderr
