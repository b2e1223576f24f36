"""The value model end to end on the tiny model: search → train-ebm → search/eval with --ebm (and the ablation),
through the real commands; and the light path never imports torch."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from burnqed.config import load_config
from burnqed.data.index import bundled_index_path
from burnqed.ebm.formats import EbmManifest, EbmMetrics
from burnqed.eval.result import load_eval_result
from burnqed.lean.inprocess import InProcessReplayPool
from burnqed.policy.localmodel import LocalModel
from burnqed.policy.localpolicy import LocalPolicy
from burnqed.records.theorem import Theorem, TheoremIndex
from burnqed.stages.search import JobSettings, search_job
from burnqed.storage import Store
from burnqed.trajectory.reader import read_edges, read_results
from leankit.corpus import load_corpus
from minilean.replay.replay_server import ReplayServer
from tests.doubles.ebm_doubles import unproved_tree
from tests.doubles.policy_double import ScriptedPolicy, corpus_oracle
from tests.processes import cli
from tests.trajectory.factories import result, write_trajectory


@pytest.fixture(scope="module")
def trajectories(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The bundled corpus's train theorems searched twice (in-process replay): by the tiny test model (4 expansions per
    theorem; it proves only one-tactic theorems, which give no positive state: its failed edges are the negatives,
    and its generation is the fixture's whole cost) and by the corpus oracle (30 expansions; multi-step proofs, like
    an earlier iteration's stronger policy)."""
    store = Store(cache_dir=tmp_path_factory.mktemp("cache"))  # module-scoped: its own store
    root = tmp_path_factory.mktemp("search")
    corpus = load_corpus()
    theorems = [Theorem.from_recorded(s) for s in corpus.theorems if s.split != "test"]  # train-ebm refuses test ones

    async def run() -> None:
        policy = LocalPolicy(LocalModel.load(tiny_model_dir, device="cpu", seed=0))
        try:
            for out, searcher, nodes in ((root / "tiny", policy, 4),
                                         (root / "oracle", ScriptedPolicy(corpus_oracle(corpus)), 30)):
                cfg = load_config(sets=[f"search.max_nodes={nodes}", "search.checkpoint_every=20"])
                pool = InProcessReplayPool(lambda: ReplayServer(corpus), size=2)
                await search_job(theorems, str(out), pool=pool, pool_size=2, policy=searcher,
                                 settings=JobSettings.from_config(cfg.search, cfg.policy, cfg.lean), store=store)
        finally:
            await policy.close()

    asyncio.run(run())
    return [str(root / "tiny"), str(root / "oracle")]


def invoke(*args: str) -> subprocess.CompletedProcess[str]:
    return cli(*args)


def first_test_theorems(path: Path, count: int) -> Path:
    """An index of the bundled test split's first `count` theorems, written at `path`."""
    bundled = TheoremIndex.model_validate_json(bundled_index_path("test").read_text(encoding="utf-8"))
    path.write_text(TheoremIndex(name="few", theorems=bundled.theorems[:count]).model_dump_json(), encoding="utf-8")
    return path


