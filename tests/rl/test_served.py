"""The served rollout engine (`rl.rollout_engine = "served"`, burnqed/rl/served.py) and the endpoints of `burnqed serve`
it uses, as SGLang 0.5.23 has them: /load_lora_adapter, /unload_lora_adapter and /generate's lora_path (strict: an
adapter never loaded is SGLang's error, LoRA off is SGLang's error, an unloaded one is loaded again from its path as
SGLang's tokenizer manager does), /update_weights_from_disk with its weight version in every reply, and /generate from
`input_ids`. An adapter pushed by the engine and read back gives the trainer's own log-probs within LOGPROB_TOLERANCE;
after a second push the server holds the new version alone. A served `burnqed rl` run: each step's rollouts carry the
weights version of the step before, and their server and trainer log-probs agree within the same tolerance.
The reward path under this engine: tests/rl/test_reward.py's engine test."""

from __future__ import annotations

import json
import os
import stat
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from burnqed.config import Config, RlConfig, load_config
from burnqed.errors import PolicyError
from burnqed.lean.pool import LeanPool
from burnqed.policy.server import ModelServer
from burnqed.rl.grpo import RlRequest, RlSettings, run_rl, select_theorems
from burnqed.rl.records import RL_RECORD, ROLLOUTS
from burnqed.rl.served import (
    STALE_WEIGHTS_S,
    WEIGHTS_PREFIX,
    ServedRollouts,
    check_health,
    local_server,
    sample_seed,
    served_engine,
    sweep_stale_weights,
    trainer_logprobs,
)
from burnqed.storage import Store
from tests.rl.helpers import THEOREMS, build_policy
from tests.shared import shared_artifact

# float32 on CPU: the server's decoder (burnqed's LlamaDecoder over merged weights) and the trainer's transformers
# forward differ in summation order only; a completion's log-prob (≤ 12 tokens) agrees to this
LOGPROB_TOLERANCE = 1e-3
PROMPT = "theorem two_plus_two : 2 + 2 = 4 := by\n"


@pytest.fixture(scope="module")
def lora_server(tiny_model_dir: Path) -> Iterator[ModelServer]:
    """`burnqed serve --enable-lora` on the tiny model, in this process."""
    with local_server(tiny_model_dir, device="cpu", seed=0, enable_lora=True) as server:
        yield server


@pytest.fixture(scope="module")
def client(lora_server: ModelServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=lora_server.url, timeout=120) as http:
        yield http


