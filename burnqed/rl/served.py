"""`rl.rollout_engine = "served"`: RL's rollouts sampled by an SGLang-compatible server (the SGLang sidecar, or
`burnqed serve` on one machine) through TRL's `rollout_func`, the policy pushed to the server after every optimiser
step, each rollout tagged with the weights version that sampled it (docs/training.md, "Rollout engines").

    with served_engine(cfg.rl, lora=lora, base=base, sft=sft, device="cpu") as engine:  # rl.server_url or in-process
        trainer = GRPOTrainer(..., rollout_func=engine)  # TRL calls engine(prompts, trainer) at each generation

Each call: when the trainer's step differs from the version the server holds, the policy is saved and pushed (an
adapter loaded as `rl-v{step}` over the server's base and the previous one unloaded, or full weights through
/update_weights_from_disk with weight_version = the step); then one /generate of the step's prompts as token ids (the
trainer's tokenisation, so the ids the trainer scores are the ids the server sampled from), one sample per row, each
seeded from rl.seed, the step and its row; token ids and log-probs as SGLang's native reply gives them
(`meta_info.output_token_logprobs`). The trainer's own log-probs of the same tokens are computed too: TRL corrects
the server-trainer mismatch only for vLLM, so half of its default vLLM correction (`sequence_mask`) is applied here: a
completion whose ratio exp(Σ trainer − Σ server) exceeds IS_CLIP_MAX leaves the loss (`env_mask`); the ratios inside
the bound are not applied as weights (measured, not corrected). Both sums travel with each rollout to the journal.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import stat
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from burnqed.config import RlConfig
from burnqed.errors import InputError, PolicyError
from burnqed.policy.modelfolder import write_config, write_tokenizer

if TYPE_CHECKING:
    from burnqed.policy.server import ModelServer

IS_CLIP_MAX = 3.0  # TRL's vllm_importance_sampling_clip_max default (mode "sequence_mask")
REQUEST_TIMEOUT_S = 3600.0  # one step's generation or one weights push
ADAPTER_PREFIX = "rl-v"
WEIGHTS_PREFIX = "burnqed-rl-weights-"  # the pushed versions' temporary folder, in the temporary directory
# A weights folder untouched this long belongs to no live run (a run pushes a version every step, and a step's
# generation and push each time out within REQUEST_TIMEOUT_S): a run killed outright (kill -9, the OOM killer) left it.
STALE_WEIGHTS_S = 24 * 3600.0


@dataclass(frozen=True, slots=True)
class ServedStats:
    """A step's served rollouts: the weights version, and the log-prob gap between server and trainer."""

    version: int
    completions: int
    masked: int  # completions left out of the loss: importance ratio above IS_CLIP_MAX
    max_token_gap: float  # the largest |trainer − server| log-prob of any token
    mean_token_gap: float


