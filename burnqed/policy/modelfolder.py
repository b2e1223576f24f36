"""The model folder that training and serving read the same way, whatever transformers major each one runs
(docs/training.md, "One model folder").

    write_tokenizer(base_dir, folder)        # the base model's tokenizer, written so that 4.57 and 5.x read it alike
    write_config(folder / "config.json")     # RoPE settings in both spellings, the dtype under both names
    rewrite_folder(folder)                   # both, in place (`burnqed fetch --model-folder`)
    tokenizer = load_tokenizer(folder)       # THE reading of a tokenizer (a base model: via write_tokenizer)
    ids = encode_texts(tokenizer, texts)     # THE tokenization of prompts and embedded texts
    probe = tokenizer_probe(tokenizer)       # ids of PROBE_TEXT: recorded by SFT, export and the encoder identity

    python -m burnqed.policy.modelfolder describe FOLDER...     # JSON: what this transformers reads from each
    python -m burnqed.policy.modelfolder check FOLDER REFERENCE # exit 1 when it reads something else than REFERENCE
    python -m burnqed.policy.modelfolder pins constraints.txt   # exit 1 unless transformers/tokenizers are pinned
    python -m burnqed.policy.modelfolder write BASE OUT         # a copy of BASE, its tokenizer and config rewritten

Only the standard library at import; tokenizers and transformers are imported inside functions, and nothing here
imports torch, so it runs with the `modelfolder` extra alone (tests/cluster/test_image_imports.py).
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from burnqed.errors import ModelError
from burnqed.policy.tokenizers_only import (
    DROPPED_TOKENIZER_KEYS,
    TOKENIZER_CLASS,
    TokenizersOnlyTokenizer,
    written_by_burnqed,
)
from burnqed.text.prompt import PromptFormat, build_prompt

# A real prompt (the plain-tactic format) with Lean symbols: its ids show the BOS rule and the byte-level merges.
PROBE_STATE = "x : ℕ\nh₀ : 0 < x\n⊢ x + 0 = x"


PROBE_TEXT = build_prompt(PromptFormat.PLAIN_TACTIC, PROBE_STATE)


# Tokenizer classes whose transformers 4.x implementation rebuilds the post-processor from add_bos_token (default
# on) and add_eos_token (default off), whatever tokenizer.json says.
FLAG_CLASSES = frozenset({"LlamaTokenizer", "LlamaTokenizerFast", "CodeLlamaTokenizer", "CodeLlamaTokenizerFast",
                          "GemmaTokenizer", "GemmaTokenizerFast"})


EXTRA_TOKENIZER_FILES = ("special_tokens_map.json", "chat_template.jinja", "chat_template.json")


# SGLang's `get_context_length` (0.5.6 `hf_transformers_utils.py`, 0.5.23 `hf_transformers/common.py`, the same
# rule): the first of these config keys that is set, times the rope scaling factor (unless the scaling names the
# original length or is llama3's); 2048 when none is set.
CONTEXT_LENGTH_KEYS = ("max_sequence_length", "seq_length", "max_seq_len", "model_max_length",
                       "max_position_embeddings")


DEFAULT_CONTEXT_LENGTH = 2048


# Config fields SGLang's Llama reads (`models/llama.py`), with the default it uses when a field is absent.
SGLANG_FIELDS: dict[str, Any] = {
    "architectures": None, "model_type": None, "hidden_size": None, "intermediate_size": None,
    "num_hidden_layers": None, "num_attention_heads": None, "num_key_value_heads": None, "head_dim": None,
    "partial_rotary_factor": 1, "rope_is_neox_style": True, "max_position_embeddings": 8192,
    "original_max_position_embeddings": None, "attention_bias": False, "bias": False, "hidden_act": None,
    "rms_norm_eps": None, "vocab_size": None, "pad_token_id": None, "bos_token_id": None, "eos_token_id": None,
    "tie_word_embeddings": None,
}


# ----------------------------------------------------------------------------------------- tokenizer


def _token_text(value: Any) -> str | None:
    """A special token as tokenizer_config.json writes it: a string, or an AddedToken dict with `content`."""
    if isinstance(value, dict):
        content = value.get("content")
        return str(content) if content is not None else None
    return str(value) if value is not None else None


def declared_rule(tokenizer_config: dict[str, Any], tokenizer_json: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The special tokens the folder means to put before and after one text: from Llama's flags when its class
    has them (FLAG_CLASSES, 4.x's reading), else what `tokenizer.json`'s post-processor adds."""
    if tokenizer_config.get("tokenizer_class") in FLAG_CLASSES:
        bos, eos = _token_text(tokenizer_config.get("bos_token")), _token_text(tokenizer_config.get("eos_token"))
        before = (bos,) if tokenizer_config.get("add_bos_token", True) and bos is not None else ()
        after = (eos,) if tokenizer_config.get("add_eos_token", False) and eos is not None else ()
        return before, after
    return post_processor_rule(tokenizer_json)