@pytest.mark.slow
@pytest.mark.timeout(600)  # ~50 s in the suite, 111 s alone at load 8 when it builds the session's tiny model itself
@pytest.mark.usefixtures("minilean_in_process")  # the eval's and the search's Lean: the value model is the subject
def test_train_ebm_then_eval_with_the_ebm_and_its_ablation(trajectories: list[str], tiny_model_dir: Path,
                                                           tmp_path: Path, store: Store) -> None:
    model = ["--set", f"policy.model={tiny_model_dir}"]
    inputs = [arg for uri in trajectories for arg in ("--trajectories", uri)]
    out = tmp_path / "ebm"
    done = invoke("train-ebm", *inputs, "--output", str(out), "--iter", "1",
                  "--set", "ebm.steps=60", "--set", "ebm.log_every=20", *model)
    assert done.returncode == 0, done.stderr
    stdout = done.stdout
    assert "init: fresh: no --init given" in stdout and "valid: loss" in stdout and "embedding health" in stdout
    progress = [line for line in done.stderr.splitlines() if line.startswith("train-ebm step ")]
    assert [line.split()[2] for line in progress] == ["20/60", "40/60", "60/60"]
    metrics = EbmMetrics.model_validate_json((out / "metrics.json").read_text())
    rows = [r for uri in trajectories for r in read_edges(uri, columns=["label", "outcome"], store=store).to_pylist()]
    positives = sum(1 for r in rows if r["label"] == "positive" and r["outcome"] == "ok")
    assert metrics.steps == 60 and metrics.counts.edges == len(rows) and metrics.counts.trajectories == trajectories
    assert 0 < metrics.counts.positives <= positives and metrics.valid is not None
    assert metrics.embed.computed == metrics.counts.texts and metrics.embed.cached == 0
    assert [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()][::2] == [20, 40, 60]
    manifest = EbmManifest.model_validate_json((out / "ebm.json").read_text())
    assert manifest.iteration == 1 and manifest.head.embedding_dim == 64 and manifest.encoder.verified
    encoder = manifest.encoder
    assert (encoder.backend, encoder.pooling, encoder.normalize) == ("burnqed", "mean", False)
    assert encoder.via == "in-process"
    assert (tmp_path / "ebm-cache" / manifest.encoder.key() / "encoder.json").is_file()
    # A scorer with another pooling refuses the head, before searching anything (one line, exit 2).
    refused = invoke("search", "--ebm", str(out), "--output", str(tmp_path / "s-last"), "--set", "ebm.pooling=last",
                     "--set", "search.max_nodes=2", *model)
    assert refused.returncode == 2, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and "(pooling mean vs last)" in refused.stderr
    assert "mean-pooled" in refused.stderr and "last-pooled" in refused.stderr

    again = invoke("train-ebm", *inputs, "--output", str(out), "--iter", "1", "--set", "ebm.steps=60", *model)
    assert again.returncode == 0 and again.stdout.startswith(f"reusing {out} (finished ")  # log_every: a cadence
    other = invoke("train-ebm", *inputs, "--output", str(out), "--iter", "1", *model)
    assert other.returncode == 2 and "made with other inputs: ebm.steps was 60, now 300;" in other.stderr
    warm = invoke("train-ebm", *inputs, "--output", str(tmp_path / "ebm2"),
                  "--init", str(out), "--cache", str(tmp_path / "ebm-cache"), "--set", "ebm.steps=5", *model)
    assert warm.returncode == 0, warm.stderr
    assert "init: resumed: same embedding model" in warm.stdout
    assert f"{metrics.counts.texts} cached, 0 encoded" in warm.stdout

    result_path = tmp_path / "eval" / "e.json"
    # Budgets of 2 and 4 expansions, the test split's first 3 theorems: the ablation's pair of results is the subject,
    # not the search's length nor its breadth (each expansion is the tiny model's generation).
    few = first_test_theorems(tmp_path / "few.json", 3)
    evaluated = invoke("eval", "--ebm", str(out), "--ablation", "--output", str(result_path), "--budgets", "2,4",
                       "--theorems", str(few), "--set", "lean.workers=2", *model)
    assert evaluated.returncode == 0, evaluated.stderr
    with_ebm, without = load_eval_result(result_path, store=store), load_eval_result(tmp_path / "eval" / "e-noebm.json",
                                                                                     store=store)
    assert with_ebm.ebm == str(out) and without.ebm is None
    assert [r.budget for r in with_ebm.budgets] == [r.budget for r in without.budgets] == [2, 4]
    text = evaluated.stdout
    assert "+ EBM" in text and "Δ llm+ebm − llm" in text and "e-noebm.json" in text

    searched = invoke("search", "--ebm", str(out), "--output", str(tmp_path / "s"), "--set", "lean.workers=2",
                      "--theorems", str(few), "--set", "search.max_nodes=5", *model)
    assert searched.returncode == 0, searched.stderr
    rows = read_edges(str(tmp_path / "s"), columns=["outcome", "energy", "score"], store=store).to_pylist()
    pushed = [r for r in rows if r["score"] is not None]
    assert pushed and all(r["energy"] is not None for r in pushed)
    assert sum(r.value_s for r in read_results(str(tmp_path / "s"), store=store)) > 0


