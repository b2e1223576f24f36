"""The rehearsal of the real workflow (docs/cluster.md, "Rehearsal"): the iteration workflows rendered from
`configs/deepseek-prover-v2-7b.toml` with `OVERRIDES` (the one set of swaps: the model, the data, the Lean server,
what a CPU needs in place of a GPU, and a CPU-sized budget), each step's containers run as the pod would run them.

    config_text = rehearsal_config_text()                    # the real file + OVERRIDES, as TOML
    configmap = configmap_content(config_text)               # what the chart's ConfigMap holds (Helm renders it)
    rehearsal = Rehearsal(venvs, work, endpoint, configmap)   # venvs: {"core", "train", "sglang"} (image_venv.py)
    runs = rehearsal.run(rehearsal.workflow(iteration=0))     # every DAG task in dependency order

A pod here: its init containers, then its sidecars (started from their rendered command: images/sglang/entrypoint.sh
with `python3 -m sglang.launch_server` answered by `burnqed serve` on the model folder, and the encoder from the
serving venv), then its main container, each `command + args` in the venv of its image, with the container's
rendered `env`, the Secret its `envFrom` names (moto's credentials and endpoint), and its volumes as folders: the
config volume holds the ConfigMap's `burnqed.toml`, emptyDirs are per pod (shared by its containers). A path under
a mountPath in an argument or variable is moved to that folder, and the pod's loopback ports (the sidecar's PORT
and EMBED_PORT) to free ones. A main or init container that exits non-zero raises `StepFailed` naming the task,
the container, the image and the module that failed to import. Each main and init container's process (not its
children) records the top-level modules it imported and the packages its command checked at its start
(`Rehearsal.imports`, from the venv's sitecustomize: tests/cluster/image_venv.py).

What differs from a pod, and why: the containers run as this user (no runAsUser, no SETUID: `lean.run_as_uid`,
pinned by render as BURNQED_LEAN__RUN_AS_UID, is left out, tests/cluster/test_lean_credentials.py checks it as
root), on CPU, one task at a time (the DAG's fan-out runs in sequence), without Argo's retries, resources,
deadlines or node placement, and `burnqed serve` stands in for SGLang (no --mem-fraction-static; for the served rl
step's LoRA it merges the pushed adapters with peft, which SGLang's own loader does not need: that rehearsal's serving
venv adds peft).
"""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import socket
import subprocess
import time
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from burnqed.cluster.render import render_workflow
from burnqed.cluster.source import load_text
from burnqed.config import Config
from burnqed.config.lean import LeanConfig
from tests.cluster.image_venv import IMPORTS_ENV, ROOT, SERVING, ImageVenv, venv_env

REAL_CONFIG = ROOT / "configs" / "deepseek-prover-v2-7b.toml"
WORKFLOWS = ROOT / "burnqed" / "workflows"
CHART = ROOT / "helm" / "burnqed"
ENTRYPOINT = ROOT / "images" / "sglang" / "entrypoint.sh"
BUCKET = "my-bucket"  # the real configuration's bucket (storage.root, pipeline.benchmark), on moto
MODEL_URI = f"s3://{BUCKET}/models/tiny"