def post_processor_rule(tokenizer_json: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The tokens `tokenizer.json`'s post-processor puts before and after one text."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(tokenizer_json)
    plain = tokenizer.encode(PROBE_TEXT, add_special_tokens=False).tokens
    full = tokenizer.encode(PROBE_TEXT, add_special_tokens=True).tokens
    for start in range(len(full) - len(plain) + 1):
        if full[start:start + len(plain)] == plain:
            return tuple(full[:start]), tuple(full[start + len(plain):])
    raise ModelError("the tokenizer's post-processor changes the text's own tokens; burnqed cannot state its "
                     "special-token rule")


def _template(before: tuple[str, ...], after: tuple[str, ...], ids: dict[str, int]) -> Any:
    from tokenizers import processors

    single = [*before, "$A:0", *after]
    pair = [*single, *(f"{t}:1" for t in before), "$B:1", *(f"{t}:1" for t in after)]
    special = [(token, ids[token]) for token in dict.fromkeys((*before, *after))]
    return processors.TemplateProcessing(single=" ".join(single), pair=" ".join(pair), special_tokens=special)


def write_tokenizer(source: Path, target: Path) -> None:
    """Write `source`'s tokenizer into `target` so that transformers 4.57 and 5.x read the same tokenizer
    (docs/training.md, "One model folder"). ModelError when `source` has no `tokenizer.json` (a slow-only tokenizer:
    convert it first)."""
    raw_json = source / "tokenizer.json"
    if not raw_json.is_file():
        raise ModelError(f"{source} has no tokenizer.json: burnqed needs a fast tokenizer; save the base model's "
                         "tokenizer with transformers (it writes tokenizer.json) and point sft.base_model there")
    config_path = source / "tokenizer_config.json"
    config: dict[str, Any] = (json.loads(config_path.read_text(encoding="utf-8"))
                              if config_path.is_file() else {})
    text = raw_json.read_text(encoding="utf-8")
    before, after = declared_rule(config, text)
    target.mkdir(parents=True, exist_ok=True)
    if post_processor_rule(text) == (before, after):
        if raw_json.resolve() != (target / "tokenizer.json").resolve():
            shutil.copyfile(raw_json, target / "tokenizer.json")
    else:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_str(text)
        found = {token: tokenizer.token_to_id(token) for token in (*before, *after)}
        ids = {token: token_id for token, token_id in found.items() if token_id is not None}
        if len(ids) < len(found):
            raise ModelError(f"the tokenizer in {source} declares special tokens {sorted(set(found) - set(ids))} "
                             "its vocabulary lacks")
        tokenizer.post_processor = _template(before, after, ids)
        tokenizer.save(str(target / "tokenizer.json"))
    for key in DROPPED_TOKENIZER_KEYS:
        config.pop(key, None)
    config["tokenizer_class"] = TOKENIZER_CLASS
    (target / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n",
                                                  encoding="utf-8")
    for name in EXTRA_TOKENIZER_FILES:
        if (source / name).is_file() and (source / name).resolve() != (target / name).resolve():
            shutil.copyfile(source / name, target / name)


def load_tokenizer(folder: Path, *, avoid_transformers: bool = False) -> Any:
    """THE tokenizer of a model folder, as every burnqed reader loads it (SFT, export, the encoder, `burnqed
    serve`, the local policy): a folder burnqed wrote as it is; any other (a base model as downloaded) through a
    copy of its tokenizer files written by `write_tokenizer`, so it is read with the special-token rule it
    declares and the pre-tokenizer its tokenizer.json states. Measured under transformers 5.19 on a DeepSeek-shaped
    folder (Llama's class and `add_bos_token`): loaded as it is, the Llama class rebuilds the pre-tokenizer, which
    drops the spaces, and adds no BOS; SGLang serves the folder the sidecar's `burnqed fetch --model-folder`
    writes the same way. ModelError when the tokenizer cannot be written (see `write_tokenizer`).

    `avoid_transformers=True` (the local policy's CPU reading, beside `burnqed.policy.decoder.load_torch_llama`) reads a
    folder that `tokenizers_only_refusal` accepts with `tokenizers` alone (`TokenizersOnlyTokenizer`: what transformers'
    PreTrainedTokenizerFast computes from it, without importing transformers, ~0.45 CPU-s of a process' start); every
    other folder as above."""
    if avoid_transformers and (alone := TokenizersOnlyTokenizer.from_folder(folder)) is not None:
        return alone
    # The class both folders declare (TOKENIZER_CLASS), imported by name: what AutoTokenizer resolves it to, without
    # the import of transformers' auto-model machinery that AutoTokenizer pulls in (~1.3 s of a CPU process' start).
    from transformers import PreTrainedTokenizerFast

    if written_by_burnqed(folder):
        return PreTrainedTokenizerFast.from_pretrained(folder)
    with tempfile.TemporaryDirectory(prefix="burnqed-tokenizer-") as scratch:
        write_tokenizer(folder, Path(scratch))
        return PreTrainedTokenizerFast.from_pretrained(scratch)


def folder_probe(folder: Path) -> list[int]:
    """The tokenizer probe of `folder` as burnqed reads it (`tokenizer_probe(load_tokenizer(folder))`), computed
    with `tokenizers` alone (no transformers: the core image's search and eval steps, which compare it with what
    the SGLang sidecar serves for a base model that has no record). ModelError as `write_tokenizer`."""
    from tokenizers import Tokenizer

    if written_by_burnqed(folder):
        return list(Tokenizer.from_file(str(folder / "tokenizer.json")).encode(PROBE_TEXT).ids)
    with tempfile.TemporaryDirectory(prefix="burnqed-tokenizer-") as scratch:
        write_tokenizer(folder, Path(scratch))
        return list(Tokenizer.from_file(str(Path(scratch) / "tokenizer.json")).encode(PROBE_TEXT).ids)


def encode_texts(tokenizer: Any, texts: list[str], max_tokens: int | None = None) -> list[list[int]]:
    """THE tokenization of a prompt or an embedded text, everywhere (SFT, export, train-ebm, the encoder, the
    local policy): the folder's special tokens added (`add_special_tokens=True`, stated: the rule is the one
    `write_tokenizer` put in tokenizer.json), cut to `max_tokens` when given."""
    if not texts:
        return []
    kwargs: dict[str, Any] = {"truncation": True, "max_length": max_tokens} if max_tokens is not None else {}
    ids: list[list[int]] = tokenizer(texts, add_special_tokens=True, **kwargs)["input_ids"]
    return ids


def tokenizer_probe(tokenizer: Any) -> list[int]:
    """The ids of PROBE_TEXT under `encode_texts`: equal probes, equal tokenization (BOS included)."""
    return encode_texts(tokenizer, [PROBE_TEXT])[0]


def probe_mismatch(what: str, expected: list[int] | None, actual: list[int], expected_from: str,
                   actual_from: str) -> str | None:
    """The refusal message when two tokenizer probes differ (None when they agree or none was recorded)."""
    if expected is None or list(expected) == list(actual):
        return None
    return (f"{what}: the tokenizer reads the probe prompt differently ({expected_from}: {list(expected)}; "
            f"{actual_from}: {list(actual)}); the model folder must be read by one tokenization everywhere "
            "(re-export it with this burnqed, and keep the serving image's transformers)")


# -------------------------------------------------------------------------------------------- config


def write_config(path: Path, dtype: str | None = None) -> None:
    """Rewrite the config.json at `path` so both majors read the same RoPE settings and dtype: `rope_theta` and
    `rope_scaling` (None for default RoPE) from 5.x's `rope_parameters`, `torch_dtype` and `dtype` both set
    (to `dtype` when given)."""
    config: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    params = config.get("rope_parameters")
    if isinstance(params, dict):
        if "rope_theta" in params:
            config["rope_theta"] = params["rope_theta"]
        scaling = {key: value for key, value in params.items() if key != "rope_theta"}
        config["rope_scaling"] = None if _plain_rope(scaling) is None else scaling
    saved = dtype or config.get("dtype") or config.get("torch_dtype")
    if saved is not None:
        config["dtype"] = config["torch_dtype"] = saved
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _plain_rope(scaling: Any) -> dict[str, Any] | None:
    """RoPE scaling in one spelling: `type` folded into `rope_type`, theta dropped; None for default RoPE."""
    if not isinstance(scaling, dict):
        return None
    plain = {key: value for key, value in scaling.items() if key not in ("rope_theta", "type")}
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind == "default" and not {k for k in plain if k != "rope_type"}:
        return None
    plain["rope_type"] = kind
    return plain


def context_length(config: Any) -> int:
    """The context length SGLang derives from a transformers model config (see CONTEXT_LENGTH_KEYS)."""
    scaling = getattr(config, "rope_scaling", None) or {}
    factor = scaling.get("factor", 1) if isinstance(scaling, dict) else 1
    if isinstance(scaling, dict) and ("original_max_position_embeddings" in scaling
                                      or scaling.get("rope_type") == "llama3"):
        factor = 1
    for key in CONTEXT_LENGTH_KEYS:
        value = getattr(config, key, None)
        if value is not None:
            return int(factor * value)
    return DEFAULT_CONTEXT_LENGTH


def serving_rope(config: Any) -> tuple[float, dict[str, Any] | None]:
    """(theta, scaling) as SGLang's Llama resolves them on this transformers: 0.5.23 (transformers 5) prefers
    `rope_parameters`, 0.5.6 (transformers 4) reads `rope_theta` and `rope_scaling`, both defaulting to 10000."""
    params = getattr(config, "rope_parameters", None)
    if isinstance(params, dict) and _major() >= 5:
        return float(params.get("rope_theta", 10000)), _plain_rope(params)
    return float(getattr(config, "rope_theta", None) or 10000), _plain_rope(getattr(config, "rope_scaling", None))


def _major() -> int:
    import transformers

    return int(transformers.__version__.split(".")[0])


# ------------------------------------------------------------------------------------------ describe


def describe(folder: Path, *, tokenizer: bool = True) -> dict[str, Any]:
    """What this process's transformers reads from `folder` (docs/training.md, "One model
    folder"); `tokenizer=False` for a folder
    with a config only. ModelError when it cannot load them."""
    import transformers
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(folder)
    except Exception as exc:  # transformers raises OSError, ValueError, KeyError... for unreadable configs
        raise ModelError(f"transformers {transformers.__version__} cannot read {folder}/config.json: "
                         f"{type(exc).__name__}: {exc}") from None
    fields = {name: getattr(config, name, default) for name, default in SGLANG_FIELDS.items()}
    if fields["head_dim"] is None and fields["hidden_size"] and fields["num_attention_heads"]:
        fields["head_dim"] = fields["hidden_size"] // fields["num_attention_heads"]
    dtype = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None)
    theta, scaling = serving_rope(config)
    result: dict[str, Any] = {
        "transformers": transformers.__version__,
        "config": {**fields, "dtype": str(dtype).removeprefix("torch.") if dtype is not None else None},
        "rope_theta": theta, "rope_scaling": scaling, "context_length": context_length(config),
    }
    if tokenizer:
        from transformers import AutoTokenizer

        try:
            loaded = AutoTokenizer.from_pretrained(folder)
        except Exception as exc:  # an unknown tokenizer class is a ValueError, a broken file anything
            raise ModelError(f"transformers {transformers.__version__} cannot load the tokenizer in {folder}: "
                             f"{type(exc).__name__}: {exc}") from None
        result["tokenizer"] = {
            "probe": tokenizer_probe(loaded), "bos_token_id": loaded.bos_token_id,
            "eos_token_id": loaded.eos_token_id, "pad_token_id": loaded.pad_token_id, "vocab": len(loaded),
            "decoded": loaded.decode(tokenizer_probe(loaded), skip_special_tokens=True),
        }
    return result