@pytest.mark.slow
@pytest.mark.usefixtures("minilean_in_process")
def test_clear_refusals(tmp_path: Path, store: Store) -> None:
    no_proofs = tmp_path / "t"
    write_trajectory(str(no_proofs), [(result("A"), unproved_tree()), (result("B"), unproved_tree())], store=store)
    done = invoke("train-ebm", "--trajectories", str(no_proofs), "--output", str(tmp_path / "ebm"))
    assert done.returncode == 2
    assert "a trajectory with zero proofs cannot train an EBM" in done.stderr
    assert not (tmp_path / "ebm").exists()
    ablation = invoke("eval", "--ablation", "--output", str(tmp_path / "e.json"))
    assert ablation.returncode == 2 and "give --ebm too" in ablation.stderr
    takes = "--ebm takes a value model: a train-ebm output (a folder with ebm.json, e.g. runs/iter_1/ebm)"
    missing = invoke("search", "--ebm", str(tmp_path / "nothing"), "--output", str(tmp_path / "s"))
    assert (missing.returncode, missing.stderr) == (2, f"error: --ebm {tmp_path / 'nothing'} does not exist: {takes}\n")
    (tmp_path / "ebm.json").write_text("{}", encoding="utf-8")  # a file: its "ebm.json/ebm.json" was read
    a_file = invoke("eval", "--ebm", str(tmp_path / "ebm.json"), "--output", str(tmp_path / "e.json"))
    assert (a_file.returncode, a_file.stderr) == (2, f"error: --ebm {tmp_path / 'ebm.json'} is a file, not a folder: "
                                                    f"{takes}\n")
    # the new user's case: an iteration's policy folder given as --ebm failed 8 s in, once Lean had started
    export = str(tmp_path / "iter_0" / "export")
    with store.staged_output(export, "export") as folder:
        (folder / "config.json").write_text("{}", encoding="utf-8")
    for command in ("eval", "search"):
        policy = invoke(command, "--ebm", export, "--output", str(tmp_path / "p"))
        assert (policy.returncode, policy.stdout, policy.stderr) == (
            2, "", f"error: --ebm {export} is a policy model (the output of `burnqed export`), not a value model: "
            f"{takes}; a policy goes to --model\n")
    assert not (tmp_path / "p").exists()


@pytest.mark.slow
def test_the_cli_and_search_without_an_ebm_do_not_import_torch() -> None:
    code = (
        "import asyncio, sys\n"
        "import burnqed.cli, burnqed.commands.ebm, burnqed.ebm, burnqed.ebm.formats, burnqed.ebm.sampling\n"
        "import burnqed.ebm.encoder_identity\n"
        "from burnqed.commands.edges import open_value_fn\n"
        "from burnqed.config import load_config\n"
        "from burnqed.storage import Store\n"
        "async def go():\n"
        "    cfg = load_config()\n"
        "    async with open_value_fn(None, cfg, store=Store.from_config(cfg.storage)) as value:\n"
        "        assert value is None\n"
        "asyncio.run(go())\n"
        "heavy = sorted(m for m in ('torch', 'transformers', 'safetensors') if m in sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_burnqed_serve_and_the_in_process_encoder_are_one_encoder(trajectories: list[str], tiny_model_dir: Path,
                                                                  tmp_path: Path) -> None:
    from tests.doubles.fault_server import FaultServer
    from tests.search.test_cli_prover import served

    cache = str(tmp_path / "cache")
    oracle = ["--trajectories", trajectories[1]]
    with served(tiny_model_dir) as url:
        serve = ["--set", "ebm.encoder_backend=serve", "--set", f"ebm.encoder_url={url}"]
        remote = invoke("ebm", "embed", *oracle, "--cache", cache, *serve, "--set", "ebm.encode_batch=16",
                        "--set", "ebm.cache_chunk=64")
        mismatch = invoke("ebm", "embed", *oracle, "--cache", cache, *serve, "--set", "ebm.pooling=last")
    assert remote.returncode == 0, remote.stderr
    assert " 0 cached, " in remote.stdout and "states/s" in remote.stdout
    assert mismatch.returncode == 2 and "embeds with pooling=mean but this configuration says last" in mismatch.stderr
    local = invoke("ebm", "embed", *oracle, "--cache", cache, "--set", f"policy.model={tiny_model_dir}")
    assert local.returncode == 0, local.stderr
    assert ", 0 encoded" in local.stdout  # the same code on the same folder: the server's embeddings are reused
    assert len([p for p in Path(cache).iterdir() if p.is_dir()]) == 1
    with FaultServer() as sglang:  # an SGLang-like server: /encode, but no burnqed encoder behind it
        foreign = invoke("ebm", "embed", *oracle, "--cache", cache, "--set", "ebm.encoder_backend=serve",
                         "--set", f"ebm.encoder_url={sglang.url}")
    assert foreign.returncode == 2 and "is not burnqed's encoder" in foreign.stderr
    old = invoke("ebm", "embed", *oracle, "--cache", cache, "--set", "ebm.encoder_backend=sglang")
    assert old.returncode == 2 and "SGLang's --is-embedding pools the last token" in old.stderr