# The one set of swaps from the real configuration. Everything else is the real file's.
OVERRIDES: dict[str, dict[str, dict[str, Any]]] = {
    # the model: the tiny embedded model (in S3, published as a finished output) for DeepSeek-Prover-V2-7B
    "model": {
        "sft": {"base_model": MODEL_URI},
        "policy": {"prompt_format": "plain-tactic"},  # the format the tiny model was trained on
    },
    # the data: the embedded sources for the hub datasets (pipeline.benchmark keeps its URI: the embedded test
    # theorems are uploaded there)
    "data": {
        "data": {"sources": [{"kind": "bundled", "limit": 8}, {"kind": "world", "limit": 8}]},
    },
    # the Lean server: the embedded default (minilean, which the embedded data's checked world is written for, with
    # the replay server behind it) for Pantograph + Mathlib (lean.cwd: the image's Mathlib project)
    "lean": {
        "lean": {"command": list(LeanConfig().command), "cwd": None},
    },
    # a CPU for the GPU: QLoRA's 4-bit base needs bitsandbytes' CUDA kernels, bf16 and "cuda" a GPU; the value
    # model on CPU (render would pin "cuda" in train-ebm's GPU container)
    "cpu": {
        "sft": {"method": "lora", "device": "auto", "bf16": False, "gradient_checkpointing": False},
        "ebm": {"device": "cpu"},
    },
    # a budget of minutes on 2 cores instead of hours on GPUs
    "budget": {
        "sft": {"max_steps": 12, "warm_steps": 6, "warmup_steps": 2, "eval_steps": 6, "save_steps": 6,
                "logging_steps": 3, "batch_size": 4, "grad_accum": 1, "max_length": 256, "base_subsample": 200},
        "ebm": {"steps": 20, "batch_size": 16, "cache_chunk": 256},
        "search": {"max_nodes": 6, "timeout_s": 60, "max_proofs": 2, "num_proofs": 2, "min_proofs": 1,
                   "proof_max_tokens": 48, "proof_min_tokens": 24, "max_rounds": 2},
        "lean": {"workers": 2},
        "pipeline": {"search_shards": 1, "eval_budgets": [4], "eval_proof_budgets": [2]},
    },
}


# The rl step (rl.enabled, off in the real file): rehearsed on its own in iteration 0, a few steps of small groups.
RL: dict[str, dict[str, Any]] = {
    "rl": {"enabled": True, "max_steps": 2, "save_steps": 2, "prompts_per_step": 2, "num_generations": 2,
           "max_completion_tokens": 24},
}


def _merge(base: dict[str, Any], changes: Mapping[str, Any]) -> None:
    for key, value in changes.items():
        if value is None:
            base.pop(key, None)
        elif isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML for {value!r}")


def rehearsal_config_text(also: Mapping[str, Any] | None = None) -> str:
    """The real configuration file with `OVERRIDES` (and `also`, e.g. `RL`) applied, as TOML (what the rehearsal
    installs as the chart's config.toml)."""
    data = tomllib.loads(REAL_CONFIG.read_text(encoding="utf-8"))
    for group in [*OVERRIDES.values(), also or {}]:
        _merge(data, group)
    lines = [f"# {REAL_CONFIG.name} with the rehearsal's overrides (tests/cluster/rehearsal.py)"]
    for section, keys in data.items():
        lines += ["", f"[{section}]", *(f"{key} = {_toml_value(value)}" for key, value in keys.items())]
    text = "\n".join(lines) + "\n"
    if tomllib.loads(text) != data:
        raise AssertionError("the rehearsal's TOML does not read back as written")
    return text


def configmap_content(config_text: str) -> tuple[str, str]:
    """(the ConfigMap's name, its burnqed.toml) as the chart renders them for `--set-file config.toml=FILE`."""
    import helm_python as helm

    from burnqed.cluster.yamlio import load_documents

    with helm.Chart.load(CHART) as chart:
        out = chart.render({"config": {"toml": config_text}}, name="burnqed", namespace="burnqed", is_install=True)
    for path, text in out.items():
        if not path.endswith((".yaml", ".yml")):
            continue
        for doc in load_documents(text, path):
            if isinstance(doc, dict) and doc.get("kind") == "ConfigMap" and "burnqed.toml" in doc.get("data", {}):
                return str(doc["metadata"]["name"]), str(doc["data"]["burnqed.toml"])
    raise AssertionError("the chart renders no ConfigMap with burnqed.toml")


class StepFailed(AssertionError):
    """A container of a rehearsed step exited non-zero."""


@dataclass(frozen=True, slots=True)
class StepRun:
    task: str
    item: str | None
    image: str
    seconds: float      # wall-clock, the pod's containers together
    cpu_seconds: float  # user + system of every process the pod ran


@dataclass(frozen=True, slots=True)
class Imported:
    """What a container's process (not its children) imported, and what its command checked it could import
    (burnqed.cluster.needs), as tests/cluster/image_venv.py's sitecustomize recorded them at its exit."""

    where: str
    image: str
    argv: tuple[str, ...]
    modules: frozenset[str]  # top-level module names
    checked: frozenset[str]  # distributions