class ServedRollouts:
    """TRL's `rollout_func` against the server at `url` (module docstring); `weights_dir` holds the pushed versions
    (the newest one only), `tokenizer_source` the model folder whose tokenizer a pushed full model carries."""

    __name__ = "served"

    def __init__(self, url: str, weights_dir: Path, *, tokenizer_source: Path, rl: RlConfig) -> None:
        if rl.temperature != 1.0:
            raise InputError(temperature_problem(rl.temperature))
        self.url = url.rstrip("/")
        self.weights_dir = weights_dir
        self.tokenizer_source = tokenizer_source
        self.rl = rl
        self.version: int | None = None  # the trainer step whose weights the server holds
        self.adapter: str | None = None  # the adapter name requests carry (LoRA), else None
        self.folder: Path | None = None  # the pushed version's folder
        self.last: ServedStats | None = None

    # ------------------------------------------------------------------------------------------ the rollouts

    def __call__(self, prompts: list[str], trainer: Any) -> dict[str, list[Any]]:
        step = int(trainer.state.global_step)
        if self.version != step:
            self.push(trainer.model, step)
        prompt_ids: list[list[int]] = [list(ids) for ids in trainer.processing_class(text=prompts)["input_ids"]]
        completion_ids, logprobs = self.generate(prompt_ids, step)
        mine = trainer_logprobs(trainer.model, prompt_ids, completion_ids)
        served = [sum(row) for row in logprobs]
        own = [sum(row) for row in mine]
        keep = [math.exp(min(a - b, 700.0)) <= IS_CLIP_MAX for a, b in zip(own, served, strict=True)]
        gaps = [abs(a - b) for rows in zip(mine, logprobs, strict=True) for a, b in zip(*rows, strict=True)]
        self.last = ServedStats(step, len(prompts), keep.count(False), max(gaps, default=0.0),
                                sum(gaps) / len(gaps) if gaps else 0.0)
        return {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": logprobs,
                "env_mask": [[int(k)] * len(ids) for k, ids in zip(keep, completion_ids, strict=True)],
                "weights_version": [step] * len(prompts), "served_logprob": served, "trainer_logprob": own}

    def generate(self, prompt_ids: list[list[int]], step: int) -> tuple[list[list[int]], list[list[float]]]:
        """One sample per prompt row (seeded by `sample_seed`), with the version pushed: (token ids, log-probs)."""
        params = [{"n": 1, "temperature": self.rl.temperature, "top_p": 1.0,
                   "max_new_tokens": self.rl.max_completion_tokens, "sampling_seed": sample_seed(self.rl.seed, step, i)}
                  for i in range(len(prompt_ids))]
        body: dict[str, Any] = {"input_ids": prompt_ids, "sampling_params": params, "return_logprob": True}
        if self.adapter is not None:
            body["lora_path"] = self.adapter
        reply = self.post("/generate", body)
        items = reply if isinstance(reply, list) else [reply]
        if len(items) != len(prompt_ids):
            raise PolicyError(f"the server answered {len(items)} completions for {len(prompt_ids)} prompts")
        ids: list[list[int]] = []
        logprobs: list[list[float]] = []
        for item in items:
            meta = item["meta_info"]
            if self.adapter is None and meta.get("weight_version") != str(step):
                raise PolicyError(f"the server sampled with weights {meta.get('weight_version')!r}, not the pushed "
                                  f"version {step}: another client changed its weights")
            pairs = meta["output_token_logprobs"]
            ids.append([int(token) for _, token, *_ in pairs])
            logprobs.append([float(logprob) for logprob, *_ in pairs])
        return ids, logprobs

    # ------------------------------------------------------------------------------------------ the weights

    def push(self, model: Any, step: int) -> None:
        """Save the policy as version `step` and make the server sample from it: an adapter (a PEFT model) loaded
        under a new name and the previous one unloaded, else the full weights reloaded from disk."""
        folder = self.weights_dir / f"v{step}"
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        if hasattr(model, "peft_config"):
            model.save_pretrained(folder, selected_adapters=["default"])
            name = f"{ADAPTER_PREFIX}{step}"
            self.post("/load_lora_adapter", {"lora_name": name, "lora_path": str(folder)})
            if self.adapter is not None:
                self.post("/unload_lora_adapter", {"lora_name": self.adapter})
            self.adapter = name
        else:
            model.save_pretrained(folder)
            write_tokenizer(self.tokenizer_source, folder)
            write_config(folder / "config.json")  # as the stage's output is written: both transformers majors read it
            self.post("/update_weights_from_disk", {"model_path": str(folder), "weight_version": str(step)})
        if self.folder is not None and self.folder != folder:
            shutil.rmtree(self.folder, ignore_errors=True)
        self.folder, self.version = folder, step

    def post(self, path: str, body: dict[str, Any]) -> Any:
        """POST `body` as JSON; the reply's JSON, or PolicyError with the server's message."""
        request = urllib.request.Request(self.url + path, data=json.dumps(body).encode("utf-8"), method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as response:
                return json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")
            raise PolicyError(f"{self.url}{path} answered {exc.code}: {detail}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise PolicyError(f"cannot reach the rollout server {self.url}{path}: {exc}") from None


def check_health(url: str, *, wait_s: float = 0.0, wait_for_start: bool = False, poll_s: float = 2.0) -> None:
    """PolicyError unless GET {url}/health answers 200, before the run's long work. Within `wait_s` seconds
    (policy.ready_timeout_s) a server that is loading is waited for: SGLang's 503, and, with `wait_for_start` (the
    rl pod's sidecar being started beside this process: policy.wait_for_start), a refused connection."""
    deadline = time.monotonic() + wait_s
    waited = f" after {wait_s:g} s (policy.ready_timeout_s)" if wait_s > 0 else ""
    while True:
        status: int | None = None
        try:
            with urllib.request.urlopen(url.rstrip("/") + "/health", timeout=30) as response:
                status = response.status
        except urllib.error.HTTPError as exc:
            status = exc.code
        except (urllib.error.URLError, OSError) as exc:
            if not wait_for_start or time.monotonic() >= deadline:
                raise PolicyError(f"rl.server_url {url} cannot be reached{waited}: {exc}") from None
        if status == 200:
            return
        if status is not None and time.monotonic() >= deadline:
            raise PolicyError(f"rl.server_url {url} is not ready{waited}: GET /health answered {status}")
        time.sleep(max(0.0, min(poll_s, deadline - time.monotonic())))


def temperature_problem(temperature: float) -> str:
    return (f"rl.rollout_engine = 'served' needs rl.temperature = 1.0, got {temperature:g}: the server reports "
            "log-probs before the temperature (burnqed serve, and the SGLang sidecar with "
            "SGLANG_RETURN_ORIGINAL_LOGPROB=1), the trainer's are after it, so their mismatch could not be corrected")


def sample_seed(seed: int, step: int, row: int) -> int:
    """The sampling seed of a step's row: the same run, step and row sample the same completion (a resumed run's
    step draws what the uninterrupted run drew), in SGLang's range."""
    return ((seed * 1_000_003 + step) * 65_536 + row) % (2**63)


def trainer_logprobs(model: Any, prompt_ids: Sequence[Sequence[int]],
                     completion_ids: Sequence[Sequence[int]]) -> list[list[float]]:
    """The trainer's log-prob of each completion token after its prompt (eval mode: no dropout; temperature 1), one
    sequence at a time (no padding: the numbers a forward over that sequence alone gives)."""
    import torch

    device = next(model.parameters()).device
    training = model.training
    model.eval()
    rows: list[list[float]] = []
    try:
        with torch.no_grad():
            for prompt, completion in zip(prompt_ids, completion_ids, strict=True):
                ids = torch.tensor([list(prompt) + list(completion)], dtype=torch.long, device=device)
                logits = model(input_ids=ids).logits[0, len(prompt) - 1:len(prompt) + len(completion) - 1].float()
                picked = torch.log_softmax(logits, dim=-1).gather(1, ids[0, len(prompt):, None]).squeeze(1)
                rows.append(picked.tolist())
    finally:
        model.train(training)
    return rows


@contextmanager
def local_server(folder: Path, *, device: str, seed: int, enable_lora: bool) -> Iterator[ModelServer]:
    """`burnqed serve` on `folder` in a thread of this process, on a free port of 127.0.0.1, once the model is
    loaded (`.url`); stopped at the end. The rollouts still travel over its HTTP API (the sidecar's)."""
    from burnqed.policy.localmodel import LocalModel
    from burnqed.policy.server import ModelServer

    server = ModelServer(lambda: LocalModel.load(folder, device=device, seed=seed), "127.0.0.1", 0,
                         name=str(folder), enable_lora=enable_lora, seed=seed)
    loader = server.start_loading(stop_on_failure=False)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="rl-server",
                              daemon=True)
    thread.start()
    try:
        loader.join()
        if server.load_error is not None:
            raise PolicyError(f"the rollout server cannot load {folder}: {server.load_error}")
        yield server
    finally:
        server.shutdown()
        thread.join()
        server.server_close()


def sweep_stale_weights(folder: Path) -> None:
    """Remove the pushed-version folders (`WEIGHTS_PREFIX*`) in `folder` that runs killed outright left behind: a real
    folder (not a link) of this user's, untouched for `STALE_WEIGHTS_S`. Anything else so named is left as it is, and
    a folder that cannot be read or removed too."""
    moment = time.time()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        if not entry.name.startswith(WEIGHTS_PREFIX):
            continue
        try:  # one gone meanwhile, or one that cannot be removed, is left
            info = entry.stat(follow_symlinks=False)
            if (stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()
                    and moment - info.st_mtime >= STALE_WEIGHTS_S):
                shutil.rmtree(entry.path)
        except OSError:
            continue


@contextmanager
def served_engine(rl: RlConfig, *, lora: bool, base: Path, sft: Path, device: str, wait_s: float = 0.0,
                  wait_for_start: bool = False) -> Iterator[ServedRollouts]:
    """The served engine of a run: against rl.server_url (its /health waited for as `check_health` says), or
    `local_server` on the adapter's `base` (LoRA, with --enable-lora) or the `sft` output (full weights); the pushed
    versions in a temporary folder removed at the end, readable by every user: the server reads them by path, and
    the rl pod's sidecar runs under another uid than the trainer (cluster.run_as_user; the trainer's container runs
    as root when cluster.lean_uid is set), on the same /tmp. The folders runs killed outright left there go first
    (`sweep_stale_weights`)."""
    with ExitStack() as stack:
        if rl.server_url is not None:
            check_health(rl.server_url, wait_s=wait_s, wait_for_start=wait_for_start)
        url = rl.server_url or stack.enter_context(local_server(base if lora else sft, device=device, seed=rl.seed,
                                                                enable_lora=lora)).url
        sweep_stale_weights(Path(tempfile.gettempdir()))
        weights = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=WEIGHTS_PREFIX)))
        weights.chmod(0o755)  # mkdtemp's 0700 would hide the pushed versions from a server of another uid
        yield ServedRollouts(url, weights, tokenizer_source=sft, rl=rl)


__all__ = ["IS_CLIP_MAX", "STALE_WEIGHTS_S", "WEIGHTS_PREFIX", "ServedRollouts", "ServedStats", "local_server",
           "sample_seed", "served_engine", "sweep_stale_weights", "trainer_logprobs"]