def differences(reference: dict[str, Any], other: dict[str, Any], prefix: str = "") -> list[str]:
    """Every field two descriptions read differently (the transformers versions themselves excepted)."""
    found: list[str] = []
    for key in sorted(set(reference) | set(other)):
        if not prefix and key == "transformers":
            continue
        mine, theirs = reference.get(key), other.get(key)
        if isinstance(mine, dict) and isinstance(theirs, dict) and key != "rope_scaling":
            found += differences(mine, theirs, f"{prefix}{key}.")
        elif mine != theirs:
            found.append(f"{prefix}{key}: {mine!r} vs {theirs!r}")
    return found


PINNED = ("transformers", "tokenizers")


REWRITTEN = frozenset({"tokenizer.json", "tokenizer_config.json", "config.json", *EXTRA_TOKENIZER_FILES})


def write_folder(source: Path, target: Path) -> None:
    """A copy of the model folder `source` in `target` (a new folder) that both majors read alike: every other file
    copied as it is, the tokenizer and config.json written as above. For a base model served as it was
    downloaded (the baseline): SGLang reads its files with its own transformers."""
    if target.exists():
        raise ModelError(f"{target} exists; write the folder to a new path")
    target.mkdir(parents=True)
    for path in sorted(source.iterdir()):
        if path.is_file() and path.name not in REWRITTEN:
            shutil.copyfile(path, target / path.name)
    write_tokenizer(source, target)
    shutil.copyfile(source / "config.json", target / "config.json")
    write_config(target / "config.json")