MISSING_MODULE = re.compile(r"No module named '([\w.]+)'|the (\w[\w-]*) package \(burnqed\[\w+\]\) is not installed"
                            r"|needs the (\w[\w-]*) package, which is not installed")


def _failure(where: str, image: str, status: int, log: str) -> StepFailed:
    found = MISSING_MODULE.search(log)
    lines = [line for line in log.splitlines() if line.strip()]
    if found:
        module = found.group(1) or found.group(2) or found.group(3)
        return StepFailed(f"rehearsal: {where} failed in the {image} image: cannot import {module!r} "
                          f"(exit {status}): {lines[-1] if lines else ''}")
    tail = "\n".join(lines[-15:])
    return StepFailed(f"rehearsal: {where} failed in the {image} image (exit {status}):\n{tail}")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _depends(task: Mapping[str, Any]) -> set[str]:
    expression = str(task.get("depends") or "")
    names = re.findall(r"[A-Za-z0-9][A-Za-z0-9-]*(?:\.[A-Za-z]+)?", expression)
    return {name.split(".")[0] for name in names}


def dag_order(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tasks in an order where each comes after everything its `depends` names (Kahn, stable)."""
    by_name = {task["name"]: task for task in tasks}
    done: list[str] = []
    while len(done) < len(tasks):
        ready = [name for name, task in by_name.items() if name not in done and _depends(task) <= set(done)]
        if not ready:
            left = sorted(set(by_name) - set(done))
            raise AssertionError(f"the DAG has a cycle or an unknown dependency among {left}")
        done.append(ready[0])
    return [by_name[name] for name in done]


def _substitute(text: str, values: Mapping[str, str], where: str) -> str:
    def value(match: re.Match[str]) -> str:
        key = match.group(1).strip()
        if key not in values:
            raise AssertionError(f"{where}: {{{{{key}}}}} has no value in the rehearsal")
        return values[key]

    return re.sub(r"\{\{([^}]+)\}\}", value, text)


@dataclass
class Rehearsal:
    venvs: Mapping[str, ImageVenv]   # core, train, sglang (and rl for the rl step)
    work: Path
    endpoint: str                    # moto's S3
    configmap: tuple[str, str]       # (name, burnqed.toml)
    runs: list[StepRun] = field(default_factory=list)
    sidecars: list[tuple[str, subprocess.Popen[bytes], Path]] = field(default_factory=list)  # the running pod's
    commands: list[tuple[str, str, tuple[str, ...]]] = field(default_factory=list)  # (where, image, argv): exit 0
    imports: list[Imported] = field(default_factory=list)  # what each of those commands imported and checked

    def config(self) -> Config:
        """The configuration the pods read (the ConfigMap's content)."""
        return load_text(self.configmap[1], "the rehearsal's ConfigMap")

    def workflow(self, iteration: int) -> dict[str, Any]:
        """The Workflow `burnqed submit iteration --iter N` creates from the ConfigMap's configuration."""
        return render_workflow(self.config(), "iteration", WORKFLOWS, iteration=iteration, parameters={})

    def run(self, workflow: Mapping[str, Any], only: Iterable[str] = ()) -> list[StepRun]:
        """Run the workflow's DAG (or only the tasks named, with their fan-out) in dependency order."""
        spec = workflow["spec"]
        templates = {t["name"]: t for t in spec["templates"]}
        params = {f"workflow.parameters.{p['name']}": str(p["value"]) for p in spec["arguments"]["parameters"]}
        chosen = set(only)
        meta = workflow["metadata"]
        pods = self.work / "pods" / str(meta.get("name") or meta["generateName"]).rstrip("-")
        runs = []
        for task in dag_order(templates[spec["entrypoint"]]["dag"]["tasks"]):
            if chosen and task["name"] not in chosen:
                continue
            sequence = task.get("withSequence")
            items = [str(i) for i in range(int(sequence["count"]))] if sequence else [None]
            for item in items:
                inputs = {}
                for argument in (task.get("arguments") or {}).get("parameters") or []:
                    inputs[f"inputs.parameters.{argument['name']}"] = _substitute(
                        str(argument["value"]), {"item": item or ""}, task["name"])
                runs.append(self._pod(pods, task["name"], item, templates[task["template"]], {**params, **inputs}))
        self.runs += runs
        return runs

    # one pod -------------------------------------------------------------------------------------------------

    def _pod(self, pods: Path, task: str, item: str | None, template: Mapping[str, Any],
             values: Mapping[str, str]) -> StepRun:
        where = f"step {task}" + (f" (item {item})" if item is not None else "")
        name = f"{task}-{item}" if item is not None else task
        pod, n = pods / name, 1
        while pod.exists():  # a task run again (a retry) gets fresh volumes, as a new pod would
            pod, n = pods / f"{name}.{n}", n + 1
        volumes: dict[str, Path] = {}
        for volume in template.get("volumes") or []:
            folder = pod / "volumes" / volume["name"]
            folder.mkdir(parents=True, exist_ok=True)
            volumes[volume["name"]] = folder
            if "configMap" in volume:
                name, toml = self.configmap
                if volume["configMap"]["name"] != name:
                    raise AssertionError(f"{where} mounts the ConfigMap {volume['configMap']['name']}, the chart "
                                         f"installs {name}")
                (folder / "burnqed.toml").write_text(toml, encoding="utf-8")
        ports: dict[str, str] = {}
        for sidecar in template.get("sidecars") or []:
            for variable in sidecar.get("env") or []:
                if variable["name"] in ("PORT", "EMBED_PORT"):
                    ports[str(variable["value"])] = str(_free_port())
        main = template["container"]
        started, cpu = time.monotonic(), _children_cpu()
        with ExitStack() as stack:
            for init in template.get("initContainers") or []:
                self._container(f"{where}, init container {init['name']}", init, volumes, values, ports, pod)
            for sidecar in template.get("sidecars") or []:
                stack.enter_context(self._sidecar(f"{where}, sidecar {sidecar['name']}", sidecar, volumes, values,
                                                  ports, pod))
            self._container(where, main, volumes, values, ports, pod)
        return StepRun(task, item, self._image(main), time.monotonic() - started, _children_cpu() - cpu)

    def _image(self, container: Mapping[str, Any]) -> str:
        image = str(container["image"]).rsplit("/", 1)[-1].split(":")[0].removeprefix("burnqed-")
        if image not in self.venvs:
            raise AssertionError(f"no venv for the image {container['image']}")
        return image

    def _environment(self, container: Mapping[str, Any], venv: ImageVenv, volumes: Mapping[str, Path],
                     values: Mapping[str, str], ports: Mapping[str, str], where: str) -> dict[str, str]:
        mounts = self._mounts(container, volumes)
        env: dict[str, str] = {}
        for source in container.get("envFrom") or []:
            secret = (source.get("secretRef") or {}).get("name")
            if secret != self.config().cluster.s3_secret:
                raise AssertionError(f"{where} reads the Secret {secret}, which the rehearsal does not have")
            env.update({"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_ENDPOINT_URL": self.endpoint, "AWS_EC2_METADATA_DISABLED": "true"})
        for variable in container.get("env") or []:
            if "value" not in variable:
                raise AssertionError(f"{where}: variable {variable['name']} is not a plain value")
            if variable["name"] == "BURNQED_LEAN__RUN_AS_UID":
                continue  # see the module docstring
            value = _substitute(str(variable["value"]), values, where)
            if variable["name"] in ("PORT", "EMBED_PORT"):
                value = ports.get(value, value)
            env[variable["name"]] = self._path(value, mounts)
        return venv_env(venv, env)

    @staticmethod
    def _mounts(container: Mapping[str, Any], volumes: Mapping[str, Path]) -> dict[str, Path]:
        return {m["mountPath"]: volumes[m["name"]] for m in container.get("volumeMounts") or []}

    @staticmethod
    def _path(value: str, mounts: Mapping[str, Path]) -> str:
        for mount in sorted(mounts, key=len, reverse=True):
            if value == mount or value.startswith(mount.rstrip("/") + "/"):
                return str(mounts[mount]) + value[len(mount):]
        return value

    def _argv(self, container: Mapping[str, Any], volumes: Mapping[str, Path], values: Mapping[str, str],
              ports: Mapping[str, str], where: str) -> list[str]:
        mounts = self._mounts(container, volumes)
        argv = []
        for word in [*container.get("command", []), *container.get("args", [])]:
            text = _substitute(str(word), values, where)
            for old, new in ports.items():
                text = text.replace(f"127.0.0.1:{old}", f"127.0.0.1:{new}")
            argv.append(self._path(text, mounts))
        return argv

    def _container(self, where: str, container: Mapping[str, Any], volumes: Mapping[str, Path],
                   values: Mapping[str, str], ports: Mapping[str, str], pod: Path) -> None:
        image = self._image(container)
        venv = self.venvs[image]
        env = self._environment(container, venv, volumes, values, ports, where)
        argv = self._argv(container, volumes, values, ports, where)
        log = pod / f"{container.get('name', 'main')}.log"
        record = pod / f"{container.get('name', 'main')}.imports.json"
        with log.open("w") as sink:
            main = subprocess.Popen(argv, env={**env, IMPORTS_ENV: str(record)}, cwd=pod, stdout=sink,
                                    stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 900
        while (status := main.poll()) is None:
            for name, sidecar, sidecar_log in self.sidecars:  # a pod whose sidecar died fails now, not after the
                if sidecar.poll() is not None:               # main container's wait for it times out
                    main.kill()
                    main.wait()
                    raise _failure(f"{where}, its sidecar {name}", SERVING, sidecar.returncode or 0,
                                   sidecar_log.read_text(errors="replace"))
            if time.monotonic() > deadline:
                main.kill()
                main.wait()
                raise StepFailed(f"rehearsal: {where} ran over 900 s")
            with suppress(subprocess.TimeoutExpired):  # back as soon as it exits, not on the next 0.2 s tick
                main.wait(timeout=0.2)
        if status != 0:
            raise _failure(where, image, status, log.read_text(errors="replace"))
        self.commands.append((where, image, tuple(argv)))
        recorded = json.loads(record.read_text(encoding="utf-8"))
        self.imports.append(Imported(where, image, tuple(argv), frozenset(recorded["modules"]),
                                     frozenset(recorded["checked"])))

    @contextmanager
    def _sidecar(self, where: str, container: Mapping[str, Any], volumes: Mapping[str, Path],
                 values: Mapping[str, str], ports: Mapping[str, str], pod: Path) -> Iterator[None]:
        """The sidecar from its rendered command: the sglang image's entrypoint, SGLang answered by `burnqed serve`
        (tests/doubles/sglang_shim.py) and the encoder run from the serving venv (the image's /opt/burnqed)."""
        if container.get("command") != ["burnqed-sglang"]:
            raise AssertionError(f"{where}: the rehearsal knows the sidecar command burnqed-sglang only, not "
                                 f"{container.get('command')}")
        venv = self.venvs[SERVING]
        env = self._environment(container, venv, volumes, values, ports, where)
        shim = Path(__file__).parents[1] / "doubles" / "sglang_shim.py"
        env.update({"SGLANG_PYTHON": str(shim), "ENCODER_COMMAND": str(venv.bin / "burnqed"),
                    "PROBE_PYTHON": str(venv.python), "POLL_S": "0.5"})
        argv = [str(ENTRYPOINT), *self._argv({**container, "command": []}, volumes, values, ports, where)]
        log = pod / f"{container['name']}.log"
        with log.open("w") as sink:
            proc = subprocess.Popen(argv, env=env, cwd=pod, stdout=sink, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        self.sidecars.append((container["name"], proc, log))
        try:
            yield
        finally:
            self.sidecars.remove((container["name"], proc, log))
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=30)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:  # the servers it started are in its session: none may outlive it
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    break
                time.sleep(0.1)
