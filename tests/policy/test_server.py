"""`burnqed serve`: SGLang's native API over the local model, in-process and as a real subprocess."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from burnqed.policy.localmodel import LocalModel
from burnqed.policy.modelfolder import PROBE_TEXT
from burnqed.policy.server import ModelServer
from burnqed.policy.tiny import training_pairs
from burnqed.policy.wire import EncodeSettings, RequestError, parse_generate
from leankit.corpus import load_corpus


@pytest.fixture(scope="module")
def model(tiny_model_dir: Path) -> LocalModel:
    return LocalModel.load(tiny_model_dir, device="cpu", seed=0)


@pytest.fixture(scope="module")
def prompts() -> list[str]:
    pairs = training_pairs(load_corpus())
    return [pairs[0][0], pairs[120][0]]


@contextmanager
def running(load: Callable[[], LocalModel]) -> Iterator[tuple[ModelServer, httpx.Client]]:
    server = ModelServer(load, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    server.start_loading(stop_on_failure=False)
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            yield server, client
    finally:
        server.shutdown()
        thread.join(5)
        server.model = None  # the module's model is shared: do not let server_close unload it
        server.server_close()


def generate(client: httpx.Client, text: Any, **params: Any) -> Any:
    body = {"text": text, "sampling_params": {"max_new_tokens": 24, "stop": ["```"], **params},
            "return_logprob": True}
    response = client.post("/generate", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def test_health_is_503_until_the_model_is_loaded(model: LocalModel):
    release = threading.Event()

    def slow_load() -> LocalModel:
        release.wait(10)
        return model

    with running(slow_load) as (server, client):
        assert client.get("/health").status_code == 503
        assert client.get("/health_generate").status_code == 503
        busy = client.post("/generate", json={"text": "x"})
        assert busy.status_code == 503 and "loading" in busy.json()["error"]["message"]
        release.set()
        assert server.ready.wait(10)
        assert client.get("/health").status_code == 200
        assert client.get("/health_generate").status_code == 200


@pytest.mark.slow
def test_generate_reply_shapes_match_sglang(model: LocalModel, prompts: list[str]):
    with running(lambda: model) as (_, client):
        single = generate(client, prompts[0], n=1, temperature=0)
        assert isinstance(single, dict)
        assert set(single) == {"text", "output_ids", "meta_info"}
        meta = single["meta_info"]
        assert meta["finish_reason"] == {"type": "stop", "matched": "```"}
        assert "```" not in single["text"]
        assert meta["prompt_tokens"] == len(model.tokenizer(prompts[0])["input_ids"])
        assert meta["completion_tokens"] == len(meta["output_token_logprobs"]) == len(single["output_ids"])
        assert [t for _, t, _ in meta["output_token_logprobs"]] == single["output_ids"]
        assert all(text is None for _, _, text in meta["output_token_logprobs"])
        [[local]] = model.generate_detailed([prompts[0]], parse_generate(
            {"text": "x", "sampling_params": {"max_new_tokens": 24, "stop": ["```"], "temperature": 0}}).sampling)
        assert single["text"] == local.text
        assert sum(lp for lp, _, _ in meta["output_token_logprobs"]) == pytest.approx(local.logprob, abs=1e-5)

        one_text_many = generate(client, prompts[0], n=3, temperature=1.0)
        assert isinstance(one_text_many, list) and len(one_text_many) == 3
        listed = generate(client, [prompts[0]], n=1, temperature=0)
        assert isinstance(listed, list) and [item["text"] for item in listed] == [single["text"]]

        batch = generate(client, prompts, n=3, temperature=1.0, top_p=0.9)
        assert isinstance(batch, list) and len(batch) == 6
        # Prompt-major: [p0s0, p0s1, p0s2, p1s0, ...], like SGLang's _handle_batch_request.
        lengths = [len(model.tokenizer(p)["input_ids"]) for p in prompts]
        assert [item["meta_info"]["prompt_tokens"] for item in batch] == [lengths[0]] * 3 + [lengths[1]] * 3
        assert len({item["meta_info"]["id"] for item in batch}) == 6

        plain = client.post("/generate", json={"text": prompts[0], "sampling_params": {"max_new_tokens": 3}}).json()
        assert "output_token_logprobs" not in plain["meta_info"]
        assert plain["meta_info"]["finish_reason"] == {"type": "length", "length": 3}
        texts = client.post("/generate", json={"text": prompts[0], "return_logprob": True,
                                               "return_text_in_logprobs": True,
                                               "sampling_params": {"max_new_tokens": 3, "temperature": 0}}).json()
        assert "".join(t for _, _, t in texts["meta_info"]["output_token_logprobs"]) == texts["text"]


def test_encode_and_model_info(model: LocalModel, prompts: list[str]):
    with running(lambda: model) as (_, client):
        single = client.post("/encode", json={"text": prompts[0]}).json()
        assert isinstance(single, dict)
        assert single["embedding"] == pytest.approx(model.encode([prompts[0]])[0], abs=1e-6)
        assert single["meta_info"]["prompt_tokens"] == len(model.tokenizer(prompts[0])["input_ids"])
        many = client.post("/encode", json={"text": [prompts[1], "⊢ x ≤ y"]}).json()
        assert [len(item["embedding"]) for item in many] == [64, 64]
        assert many[0]["embedding"] == pytest.approx(model.encode([prompts[1]])[0], abs=1e-5)
        info = client.get("/get_model_info").json()
        assert info == client.get("/model_info").json() == {
            "model_path": model.name, "tokenizer_path": model.name, "is_generation": True,
            "preferred_sampling_params": None, "weight_version": "default", "has_image_understanding": False,
            "has_audio_understanding": False}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (b'{"text": []}', "text must be a string or a non-empty list of strings"),
        (b'{"text": ["a", 3]}', "text must be a string or a non-empty list of strings"),
        (b'{"text": "a", "sampling_params": {"n": 0}}', "sampling_params.n must be in [1, 256]"),
        (b'{"text": "a", "sampling_params": {"n": 1.5}}', "sampling_params.n must be an integer"),
        (b'{"text": "a", "sampling_params": {"temperature": "hot"}}', "temperature must be a number"),
        (b'{"text": "a", "sampling_params": {"top_p": 0}}', "sampling_params.top_p must be in (0.0, 1.0]"),
        (b'{"text": "a", "sampling_params": {"stop": [1]}}', "stop must be a string or a list of strings"),
        (b'{"text": "a", "sampling_params": {"top_k": 0}}',
         "sampling_params.top_k must be -1 (disable) or at least 1, got 0"),
        (b'{"text": "a", "sampling_params": {"top_k": -2}}',
         "sampling_params.top_k must be -1 (disable) or at least 1, got -2"),
        (b'{"text": "a", "sampling_params": {"top_k": 2.5}}', "sampling_params.top_k must be an integer, got 2.5"),
        (b'{"text": "a", "sampling_params": {"min_p": 1.5}}', "sampling_params.min_p must be in [0.0, 1.0], got 1.5"),
        (b'{"text": "a", "sampling_params": {"repetition_penalty": 0}}',
         "sampling_params.repetition_penalty must be in (0.0, 2.0], got 0"),
        (b'{"text": "a", "sampling_params": {"frequency_penalty": -3}}',
         "sampling_params.frequency_penalty must be in [-2.0, 2.0], got -3"),
        (b'{"text": "a", "sampling_params": {"presence_penalty": true}}',
         "sampling_params.presence_penalty must be a number, got True"),
        (b'{"text": "a", "sampling_params": {"min_p": 0.1, "sampling_seed": 3}}',
         "sampling_params.min_p=0.1 cannot be combined with a sampling seed"),
        (b'{"text": "a", "sampling_params": {"min_new_tokens": 2}}', "min_new_tokens=2 is not supported"),
        (b'{"text": "a", "sampling_params": [{"n": 1}]}', "send one object per text"),
        (b'{"text": "a", "return_logprob": "yes"}', "return_logprob must be true or false"),
        (b'{"text": "a", "stream": true}', "stream is not supported"),
        (b'{"input_ids": []}', "input_ids cannot be empty."),
        (b'{"input_ids": [[1, 2], [-1]]}', "input_ids must be a non-empty list of token ids"),
        (b'{"text": "a", "return_logprob": true, "top_logprobs_num": 5}',
         "top_logprobs_num=5 is not supported by burnqed serve (it does not implement top_logprobs_num); leave it "
         "out or send null or 0"),
        (b'{"text": "a", "logprob_start_len": 0}', "logprob_start_len=0 is not supported"),
        (b'{"text": "a", "lora_path": "adapter"}', "LoRA adapter 'adapter' was requested, but LoRA is not enabled."),
        (b'{"text": "a", "lora_path": ["adapter"]}', "lora_path must be one adapter name (a string)"),
        (b'{"text": "a", "temprature": 0.5}', "unknown field 'temprature': not part of SGLang's /generate request"),
    ],
)
def test_bad_requests_are_400_with_a_message(model: LocalModel, body: bytes, message: str):
    with running(lambda: model) as (_, client):
        response = client.post("/generate", content=body, headers={"Content-Type": "application/json"})
        assert response.status_code == 400
        assert message in response.json()["error"]["message"]


def test_neutral_sglang_defaults_are_accepted_and_unknown_paths_404(model: LocalModel):
    request = parse_generate({"text": "a", "sampling_params": {"min_new_tokens": 0, "ignore_eos": False, "stop": "x"}})
    assert request.sampling.stop == ("x",) and request.single
    assert not parse_generate({"text": "a", "sampling_params": {"n": 2}}).single
    # SGLang's own defaults of the fields this server does not implement, and bookkeeping fields, pass.
    quiet = parse_generate({"text": "a", "top_logprobs_num": 0, "logprob_start_len": -1, "token_ids_logprob": None,
                            "return_hidden_states": False, "rid": "r1", "log_metrics": False})
    assert quiet.texts == ["a"]
    with pytest.raises(RequestError):
        parse_generate({"text": "a", "sampling_params": {"ignore_eos": True}})
    with running(lambda: model) as (_, client):
        assert client.post("/nowhere", json={}).status_code == 404
        assert client.post("/encode", json={"text": 5}).status_code == 400


@pytest.mark.slow
def test_a_prompt_too_long_for_the_context_fails_the_whole_batch_like_sglang(model: LocalModel, prompts: list[str]):
    long = "⊢ " + " + ".join(f"a{i}" for i in range(900))
    with running(lambda: model) as (_, client):
        [short_count, long_count] = model.count_tokens([prompts[0], long])
        assert model.context_length == 2048 and long_count >= 2048  # the tiny model's max_position_embeddings
        listed = client.get("/v1/models").json()
        assert listed["object"] == "list" and listed["data"][0]["max_model_len"] == 2048
        assert listed["data"][0]["id"] == model.name
        batch = {"text": [prompts[0], long, prompts[1]], "sampling_params": {"max_new_tokens": 8}}
        refused = client.post("/generate", json=batch)
        assert refused.status_code == 400
        assert refused.json() == {"error": {"message": f"The input ({long_count} tokens) is longer than the model's "
                                                       "context length (2048 tokens)."}}
        # prompt + max_new_tokens reaching the context: SGLang's second message; checked only when it is set.
        budget = 2048 - short_count
        near = client.post("/generate", json={"text": prompts[0], "sampling_params": {"max_new_tokens": budget}})
        assert near.status_code == 400
        assert near.json()["error"]["message"] == (
            "Requested token count exceeds the model's maximum context length of 2048 tokens. You requested a total "
            f"of 2048 tokens: {short_count} tokens from the input messages and {budget} tokens for the completion. "
            "Please reduce the number of tokens in the input messages or the completion to fit within the limit.")
        fits = client.post("/generate", json={"text": prompts[0], "sampling_params": {"max_new_tokens": budget - 1}})
        assert fits.status_code == 200, fits.text
        counted = client.post("/tokenize", json={"prompt": [prompts[0], long]}).json()
        assert counted["count"] == [short_count, long_count]
        assert counted["tokens"][0] == model.tokenizer(prompts[0])["input_ids"]
        one = client.post("/tokenize", json={"prompt": prompts[0], "add_special_tokens": False}).json()
        assert one["count"] == short_count - 1 and isinstance(one["tokens"][0], int)  # no BOS
        assert client.post("/tokenize", json={"text": "x"}).status_code == 400


def test_encode_only_serves_the_value_models_encoder_and_describes_it(model: LocalModel, prompts: list[str]):
    from burnqed.policy.fingerprint import folder_fingerprint

    settings = EncodeSettings(pooling="last", normalize=True, max_tokens=64, batch_tokens=128)
    server = ModelServer(lambda: model, "127.0.0.1", 0, encode=settings, encode_only=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    server.start_loading(stop_on_failure=False)
    try:
        assert server.ready.wait(30)
        with httpx.Client(base_url=server.url, timeout=30) as client:
            info = client.get("/encoder_info").json()
            assert info == {"backend": "burnqed", "model": model.name, "digest": folder_fingerprint(str(model.path)),
                            "spec": {"pooling": "last", "normalize": True, "layer": -1, "max_tokens": 64,
                                     "dtype": "float32", "probe": model.tokenizer(PROBE_TEXT)["input_ids"]}}
            vectors = client.post("/encode", json={"text": [prompts[0], "⊢ True"]}).json()
            expected = model.encode([prompts[0], "⊢ True"], pooling="last", normalize=True, max_tokens=64)
            assert [v["embedding"] for v in vectors] == [pytest.approx(e, abs=1e-6) for e in expected]
            refused = client.post("/generate", json={"text": "a"})
            assert refused.status_code == 400 and "--encode-only" in refused.json()["error"]["message"]
            assert client.get("/model_info").json()["is_generation"] is False
            assert client.get("/health_generate").status_code == 200
    finally:
        server.shutdown()
        thread.join(5)
        server.model = None
        server.server_close()


@pytest.mark.slow
def test_model_failure_is_500(model: LocalModel, monkeypatch: pytest.MonkeyPatch):
    def explode(*args: object) -> None:
        raise RuntimeError("CUDA out of memory")

    with running(lambda: model) as (_, client):
        monkeypatch.setattr(model, "generate_detailed", explode)
        response = client.post("/generate", json={"text": "a"})
        assert response.status_code == 500
        assert response.json() == {"error": {"message": "RuntimeError: CUDA out of memory"}}


def read_lines(stream: Any, lines: queue.Queue[str]) -> None:
    for line in stream:
        lines.put(line)


@pytest.mark.slow
def test_burnqed_serve_subprocess_speaks_sglang_and_stops_on_sigterm(tiny_model_dir: Path, prompts: list[str]):
    env = {**os.environ, "BURNQED_LOG_LEVEL": "WARNING"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "burnqed.cli", "serve", "--model", str(tiny_model_dir), "--port", "0",
         "--set", "policy.device=cpu"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=read_lines, args=(proc.stderr, lines), daemon=True).start()
        first = lines.get(timeout=60)
        prefix = f"serving {tiny_model_dir} on http://127.0.0.1:"
        assert first.startswith(prefix), first
        url = first.strip().removeprefix("serving ").split(" on ", 1)[1]
        deadline = time.monotonic() + 60
        with httpx.Client(base_url=url, timeout=30) as client:
            while client.get("/health").status_code != 200:
                assert time.monotonic() < deadline, "server never became healthy"
                time.sleep(0.1)
            batch = generate(client, prompts, n=2, temperature=0.8)
            assert len(batch) == 4 and all("output_token_logprobs" in item["meta_info"] for item in batch)
            assert client.post("/generate", content=b"{").status_code == 400
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        assert proc.stdout is not None and proc.stdout.read() == ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


@pytest.mark.slow
def test_burnqed_serve_refuses_a_folder_that_is_not_a_model(tmp_path: Path):
    result = subprocess.run(
        [sys.executable, "-m", "burnqed.cli", "serve", "--model", str(tmp_path), "--port", "0"],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert result.returncode == 2  # bad input: a path that names no model
    assert result.stderr.strip() == (
        f"error: model folder {tmp_path} is missing config.json, weights (model.safetensors or "
        "model.safetensors.index.json or pytorch_model.bin), a tokenizer (tokenizer.json or tokenizer.model); "
        "it is not a model folder"
    )


def test_serve_reports_a_model_that_fails_to_load(tmp_path: Path, tiny_model_dir: Path,
                                                  capsys: pytest.CaptureFixture[str]):
    import shutil

    from burnqed.errors import ModelError
    from burnqed.policy.server import serve

    broken = tmp_path / "broken"
    shutil.copytree(tiny_model_dir, broken)
    (broken / "model.safetensors").write_bytes(b"\0" * 16)
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(ModelError, match=f"cannot load the model in {broken}"):
        serve(broken, "127.0.0.1", 0, device="cpu")
    assert capsys.readouterr().err.startswith(f"serving {broken} on http://127.0.0.1:")
    assert signal.getsignal(signal.SIGTERM) is before