@pytest.mark.slow
def test_the_gpu_benchmark_refuses_clearly_without_cuda(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA is available: the refusal path is not reachable")
    from benchmarks import ebm

    monkeypatch.setattr(sys, "argv", ["benchmarks/ebm.py", "--gpu"])  # its main in this process: no torch import
    with pytest.raises(SystemExit) as stop:
        ebm.main()
    done = capsys.readouterr()
    assert stop.value.code == 2 and done.out == ""
    assert done.err.startswith("error: --gpu needs a CUDA device") and len(done.err.splitlines()) == 1


@contextmanager
def served_under_transformers4(model: Path, env: dict[str, str]) -> Iterator[str]:
    """`burnqed serve --encode-only` on `model` in a child whose transformers is 4.57.1 (SGLang 0.5.6's pin)."""
    from tests.processes import background

    with background("serve", "--model", str(model), "--port", "0", "--encode-only", env=env) as proc:
        assert proc.stderr is not None
        for line in proc.stderr:
            if "http://" in line:
                yield line.strip().split()[-1].rstrip("/")
                break
        else:
            raise AssertionError("burnqed serve did not report its address")
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=30) == 0


def _deepseek_shaped(tiny: Path, folder: Path) -> Path:
    """The tiny model with a tokenizer declared as DeepSeek's is: Llama's class with add_bos_token, a tokenizer.json
    that adds nothing, as downloaded. transformers 4.57 adds BOS, 5.x loading it as it is does not; burnqed reads it
    through burnqed.policy.modelfolder.load_tokenizer (BOS, the flag's rule) under both."""
    shutil.copytree(tiny, folder)
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    tokenizer["post_processor"] = None
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config.update(tokenizer_class="LlamaTokenizerFast", add_bos_token=True, unk_token="<|pad|>")
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.slow
@pytest.mark.timeout(600)  # train-ebm, then a server importing torch and transformers 4.57: ~1 min alone
def test_a_value_model_scores_alike_in_process_and_through_serve_under_transformers4(
        trajectories: list[str], tiny_model_dir: Path, tmp_path: Path, store: Store,
        transformers4_env: dict[str, str]) -> None:
    from burnqed.commands.edges import open_value_fn
    from burnqed.ebm.scorer import EnergyScorer

    out = tmp_path / "ebm"
    inputs = [arg for uri in trajectories for arg in ("--trajectories", uri)]
    done = invoke("train-ebm", *inputs, "--output", str(out), "--iter", "1", "--set", "ebm.steps=20",
                  "--set", f"policy.model={tiny_model_dir}")
    assert done.returncode == 0, done.stderr
    seen = sorted({edge["state_before"] for edge in read_edges(trajectories[1], columns=["state_before"],
                                                               store=store).to_pylist()})
    goal, states = seen[0], seen[1:25]

    async def energies(*sets: str) -> list[float]:
        cfg = load_config(sets=[f"policy.model={tiny_model_dir}", *sets])
        async with open_value_fn(str(out), cfg, store=store) as value:
            assert isinstance(value, EnergyScorer)
            return await value.energies(goal, states)

    here = asyncio.run(energies())
    with served_under_transformers4(tiny_model_dir, transformers4_env) as url:
        there = asyncio.run(energies("ebm.encoder_backend=serve", f"ebm.encoder_url={url}"))
    worst = max(abs(a - b) for a, b in zip(here, there, strict=True))
    # bf16 tolerance: half a unit in the last place of bf16 (2^-9 relative) of the largest energy.
    assert len(here) == len(states) == 24 and worst <= 2**-9 * max(abs(e) for e in here), (worst, here, there)
    print(f"energies in-process vs served under transformers 4.57.1: max |Δ| {worst:.2e} over {len(here)} states")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_folder_tokenized_differently_under_transformers4_is_refused(
        tiny_model_dir: Path, tmp_path: Path, store: Store, transformers4_env: dict[str, str]) -> None:
    from dataclasses import replace

    from transformers import AutoTokenizer

    from burnqed.commands.edges import open_value_fn
    from burnqed.ebm.encoder_identity import local_identity
    from burnqed.errors import ConfigError
    from burnqed.policy.localmodel import LocalModel
    from burnqed.policy.modelfolder import tokenizer_probe
    from tests.ebm.test_train import publish

    folder = _deepseek_shaped(tiny_model_dir, tmp_path / "deepseek-shaped")
    model = LocalModel.load(folder, device="cpu")
    spec = model.encoder_spec("mean", False, 4096)
    model.close()
    assert spec.probe[0] == 1  # burnqed's reading: the flag's BOS, as 4.57 reads it
    # A value model trained on other token ids: transformers 5 reading the folder as it is (what burnqed recorded
    # before modelfolder.load_tokenizer) adds no BOS.
    as_it_is = tokenizer_probe(AutoTokenizer.from_pretrained(folder))
    assert as_it_is[0] != 1
    trained_on = local_identity(str(folder), str(folder), replace(spec, probe=tuple(as_it_is)))
    publish(tmp_path / "ebm", encoder=trained_on, dim=64, store=store)

    async def open_served(url: str) -> None:
        cfg = load_config(sets=[f"policy.model={folder}", "ebm.encoder_backend=serve", f"ebm.encoder_url={url}"])
        async with open_value_fn(str(tmp_path / "ebm"), cfg, store=store):
            raise AssertionError("a head trained on other token ids was accepted")

    with served_under_transformers4(folder, transformers4_env) as url, pytest.raises(ConfigError) as refused:
        asyncio.run(open_served(url))
    # Both id lists shown: the served encoder under 4.57 reads the folder exactly as burnqed does under 5.x (BOS
    # first); the head's record does not. (5.19 reading it as it is also splits the text otherwise: it rebuilds a
    # Llama class's pre-tokenizer.)
    assert f"tokenizer probe {trained_on.probe} vs {list(spec.probe)}" in str(refused.value)


@pytest.mark.slow
def test_ebm_embed_embeds_trajectories_too_small_to_train_on_and_says_so(tiny_model_dir: Path, tmp_path: Path,
                                                                          store: Store) -> None:
    no_proofs = tmp_path / "t"
    write_trajectory(str(no_proofs), [(result("A"), unproved_tree())], store=store)
    done = invoke("ebm", "embed", "--trajectories", str(no_proofs), "--cache", str(tmp_path / "cache"),
                  "--set", f"policy.model={tiny_model_dir}")
    assert done.returncode == 0, done.stderr
    assert "3 texts: 0 cached, 3 encoded" in done.stdout  # embed trains nothing: no value model's minimum applies
    warning = "warning: train-ebm would refuse these trajectories alone ("
    first = done.stderr.splitlines()[0]
    assert first.startswith(warning) and first.endswith("with a larger budget first); embedding them anyway")
