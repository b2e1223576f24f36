"""Each step placed in the core image runs with only what the core image installs: the commands of the core
image's steps (search and eval with the value model against a sidecar, merge-trajectories, data prepare, fetch)
run as real subprocesses in which every module the image lacks fails to import (tests/cluster/in_image.py, from
burnqed/cluster/images.toml). The sidecar is `burnqed serve` on the tiny model (it has its own image); the value
model is trained by train-ebm as the train image would. The in-process policy runs there on the tiny model (read
without transformers on the CPU); a control run on a folder that needs transformers fails there, so the restriction
is real. burnqed.policy.modelfolder reads a tokenizer with burnqed's dependencies and the `modelfolder` extra alone
(no torch, no transformers)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from typer.testing import CliRunner

from burnqed.cli import app
from burnqed.cluster.images import requirements
from burnqed.config import load_config
from burnqed.data.index import bundled_index_path
from burnqed.lean.inprocess import InProcessReplayPool
from burnqed.lean.selftest import FACTORIAL_PROOF, PI_PROOF
from burnqed.policy.modelfolder import PROBE_TEXT, encode_texts, load_tokenizer
from burnqed.records.theorem import Theorem
from burnqed.stages.search import JobSettings, search_job
from burnqed.storage import Store
from burnqed.trajectory.reader import read_results
from leankit.corpus import load_corpus
from minilean.replay.replay_server import ReplayServer
from tests.cluster.conftest import by_name
from tests.cluster.in_image import denied_beyond
from tests.cluster.test_fetch import deepseek_shaped_base
from tests.conftest import double_argv
from tests.doubles.policy_double import ScriptedPolicy, corpus_oracle

ROOT = Path(__file__).parents[2]


def with_root(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Python with `argv`, this checkout first on its path."""
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=timeout, check=False,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": path})


def in_core(*args: str) -> subprocess.CompletedProcess[str]:
    return with_root("-m", "tests.cluster.in_image", "core", *args)


@contextmanager
def sidecar(model: Path, log: Path) -> Iterator[str]:
    """`burnqed serve` on the tiny model (unrestricted: the sidecar has its own image), its log in a file (a pipe
    nobody reads would fill up and stall it); yields its URL."""
    with log.open("w") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "burnqed.cli", "serve", "--model", str(model), "--port", "0"],
                                stdout=sink, stderr=sink, start_new_session=True)
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                found = re.search(r"(http://\S+)", log.read_text())
                if found:
                    yield found.group(1).rstrip("/")
                    break
                if proc.poll() is not None:
                    raise AssertionError(f"burnqed serve exited: {log.read_text()}")
                time.sleep(0.2)
            else:
                raise AssertionError("burnqed serve did not report its address")
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def test_the_core_images_steps_are_the_ones_covered_here(rendered) -> None:
    commands = set()
    for doc in rendered:
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
def test_core_image_steps_import_only_what_the_image_installs(tiny_model_dir: Path, tmp_path: Path,
                                                              store: Store) -> None:
    # an earlier iteration's trajectories (the corpus oracle) and its value model, trained as in the train image
    corpus = load_corpus()
    cfg = load_config(sets=["search.max_nodes=30"])
    oracle = tmp_path / "oracle"

    async def search_oracle() -> None:
        pool = InProcessReplayPool(lambda: ReplayServer(corpus), size=2)
        train = [Theorem.from_recorded(s) for s in corpus.theorems if s.split != "test"]  # train-ebm refuses test ones
        await search_job(train, str(oracle), pool=pool, pool_size=2,
                         policy=ScriptedPolicy(corpus_oracle(corpus)),
                         settings=JobSettings.from_config(cfg.search, cfg.policy, cfg.lean), store=store)

    asyncio.run(search_oracle())
    ebm = tmp_path / "ebm"
    trained = CliRunner().invoke(app, ["train-ebm", "--trajectories", str(oracle), "--output", str(ebm), "--iter", "1",
                                       "--set", "ebm.steps=20", "--set", f"policy.model={tiny_model_dir}"])
    assert trained.exit_code == 0, trained.output

    searched = tmp_path / "search"
    # the sidecar: SGLang's API and burnqed's encoder, in an image of their own
    with sidecar(tiny_model_dir, tmp_path / "serve.log") as url:
        search = in_core("search", "--ebm", str(ebm), "--output", str(searched),
                         "--theorems", str(bundled_index_path("test")), "--set", "lean.workers=2",
                         "--set", "search.max_nodes=4", "--set", "policy.backend=sglang", "--set", f"policy.url={url}",
                         "--set", "ebm.encoder_backend=serve", "--set", f"ebm.encoder_url={url}",
                         "--set", "ebm.device=cpu")
        # the bundled test theorems, as the search: the embedded world's modules are data prepare's below
        evaluated = in_core("eval", "--ebm", str(ebm), "--output", str(tmp_path / "eval.json"), "--budgets", "2",
                            "--theorems", str(bundled_index_path("test")), "--set", "lean.workers=2",
                            "--set", "policy.backend=sglang", "--set", f"policy.url={url}",
                            "--set", "ebm.encoder_backend=serve", "--set", f"ebm.encoder_url={url}",
                            "--set", "ebm.device=cpu")
    assert search.returncode == 0, search.stderr
    assert evaluated.returncode == 0, evaluated.stderr
    assert len(read_results(str(searched), store=store)) == 15
    merged = in_core("merge-trajectories", str(searched), "--output", str(tmp_path / "merged"))
    assert merged.returncode == 0, merged.stderr
    prepared = in_core("data", "prepare", "--output", str(tmp_path / "data"))
    assert prepared.returncode == 0, prepared.stderr
    fetched = in_core("fetch", str(ebm), str(tmp_path / "fetched"), "--require-done")
    assert fetched.returncode == 0, fetched.stderr

    # the in-process policy on the CPU reads the tiny model without transformers (decoder.load_torch_llama,
    # modelfolder.TokenizersOnlyTokenizer), so it runs there too ...
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
