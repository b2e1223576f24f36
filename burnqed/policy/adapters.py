"""The weights `burnqed serve` answers with, as SGLang keeps them: the weight version and the LoRA adapters loaded by
name, each the base model with the adapter merged into a copy of its weights (`merged_adapter`).

    weights = Weights(enable_lora=True, seed=0)
    weights.load_adapter(base, LoadLora("sft", "/runs/iter_1/adapter"))   # (True, "") or (False, SGLang's message)
    weights.model_for(base, "sft")                                         # the merged model a /generate runs on
"""

from __future__ import annotations

import threading
from pathlib import Path

from burnqed.policy.localmodel import LocalModel
from burnqed.policy.wire import LoadLora, RequestError


class Weights:
    """What /update_weights_from_disk and the LoRA endpoints change, as SGLang keeps it: the weight version (reported
    in every reply's meta_info), the adapters loaded by name (each the base model with the adapter merged into a copy of
    its weights), and every adapter ever loaded (SGLang's `lora_ref_cache`: a request naming an adapter unloaded since
    loads it again from its path; one never loaded is an error). Calls are serialised by one lock."""

    def __init__(self, enable_lora: bool, seed: int | None) -> None:
        self.enable_lora = enable_lora
        self.seed = seed
        self.version = "default"
        self.adapters: dict[str, tuple[str, LocalModel]] = {}  # name → (path, the merged model), in load order
        self.ever: dict[str, str] = {}  # name → path of every adapter loaded at any point
        self.lock = threading.Lock()

    def load_adapter(self, base: LocalModel, request: LoadLora) -> tuple[bool, str]:
        """(success, error message) of SGLang's load: refused when LoRA is off or the name is taken."""
        if not self.enable_lora:
            return False, "LoRA is not enabled. Please set `--enable-lora` to enable LoRA."
        with self.lock:
            if request.name in self.adapters:
                return False, f"Failed to load LoRA adapter {request.name} because it is already loaded"
            try:
                merged = merged_adapter(base, request.path, self.seed)
            except Exception as exc:  # a folder that is not an adapter of this base, in whatever form
                return False, f"Failed to load LoRA adapter {request.name}: {type(exc).__name__}: {exc}"
            self.adapters[request.name] = (request.path, merged)
            self.ever[request.name] = request.path
        return True, ""

    def unload_adapter(self, name: str) -> tuple[bool, str]:
        if not self.enable_lora:
            return False, "LoRA is not enabled. Please set `--enable-lora` to enable LoRA."
        with self.lock:
            if name not in self.adapters:
                keys = ", ".join(repr(k) for k in self.adapters)
                return False, f"LoRA with name {name} does not exist. Loaded LoRAs: odict_keys([{keys}])"
            _, model = self.adapters.pop(name)
        model.close()
        return True, ""

    def loaded(self) -> dict[str, str]:
        return {name: path for name, (path, _) in self.adapters.items()}

    def model_for(self, base: LocalModel, name: str | None) -> LocalModel:
        """The model a /generate naming `name` runs on (None: the base); `RequestError` as SGLang words it for an
        adapter never loaded, or any adapter while LoRA is off."""
        if name is None:
            return base
        if not self.enable_lora:
            raise RequestError(f"LoRA adapter '{name}' was requested, but LoRA is not enabled. Please launch the "
                               "server with --enable-lora flag and preload adapters using --lora-paths or "
                               "/load_lora_adapter endpoint.")
        with self.lock:
            found = self.adapters.get(name)
        if found is not None:
            return found[1]
        if name not in self.ever:
            keys = ", ".join(repr(k) for k in self.ever)
            raise RequestError(f"Got LoRA adapter that has never been loaded: {name}\n"
                               f"All loaded adapters: dict_keys([{keys}]).")
        ok, message = self.load_adapter(base, LoadLora(name, self.ever[name]))  # SGLang reloads an unloaded one
        if not ok and "already loaded" not in message:
            raise RequestError(f"Failed to implicitly load LoRA adapter {name}: {message}")
        with self.lock:
            return self.adapters[name][1]

    def close(self) -> None:
        with self.lock:
            models = [model for _, model in self.adapters.values()]
            self.adapters.clear()
        for model in models:
            model.close()


def merged_adapter(base: LocalModel, path: str, seed: int | None) -> LocalModel:
    """The base model with the PEFT adapter in `path` merged into a copy of its weights (transformers' model read from
    the base's folder, in the base's dtype and device), sharing the base's tokenizer."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    folder = Path(path)
    if not (folder / "adapter_config.json").is_file():
        raise FileNotFoundError(f"{path} holds no adapter_config.json")
    dtype = getattr(base.model, "dtype", "auto")  # a transformers model's or a `TorchLlama`'s
    model = AutoModelForCausalLM.from_pretrained(base.path, dtype=dtype).to(base.device)
    merged = PeftModel.from_pretrained(model, str(folder)).merge_and_unload()
    merged.eval()
    return LocalModel(merged, base.tokenizer, folder, seed)
