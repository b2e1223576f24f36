"""One model folder, two transformers majors: what this process's transformers (5.x, the train image's) and 4.57.1
(SGLang 0.5.6's, in .venv-transformers4 from `scripts/transformers4.sh`) read from folders burnqed writes: the
tokenizer's ids of a real prompt (BOS rule included), its special tokens, every config field SGLang's Llama reads,
the RoPE settings as each SGLang resolves them, and the context length. Each test also shows the failure the
writer prevents, so none of them can pass by comparing two readings of nothing."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from burnqed.modelfolder import PROBE_TEXT, describe, differences, pin_problems, write_config, write_tokenizer

LLAMA_CONFIG: dict[str, Any] = {  # as a 4.x checkpoint writes it (the DeepSeek/Llama family's base models)
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
    "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 706,
    "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "hidden_act": "silu", "torch_dtype": "bfloat16",
    "bos_token_id": 1, "eos_token_id": 2, "tie_word_embeddings": False,
}


def under_transformers4(env: dict[str, str], *folders: Path, config_only: bool = False) -> list[dict[str, Any]]:
    """`describe` of each folder by transformers 4.57.1, in one child process (an import of transformers each).
    USE_TORCH=0: reading a config and a tokenizer needs no torch, and importing it triples the child's time."""
    flags = ["--config-only"] if config_only else []
    done = subprocess.run([sys.executable, "-m", "burnqed.modelfolder", "describe", *map(str, folders), *flags],
                          env={**env, "USE_TORCH": "0"}, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    described = json.loads(done.stdout)
    found: list[dict[str, Any]] = described if len(folders) > 1 else [described]
    assert [one["transformers"] for one in found] == ["4.57.1"] * len(folders)
    return found


def test_the_tiny_model_folder_reads_alike_under_both_majors(tiny_model_dir: Path,
                                                             transformers4_env: dict[str, str]) -> None:
    here = describe(tiny_model_dir)
    [there] = under_transformers4(transformers4_env, tiny_model_dir)
    assert differences(here, there) == []
    config = json.loads((tiny_model_dir / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast" and "backend" not in config
    tokens = here["tokenizer"]
    assert tokens["probe"][0] == tokens["bos_token_id"] == 1 and tokens["decoded"] == PROBE_TEXT
    assert (here["rope_theta"], here["rope_scaling"], here["context_length"]) == (10000.0, None, 2048)


def _llama_tokenizer(folder: Path, tiny: Path, add_bos: bool) -> Path:
    """A DeepSeek-shaped tokenizer: Llama's class and flags, a byte-level tokenizer.json whose post-processor adds
    nothing (4.x adds BOS from the flag, 5.x follows tokenizer.json), and a config."""
    folder.mkdir()
    tokenizer = json.loads((tiny / "tokenizer.json").read_text())
    tokenizer["post_processor"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                                   "use_regex": True}
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    config = json.loads((tiny / "tokenizer_config.json").read_text())
    config.update(tokenizer_class="LlamaTokenizerFast", add_bos_token=add_bos, add_eos_token=False, legacy=True)
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    (folder / "config.json").write_text(json.dumps(LLAMA_CONFIG))
    return folder


@pytest.mark.parametrize("add_bos", [True, False])
def test_a_llama_tokenizers_bos_flag_is_written_where_both_majors_read_it(
        tmp_path: Path, tiny_model_dir: Path, transformers4_env: dict[str, str], add_bos: bool) -> None:
    base = _llama_tokenizer(tmp_path / "base", tiny_model_dir, add_bos)
    written = tmp_path / "export"
    write_tokenizer(base, written)
    shutil.copyfile(base / "config.json", written / "config.json")
    raw_there, there = under_transformers4(transformers4_env, base, written)
    raw_here, here = describe(base), describe(written)
    # The failure: 4.57 follows add_bos_token, 5.x ignores it (tokenizer.json adds nothing); 4.57's Llama class also
    # adds an <unk> the vocabulary lacks.
    assert (raw_there["tokenizer"]["probe"][0] == 1) == add_bos and raw_here["tokenizer"]["probe"][0] != 1
    raw = differences(raw_here, raw_there)
    assert any(line.startswith("tokenizer.probe:") for line in raw) == add_bos
    assert "tokenizer.vocab: 706 vs 707" in raw
    assert differences(here, there) == []
    assert here["tokenizer"]["probe"] == raw_there["tokenizer"]["probe"]  # the flag's rule, as 4.x trained with it
    assert (here["tokenizer"]["probe"][0] == 1) == add_bos and here["tokenizer"]["decoded"] == PROBE_TEXT


@pytest.mark.parametrize(("scaling", "theta", "positions", "context"), [
    ({"type": "linear", "factor": 4.0}, 500000.0, 4096, 16384),
    ({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
      "original_max_position_embeddings": 8192}, 500000.0, 131072, 131072),
    ({"rope_type": "dynamic", "factor": 2.0}, 100000.0, 4096, 8192),
    (None, 10000.0, 4096, 4096),
])
def test_a_llama_configs_rope_settings_survive_a_save_by_transformers_5(
        tmp_path: Path, transformers4_env: dict[str, str], scaling: dict[str, Any] | None, theta: float,
        positions: int, context: int) -> None:
    from transformers import AutoConfig

    original = tmp_path / "base"
    original.mkdir()
    (original / "config.json").write_text(json.dumps({**LLAMA_CONFIG, "rope_theta": theta, "rope_scaling": scaling,
                                                      "max_position_embeddings": positions}))
    unfixed, saved = tmp_path / "unfixed", tmp_path / "saved"
    AutoConfig.from_pretrained(original).save_pretrained(unfixed)  # what SFT and export do under transformers 5
    shutil.copytree(unfixed, saved)
    write_config(saved / "config.json")
    before, lost, there = under_transformers4(transformers4_env, original, unfixed, saved, config_only=True)
    assert before["rope_theta"] == theta and before["context_length"] == context
    # The failure: 4.57 reads 5.x's own save as plain RoPE with theta 10000.
    assert (lost["rope_theta"], lost["rope_scaling"]) == (10000.0, None)
    here = describe(saved, tokenizer=False)
    assert differences(here, there) == [] and differences(before, there) == []
    expected = None if scaling is None else {**{k: v for k, v in scaling.items() if k != "type"},
                                             "rope_type": scaling.get("rope_type", scaling.get("type"))}
    assert (there["rope_theta"], there["rope_scaling"], there["context_length"]) == (theta, expected, context)
    assert there["config"]["dtype"] == "bfloat16" and there["config"]["num_key_value_heads"] == 2


def check(env: dict[str, str], folder: Path, reference: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "burnqed.modelfolder", "check", str(folder), str(reference)],
                          env={**env, "USE_TORCH": "0"}, capture_output=True, text=True, timeout=300, check=False)


def test_the_check_command_exits_1_with_the_differences(tmp_path: Path, tiny_model_dir: Path,
                                                        transformers4_env: dict[str, str]) -> None:
    base = _llama_tokenizer(tmp_path / "base", tiny_model_dir, add_bos=True)
    reference = tmp_path / "reference.json"
    reference.write_text(json.dumps(describe(base)))
    done = check(transformers4_env, base, reference)
    assert done.returncode == 1 and "tokenizer.probe: [" in done.stderr
    write_tokenizer(base, base)
    reference.write_text(json.dumps(describe(base)))
    done = check(transformers4_env, base, reference)
    assert done.returncode == 0, done.stderr


def test_the_serving_images_check_folder_reads_as_its_reference_under_both_majors(
        transformers4_env: dict[str, str]) -> None:
    folder = Path(__file__).resolve().parents[1] / "images" / "sglang" / "modelfolder-check"
    reference = json.loads((folder / "reference.json").read_text())
    assert differences(reference, describe(folder)) == []
    assert check(transformers4_env, folder, folder / "reference.json").returncode == 0
    # What it pins down: BOS first (the folder's declared rule), theta 1e5 with linear scaling ×4.
    assert reference["tokenizer"]["probe"][0] == reference["tokenizer"]["bos_token_id"] == 1
    assert (reference["rope_theta"], reference["rope_scaling"], reference["context_length"]) == (
        100000.0, {"factor": 4.0, "rope_type": "linear"}, 16384)


def test_the_pins_check_names_what_differs() -> None:
    from importlib.metadata import version

    here = f"transformers=={version('transformers')}\ntokenizers=={version('tokenizers')}  # comment\n"
    assert pin_problems(here) == []
    assert pin_problems("transformers==4.57.1\ntokenizers==0.22.2\n") == [
        f"transformers {version('transformers')} here, 4.57.1 in constraints",
        f"tokenizers {version('tokenizers')} here, 0.22.2 in constraints"]