def rewrite_folder(folder: Path) -> None:
    """Write `folder`'s own tokenizer and config.json in place as `write_folder` writes them into a copy: what
    `burnqed fetch --model-folder` does to the folder an SGLang sidecar serves, so that the base model (served as
    downloaded by eval-base and the baseline workflow) is read like an export. A folder burnqed wrote (an export,
    the tiny model) is left as it is, byte for byte. ModelError when the folder has no config.json or no
    tokenizer.json."""
    if not (folder / "config.json").is_file():
        raise ModelError(f"{folder} has no config.json: not a transformers model folder")
    write_tokenizer(folder, folder)
    write_config(folder / "config.json")


def pin_problems(constraints: str) -> list[str]:
    """How this environment's transformers and tokenizers differ from the `name==version` pins in `constraints`
    (the text of constraints.txt): the serving image's build refuses to differ from the train image."""
    from importlib.metadata import version

    pins = dict(line.split("#")[0].strip().split("==", 1) for line in constraints.splitlines()
                if "==" in line.split("#")[0])
    return [f"{name} {version(name)} here, {pins.get(name)} in constraints" for name in PINNED
            if pins.get(name) != version(name)]


def main(argv: list[str]) -> int:
    """`describe FOLDER... [--config-only]` prints one description (a list of them for several folders); `check
    FOLDER REFERENCE` compares with a saved one, `pins CONSTRAINTS` the installed versions: exit 1 on a difference;
    `write SOURCE TARGET` copies a model folder, its tokenizer and config written by burnqed."""
    if len(argv) >= 2 and argv[0] == "describe":
        folders = [Path(arg) for arg in argv[1:] if arg != "--config-only"]
        found = [describe(folder, tokenizer="--config-only" not in argv) for folder in folders]
        print(json.dumps(found[0] if len(found) == 1 else found, indent=2))
        return 0
    if len(argv) == 3 and argv[0] == "write":
        write_folder(Path(argv[1]), Path(argv[2]))
        return 0
    if len(argv) == 2 and argv[0] == "pins":
        problems = pin_problems(Path(argv[1]).read_text(encoding="utf-8"))
        for line in problems:
            print(line, file=sys.stderr)
        return 1 if problems else 0
    if len(argv) == 3 and argv[0] == "check":
        reference = json.loads(Path(argv[2]).read_text(encoding="utf-8"))
        lines = differences(reference, describe(Path(argv[1]), tokenizer="tokenizer" in reference))
        for line in lines:
            print(line, file=sys.stderr)
        return 1 if lines else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
