"""The SGLang sidecar's entrypoint (images/sglang/entrypoint.sh), run with bash against a fake SGLang
(tests/doubles/fake_sglang.py): it waits for the ready file `burnqed fetch` writes, gives up after WAIT_TIMEOUT_S,
always exports SGLANG_RETURN_ORIGINAL_LOGPROB=1, starts burnqed's encoder first and SGLang only once the encoder is
healthy (the GPU memory plan depends on that order), and stops everything when one server exits or on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from burnqed.cluster.fetch import READY_NAME

ENTRYPOINT = Path(__file__).parents[2] / "images" / "sglang" / "entrypoint.sh"
FAKE = Path(__file__).parents[1] / "doubles" / "fake_sglang.py"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as response:
            return int(response.status) == 200
    except OSError:
        return False


def wait_for(condition: Any, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@contextmanager
def entrypoint(tmp_path: Path, *args: str, **env: str) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    shim = tmp_path / "sglang-python"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    shim.chmod(0o755)
    encoder = tmp_path / "burnqed"
    encoder.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    encoder.chmod(0o755)
    log = tmp_path / "launches.jsonl"
    full_env = {
        "PATH": os.environ["PATH"], "MODEL_DIR": str(tmp_path / "models" / "policy"), "POLL_S": "0.05",
        "SGLANG_PYTHON": str(shim), "PROBE_PYTHON": sys.executable, "FAKE_SGLANG_LOG": str(log),
        "ENCODER_COMMAND": str(encoder),
        "SGLANG_RETURN_ORIGINAL_LOGPROB": "0", **env,
    }
    proc = subprocess.Popen(["bash", str(ENTRYPOINT), *args], env=full_env, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        yield proc, log
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        if proc.stderr:
            proc.stderr.close()


def launches(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def make_ready(tmp_path: Path) -> None:
    folder = tmp_path / "models" / "policy"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / READY_NAME).write_text("s3://b/run/iter_0/export\n-\n")


@pytest.mark.slow
def test_waits_for_the_ready_file_then_serves(tmp_path: Path) -> None:
    port = free_port()
    with entrypoint(tmp_path, "--dtype", "bfloat16", PORT=str(port)) as (proc, log):
        time.sleep(0.5)
        assert proc.poll() is None and launches(log) == []  # still waiting for the model
        make_ready(tmp_path)
        wait_for(lambda: healthy(port))
        assert launches(log) == [{
            "args": ["--model-path", str(tmp_path / "models" / "policy"), "--host", "127.0.0.1", "--port", str(port),
                     "--mem-fraction-static", "0.85", "--dtype", "bfloat16"],
            "logprob": "1",  # forced, whatever the pod's environment says
        }]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 143
        assert not healthy(port)


@pytest.mark.slow
def test_gives_up_when_the_model_never_arrives(tmp_path: Path) -> None:
    with entrypoint(tmp_path, WAIT_TIMEOUT_S="1") as (proc, log):
        assert proc.wait(timeout=10) == 1
        assert proc.stderr is not None
        assert f"no {tmp_path}/models/policy/{READY_NAME} after 1s" in proc.stderr.read()
        assert launches(log) == []


@pytest.mark.slow
def test_the_encoder_first_then_sglang_once_the_encoder_is_healthy(tmp_path: Path) -> None:
    make_ready(tmp_path)
    port, embed = free_port(), free_port()
    with entrypoint(tmp_path, "--dtype", "bfloat16", PORT=str(port), MEM_FRACTION="0.785", EMBED_PORT=str(embed),
                    ENCODER_MEMORY_GIB="16.32", ENCODER_BATCH_TOKENS="16384",
                    FAKE_ENCODER_WARMUP_S="1.0") as (proc, log):
        wait_for(lambda: len(launches(log)) == 1)
        time.sleep(0.5)
        assert not healthy(embed) and len(launches(log)) == 1  # SGLang waits while the encoder warms up
        wait_for(lambda: healthy(port) and healthy(embed))
        first, second = launches(log)
        assert first == {"encoder": ["serve", "--encode-only", "--model", str(tmp_path / "models" / "policy"),
                                     "--host", "127.0.0.1", "--port", str(embed), "--memory-gib", "16.32",
                                     "--set", "ebm.encode_batch_tokens=16384"]}
        assert "--is-embedding" not in second["args"] and second["args"][-2:] == ["--dtype", "bfloat16"]
        assert second["args"][second["args"].index("--mem-fraction-static") + 1] == "0.785"
        assert second["args"][second["args"].index("--port") + 1] == str(port) and second["logprob"] == "1"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 143
        assert not healthy(port) and not healthy(embed)


def test_one_server_exiting_stops_the_other(tmp_path: Path) -> None:
    make_ready(tmp_path)
    port = free_port()
    with entrypoint(tmp_path, PORT=str(port), EMBED_PORT=str(free_port()), FAKE_SGLANG_EXIT="3") as (proc, log):
        assert proc.wait(timeout=15) == 3
        assert len(launches(log)) == 2  # the encoder, then SGLang, which failed
        assert not healthy(port)


@pytest.mark.slow
def test_an_encoder_that_dies_before_it_is_healthy_fails_the_sidecar(tmp_path: Path) -> None:
    make_ready(tmp_path)
    for code, expected in (("7", 7), ("0", 1)):
        with entrypoint(tmp_path, PORT=str(free_port()), EMBED_PORT=str(free_port()),
                        FAKE_ENCODER_EXIT=code) as (proc, log):
            assert proc.wait(timeout=15) == expected
            assert proc.stderr is not None and "the encoder exited" in proc.stderr.read()
        assert [entry for entry in launches(log) if "args" in entry] == []  # SGLang never started


@pytest.mark.slow
def test_the_rendered_sidecar_args_reach_sglang_and_a_bad_sampling_default_stops_it(tmp_path: Path) -> None:
    """The search pod's sidecar args (`--sampling-defaults openai`, burnqed/workflows/_sidecars.py) pass through the
    entrypoint to SGLang's parser; a value SGLang's parser refuses ends the sidecar with its exit status 2."""
    from burnqed.cluster.render import default_workflows_dir, render_templates
    from burnqed.config import Config

    (doc,) = render_templates(Config(), ["iteration"], default_workflows_dir())[:1]
    search = next(t for t in doc.doc["spec"]["templates"] if t["name"] == "search")
    args = search["sidecars"][0]["args"]
    make_ready(tmp_path)
    with entrypoint(tmp_path, *args, PORT=str(free_port())) as (proc, log):
        wait_for(lambda: len(launches(log)) == 1)
        assert launches(log)[0]["args"][-3:] == ["--sampling-defaults", "openai", "--enable-deterministic-inference"]
    make_ready(tmp_path / "bad")
    with entrypoint(tmp_path / "bad", "--sampling-defaults", "modle", PORT=str(free_port())) as (proc, _):
        assert proc.wait(timeout=15) == 2
        assert proc.stderr is not None and "invalid choice: 'modle'" in proc.stderr.read()