def adapter_model(tiny_model_dir: Path, seed: int) -> Any:
    """The tiny model under a PEFT LoRA adapter whose weights are random and large (not the identity a fresh adapter
    is)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "o_proj", "down_proj"],
                        init_lora_weights=False)
    model = get_peft_model(base, config)
    with torch.no_grad():  # large enough to move the tiny model's confident log-probs
        for name, weight in model.named_parameters():
            if "lora_B" in name:
                weight.add_(0.5)
    return model


def generate(client: httpx.Client, **body: Any) -> httpx.Response:
    return client.post("/generate", json={"sampling_params": {"max_new_tokens": 4, "temperature": 0.0},
                                          "return_logprob": True, **body})


def test_lora_endpoints_answer_as_sglang(client: httpx.Client, lora_server: ModelServer, tiny_model_dir: Path,
                                         tmp_path: Path) -> None:
    folder = tmp_path / "a"
    peft = adapter_model(tiny_model_dir, 1)
    peft.save_pretrained(folder)
    loaded = client.post("/load_lora_adapter", json={"lora_name": "a", "lora_path": str(folder)})
    assert (loaded.status_code, loaded.json()) == (200, {"success": True, "error_message": "",
                                                         "loaded_adapters": {"a": str(folder)}})
    again = client.post("/load_lora_adapter", json={"lora_name": "a", "lora_path": str(folder)})
    assert (again.status_code, again.json()) == (400, {
        "success": False, "error_message": "Failed to load LoRA adapter a because it is already loaded",
        "loaded_adapters": {"a": str(folder)}})
    unknown = generate(client, text=PROMPT, lora_path="b")
    assert unknown.status_code == 400
    assert unknown.json()["error"]["message"] == ("Got LoRA adapter that has never been loaded: b\n"
                                                  "All loaded adapters: dict_keys(['a']).")
    with_adapter = generate(client, text=PROMPT, lora_path="a").json()
    without = generate(client, text=PROMPT).json()
    assert with_adapter["meta_info"]["weight_version"] == "default"
    # the adapter's log-probs are the PEFT model's (not the base's: the tiny model is sure of its first token, the
    # adapter makes it five times less sure)
    assert lora_server.model is not None
    ids = lora_server.model.tokenizer.encode(PROMPT)
    served = [[pair[0] for pair in reply["meta_info"]["output_token_logprobs"]] for reply in (with_adapter, without)]
    own = trainer_logprobs(peft, [ids], [with_adapter["output_ids"]])[0]
    assert all(abs(a - b) <= LOGPROB_TOLERANCE / 10 for a, b in zip(served[0], own, strict=True))
    assert abs(served[0][0] - served[1][0]) > 5e-3
    gone = client.post("/unload_lora_adapter", json={"lora_name": "a"})
    assert (gone.status_code, gone.json()) == (200, {"success": True, "error_message": "", "loaded_adapters": {}})
    twice = client.post("/unload_lora_adapter", json={"lora_name": "a"})
    assert (twice.status_code, twice.json()) == (400, {
        "success": False, "error_message": "LoRA with name a does not exist. Loaded LoRAs: odict_keys([])",
        "loaded_adapters": None})
    # SGLang loads an adapter unloaded since from its path again when a request names it
    reloaded = generate(client, text=PROMPT, lora_path="a").json()
    assert reloaded["meta_info"]["output_token_logprobs"] == with_adapter["meta_info"]["output_token_logprobs"]
    assert client.post("/unload_lora_adapter", json={"lora_name": "a"}).status_code == 200
    bad = client.post("/load_lora_adapter", json={"lora_name": "c", "lora_path": str(tmp_path / "none")})
    assert bad.status_code == 400 and bad.json()["success"] is False
    assert bad.json()["error_message"].startswith("Failed to load LoRA adapter c: FileNotFoundError")
    typo = client.post("/load_lora_adapter", json={"lora_name": "c", "path": str(folder)})
    assert typo.status_code == 400
    assert typo.json() == {"error": {"message": "unknown field 'path': not part of SGLang's /load_lora_adapter "
                                                "request"}}


def test_without_enable_lora_every_adapter_call_is_sglangs_refusal(tiny_model_dir: Path) -> None:
    with local_server(tiny_model_dir, device="cpu", seed=0, enable_lora=False) as server, \
            httpx.Client(base_url=server.url, timeout=60) as http:
        load = http.post("/load_lora_adapter", json={"lora_name": "a", "lora_path": "/x"})
        assert (load.status_code, load.json()) == (400, {
            "success": False, "error_message": "LoRA is not enabled. Please set `--enable-lora` to enable LoRA.",
            "loaded_adapters": None})
        named = generate(http, text=PROMPT, lora_path="a")
        assert named.status_code == 400
        assert named.json()["error"]["message"].startswith("LoRA adapter 'a' was requested, but LoRA is not enabled.")


def test_input_ids_and_weights_from_disk(client: httpx.Client, lora_server: ModelServer, tiny_model_dir: Path,
                                         tmp_path: Path) -> None:
    assert lora_server.model is not None
    ids = lora_server.model.tokenizer.encode(PROMPT)
    by_text = generate(client, text=PROMPT).json()
    by_ids = generate(client, input_ids=ids).json()
    assert by_ids["output_ids"] == by_text["output_ids"] and by_ids["meta_info"]["prompt_tokens"] == len(ids)
    both = generate(client, text=PROMPT, input_ids=ids)
    assert (both.status_code, both.json()["error"]["message"]) == (400, "send text or input_ids, not both")
    outside = generate(client, input_ids=[ids, [10**6]])
    assert outside.status_code == 400 and "exceeds the vocabulary size" in outside.json()["error"]["message"]
    missing = client.post("/update_weights_from_disk", json={"model_path": str(tmp_path / "none")})
    assert missing.status_code == 400 and missing.json()["success"] is False
    assert missing.json()["num_paused_requests"] == 0
    updated = client.post("/update_weights_from_disk", json={"model_path": str(tiny_model_dir),
                                                             "weight_version": "7"})
    assert (updated.status_code, updated.json()) == (200, {
        "success": True, "message": "Succeeded to update model weights. Weight version updated to 7.",
        "num_paused_requests": 0})
    after = generate(client, input_ids=ids).json()
    assert after["meta_info"]["weight_version"] == "7" and after["output_ids"] == by_ids["output_ids"]
    assert client.get("/model_info").json()["weight_version"] == "7"
    refused = client.post("/update_weights_from_disk", json={"model_path": str(tiny_model_dir), "is_async": True})
    assert refused.status_code == 400
    assert refused.json()["error"]["message"].startswith("is_async=True is not supported by burnqed serve")


def test_a_pushed_adapter_gives_the_trainers_log_probs_and_replaces_the_last(
        lora_server: ModelServer, tiny_model_dir: Path, tmp_path: Path) -> None:
    import torch

    model = adapter_model(tiny_model_dir, 2)
    assert lora_server.model is not None
    tokenizer = lora_server.model.tokenizer
    trainer = SimpleNamespace(state=SimpleNamespace(global_step=0), model=model,
                              processing_class=lambda text: {"input_ids": [tokenizer.encode(t) for t in text]})
    engine = ServedRollouts(lora_server.url, tmp_path / "weights", tokenizer_source=tiny_model_dir,
                            rl=RlConfig(rollout_engine="served", max_completion_tokens=8, seed=3))
    out = engine([PROMPT, PROMPT], trainer)
    assert lora_server.weights.loaded() == {"rl-v0": str(tmp_path / "weights" / "v0")}
    assert out["weights_version"] == [0, 0] and out["prompt_ids"] == [tokenizer.encode(PROMPT)] * 2
    assert out["completion_ids"][0] != out["completion_ids"][1]  # two seeds, two samples
    assert [len(ids) for ids in out["logprobs"]] == [len(ids) for ids in out["completion_ids"]]
    assert all(abs(a - b) <= LOGPROB_TOLERANCE for a, b in zip(out["trainer_logprob"], out["served_logprob"],
                                                                 strict=True))
    assert out["env_mask"] == [[1] * len(ids) for ids in out["completion_ids"]]
    assert engine.last is not None and engine.last.masked == 0 and engine.last.max_token_gap <= LOGPROB_TOLERANCE
    with torch.no_grad():  # an optimizer step's worth of change
        for name, weight in model.named_parameters():
            if "lora_B" in name:
                weight.add_(0.5)
    trainer.state.global_step = 1
    moved = engine([PROMPT], trainer)
    assert lora_server.weights.loaded() == {"rl-v1": str(tmp_path / "weights" / "v1")}
    assert not (tmp_path / "weights" / "v0").exists()
    assert moved["weights_version"] == [1]
    assert abs(moved["trainer_logprob"][0] - moved["served_logprob"][0]) <= LOGPROB_TOLERANCE
    again = trainer_logprobs(model, moved["prompt_ids"], moved["completion_ids"])
    assert abs(sum(again[0]) - moved["served_logprob"][0]) <= LOGPROB_TOLERANCE
    assert sample_seed(3, 1, 0) != sample_seed(3, 0, 0) != sample_seed(3, 0, 1)


def test_the_served_engine_needs_temperature_one_and_a_server_that_answers(lora_server: ModelServer) -> None:
    with pytest.raises(ValueError, match=r"rl.rollout_engine = 'served' needs rl.temperature = 1.0, got 0.7"):
        RlConfig(rollout_engine="served", temperature=0.7)
    check_health(lora_server.url)
    with pytest.raises(PolicyError, match=r"^rl.server_url http://127.0.0.1:9 cannot be reached: "):
        check_health("http://127.0.0.1:9")
    # the rl pod's sidecar being started (policy.wait_for_start): a refused connection is waited for, up to wait_s
    started = time.monotonic()
    with pytest.raises(PolicyError, match=r"^rl.server_url http://127.0.0.1:9 cannot be reached after 0.1 s "
                                          r"\(policy.ready_timeout_s\): "):
        check_health("http://127.0.0.1:9", wait_s=0.1, wait_for_start=True, poll_s=0.02)
    assert 0.1 <= time.monotonic() - started < 5


@contextmanager
def health_after(loading: int) -> Iterator[tuple[str, list[int]]]:
    """A server whose /health answers 503 (SGLang loading) `loading` times, then 200: its URL and the answers."""
    answers: list[int] = []

    class Health(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status = 503 if len(answers) < loading else 200
            answers.append(status)
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Health)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", answers
    finally:
        server.shutdown()
        thread.join()
        server.server_close()


def test_a_loading_server_is_waited_for_up_to_the_policys_ready_timeout() -> None:
    with health_after(2) as (url, answers):
        check_health(url, wait_s=30, poll_s=0.02)
        assert answers == [503, 503, 200]
    with health_after(100) as (url, answers), pytest.raises(
            PolicyError, match=rf"^rl.server_url {url} is not ready after 0.1 s \(policy.ready_timeout_s\): GET "
                               r"/health answered 503$"):
        check_health(url, wait_s=0.1, poll_s=0.02)
    with health_after(1) as (url, answers), pytest.raises(PolicyError, match=r"is not ready: GET /health answered 503"):
        check_health(url)  # no wait: the first answer decides
    # the stage waits as the configuration says (the cluster's rl step: its sidecar, started beside it)
    settings = RlSettings.from_config(load_config(sets=["policy.ready_timeout_s=900", "policy.wait_for_start=true"],
                                                       environ={}))
    assert (settings.server_wait_s, settings.server_starting) == (900.0, True)
    assert (RlSettings.from_config(Config()).server_wait_s, RlSettings.from_config(Config()).server_starting) == (
        600.0, False)


def test_the_pushed_versions_folder_is_readable_by_a_server_of_another_uid(lora_server: ModelServer,
                                                                           tiny_model_dir: Path) -> None:
    rl = RlConfig(rollout_engine="served", server_url=lora_server.url)
    with served_engine(rl, lora=True, base=tiny_model_dir, sft=tiny_model_dir, device="cpu") as engine:
        assert engine.url == lora_server.url and stat.S_IMODE(engine.weights_dir.stat().st_mode) == 0o755
    assert not engine.weights_dir.exists()


def test_a_run_killed_outright_leaves_its_pushed_versions_and_a_served_run_a_day_later_removes_them(
        lora_server: ModelServer, tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """kill -9 skips the temporary folder's removal; the next served run removes such folders of this user's once
    untouched for STALE_WEIGHTS_S (a live run pushes a version every step), and nothing else so named."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # tempfile's documented default folder
    old = time.time() - STALE_WEIGHTS_S - 60

    def aged(path: Path, when: float = old) -> Path:
        os.utime(path, (when, when), follow_symlinks=False)
        return path

    killed = tmp_path / f"{WEIGHTS_PREFIX}killed"
    (killed / "v3").mkdir(parents=True)
    (killed / "v3" / "model.safetensors").write_bytes(b"weights")
    aged(killed)
    running = tmp_path / f"{WEIGHTS_PREFIX}running"
    running.mkdir()
    aged(running, time.time() - 600)  # a live run's: it pushed a version 10 minutes ago
    target = tmp_path / "not-weights"
    target.mkdir()
    (target / "kept").write_text("a file of the user's")
    link = tmp_path / f"{WEIGHTS_PREFIX}link"
    link.symlink_to(target)
    aged(link)
    aged(target)
    plain = tmp_path / f"{WEIGHTS_PREFIX}file"
    plain.write_text("not a folder")
    aged(plain)
    another = tmp_path / f"{WEIGHTS_PREFIX}another-user"
    another.mkdir()
    if os.getuid() == 0:  # root can give it away: another user's folder, old as it is, stays
        os.chown(another, os.getuid() + 4242, -1)
    aged(another)
    rl = RlConfig(rollout_engine="served", server_url=lora_server.url)
    with served_engine(rl, lora=True, base=tiny_model_dir, sft=tiny_model_dir, device="cpu") as engine:
        assert engine.weights_dir.parent == tmp_path
        assert not killed.exists()
        assert running.is_dir() and link.is_symlink() and (target / "kept").is_file() and plain.is_file()
        assert another.is_dir() == (os.getuid() == 0)
    assert not engine.weights_dir.exists()
    sweep_stale_weights(tmp_path / "no-such-folder")  # a temporary directory it cannot list: nothing to sweep


@pytest.fixture(scope="module")
def policy(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/rl/helpers.py's SFT output (full weights), shared with tests/rl/test_stage.py."""
    return shared_artifact(tmp_path_factory, "rl-policy", lambda folder: build_policy(tiny_model_dir, folder / "sft"))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_served_run_tags_each_rollout_with_the_step_before(policy: Path, tmp_path: Path) -> None:
    cfg = Config(rl=RlConfig(max_steps=2, num_generations=2, max_completion_tokens=12, save_steps=1,
                             rollout_engine="served"))
    output = tmp_path / "rl"
    store = Store(cache_dir=tmp_path / "cache")
    outcome = run_rl(RlRequest(iteration=0, sft=str(policy / "sft"), output=str(output)),
                     select_theorems(THEOREMS, "all", set()), RlSettings.from_config(cfg),
                     open_pool=lambda: LeanPool.from_config(cfg.lean, size=1), store=store, echo=lambda line: None)
    rollouts = [json.loads(line) for line in (output / ROLLOUTS).read_text(encoding="utf-8").splitlines()]
    assert [(r["step"], r["weights_version"]) for r in rollouts] == [(1, 0)] * 4 + [(2, 1)] * 4
    assert all(abs(r["trainer_logprob"] - r["served_logprob"]) <= LOGPROB_TOLERANCE for r in rollouts)
    record = json.loads((output / RL_RECORD).read_text(encoding="utf-8"))
    assert record["rollout_engine"] == "served" and record["served_masked"] == 0
    assert record["served_logprob_gap"] <= LOGPROB_TOLERANCE and outcome.record.steps == 2
