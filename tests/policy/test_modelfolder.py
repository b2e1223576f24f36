"""One model folder, two transformers majors: what this process's transformers (5.x, the train image's) and 4.57.1
(SGLang 0.5.6's, in .venv-transformers4 from `scripts/transformers4.sh`) read from folders burnqed writes: the
tokenizer's ids of a real prompt (BOS rule included), its special tokens, every config field SGLang's Llama reads,
the RoPE settings as each SGLang resolves them, and the context length. Each test also shows the failure the
writer prevents, so none of them can pass by comparing two readings of nothing. Every folder is built once and
read by transformers 4.57.1 in two child processes (an import of transformers costs seconds on a busy machine)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from burnqed.errors import ModelError
from burnqed.policy.modelfolder import PROBE_TEXT, describe, differences, pin_problems, write_config, write_tokenizer

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
    done = subprocess.run([sys.executable, "-m", "burnqed.policy.modelfolder", "describe", *map(str, folders), *flags],
                          env={**env, "USE_TORCH": "0"}, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    described = json.loads(done.stdout)
    found: list[dict[str, Any]] = described if len(folders) > 1 else [described]
    assert [one["transformers"] for one in found] == ["4.57.1"] * len(folders)
    return found


ROPE_CASES: list[tuple[dict[str, Any] | None, float, int, int]] = [  # scaling, theta, positions, context
    ({"type": "linear", "factor": 4.0}, 500000.0, 4096, 16384),
    ({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
      "original_max_position_embeddings": 8192}, 500000.0, 131072, 131072),
    ({"rope_type": "dynamic", "factor": 2.0}, 100000.0, 4096, 8192),
    (None, 10000.0, 4096, 4096),
]
pytestmark = pytest.mark.timeout(600)  # the module fixture starts two transformers 4.57 children (and may build
#                                                  the tiny model): minutes on a busy 2-core machine
CHECK_FOLDER = Path(__file__).resolve().parents[2] / "images" / "sglang" / "modelfolder-check"


@pytest.fixture(scope="module")
def folders(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every folder the tests read, by name: the tiny model, DeepSeek-shaped tokenizers as their base writes them
    ('bos-raw', 'nobos-raw') and as burnqed writes them ('bos', 'nobos'), the serving image's check folder, and
    per RoPE case k a 4.x config ('rope-k-original'), transformers 5's save of it ('rope-k-unfixed') and that save
    after `write_config` ('rope-k')."""
    from transformers import AutoConfig

    root = tmp_path_factory.mktemp("modelfolders")
    found = {"tiny": tiny_model_dir, "check": CHECK_FOLDER}
    for name, add_bos in (("bos", True), ("nobos", False)):
        raw = _llama_tokenizer(root / f"{name}-raw", tiny_model_dir, add_bos)
        write_tokenizer(raw, root / name)
        shutil.copyfile(raw / "config.json", root / name / "config.json")
        found |= {f"{name}-raw": raw, name: root / name}
    for k, (scaling, theta, positions, _) in enumerate(ROPE_CASES):
        original = root / f"rope-{k}-original"
        original.mkdir()
        (original / "config.json").write_text(json.dumps({**LLAMA_CONFIG, "rope_theta": theta,
                                                          "rope_scaling": scaling,
                                                          "max_position_embeddings": positions}))
        unfixed = root / f"rope-{k}-unfixed"
        AutoConfig.from_pretrained(original).save_pretrained(unfixed)  # what SFT and export do under transformers 5
        shutil.copytree(unfixed, root / f"rope-{k}")
        write_config(root / f"rope-{k}" / "config.json")
        found |= {f"rope-{k}-original": original, f"rope-{k}-unfixed": unfixed, f"rope-{k}": root / f"rope-{k}"}
    return found


@pytest.fixture(scope="module")
def there(folders: dict[str, Path], transformers4_env: dict[str, str]) -> dict[str, dict[str, Any]]:
    """What transformers 4.57.1 reads from each folder (configs only for the RoPE folders)."""
    configs = [name for name in folders if name.startswith("rope-")]
    models = [name for name in folders if name not in configs]
    read = under_transformers4(transformers4_env, *(folders[n] for n in models))
    read += under_transformers4(transformers4_env, *(folders[n] for n in configs), config_only=True)
    return dict(zip(models + configs, read, strict=True))


def test_the_tiny_model_folder_reads_alike_under_both_majors(folders: dict[str, Path],
                                                             there: dict[str, dict[str, Any]]) -> None:
    here = describe(folders["tiny"])
    assert differences(here, there["tiny"]) == []
    config = json.loads((folders["tiny"] / "tokenizer_config.json").read_text())
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


@pytest.mark.parametrize("name", ["bos", "nobos"])
def test_a_llama_tokenizers_bos_flag_is_written_where_both_majors_read_it(
        folders: dict[str, Path], there: dict[str, dict[str, Any]], name: str) -> None:
    add_bos = name == "bos"
    raw_here, raw_there = describe(folders[f"{name}-raw"]), there[f"{name}-raw"]
    # The failure: 4.57 follows add_bos_token and adds an <unk> the vocabulary lacks; 5.23 ignores the flag (it loads
    # a byte-level tokenizer.json as it is); 5.19 (SGLang 0.5.23's) even rebuilds the Llama class's pre-tokenizer
    # and loses the spaces (measured: "CompletethefollowingLean4code…").
    assert (raw_there["tokenizer"]["probe"][0] == 1) == add_bos and raw_here["tokenizer"]["probe"][0] != 1
    assert differences(raw_here, raw_there) != []
    here = describe(folders[name])
    assert differences(here, there[name]) == []
    assert here["tokenizer"]["probe"] == raw_there["tokenizer"]["probe"]  # the flag's rule, as 4.x trained with it
    assert (here["tokenizer"]["probe"][0] == 1) == add_bos and here["tokenizer"]["decoded"] == PROBE_TEXT


def test_burnqed_reads_a_downloaded_base_models_tokenizer_with_the_rule_it_declares(
        folders: dict[str, Path], there: dict[str, dict[str, Any]], tiny_model_dir: Path, tmp_path: Path) -> None:
    """SFT (`sft.model.load_tokenizer`), the encoder and `burnqed serve` (`LocalModel.load`) read a base model as
    downloaded through `load_tokenizer`: the probe 4.x trained with (its BOS flag) and the one the written folder
    gives, which SGLang serves (`burnqed fetch --model-folder`). This transformers alone reads it otherwise."""
    from transformers import AutoTokenizer

    from burnqed.policy.localmodel import LocalModel
    from burnqed.policy.modelfolder import load_tokenizer, tokenizer_probe
    from burnqed.policy.tokenizers_only import written_by_burnqed
    from burnqed.sft.model import load_tokenizer as sft_tokenizer

    raw, written = folders["bos-raw"], folders["bos"]
    assert not written_by_burnqed(raw) and written_by_burnqed(written) and written_by_burnqed(tiny_model_dir)
    expected = there["bos-raw"]["tokenizer"]["probe"]  # 4.57's reading of the flag: what the base was trained with
    assert expected[0] == 1 and tokenizer_probe(load_tokenizer(written)) == expected
    assert tokenizer_probe(load_tokenizer(raw)) == expected and tokenizer_probe(sft_tokenizer(raw)) == expected
    assert tokenizer_probe(AutoTokenizer.from_pretrained(raw)) != expected  # the failure load_tokenizer prevents
    base = tmp_path / "base"  # the tiny model's weights under the DeepSeek-shaped tokenizer files, as downloaded
    shutil.copytree(tiny_model_dir, base)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(raw / name, base / name)
    assert tokenizer_probe(LocalModel.load(base, device="cpu").tokenizer) == expected
    assert sorted(p.name for p in raw.iterdir()) == ["config.json", "tokenizer.json", "tokenizer_config.json"]


@pytest.mark.parametrize("k", range(len(ROPE_CASES)))
def test_a_llama_configs_rope_settings_survive_a_save_by_transformers_5(
        folders: dict[str, Path], there: dict[str, dict[str, Any]], k: int) -> None:
    scaling, theta, _, context = ROPE_CASES[k]
    before, lost, after = there[f"rope-{k}-original"], there[f"rope-{k}-unfixed"], there[f"rope-{k}"]
    assert before["rope_theta"] == theta and before["context_length"] == context
    # The failure: 4.57 reads 5.x's own save as plain RoPE with theta 10000.
    assert (lost["rope_theta"], lost["rope_scaling"]) == (10000.0, None)
    here = describe(folders[f"rope-{k}"], tokenizer=False)
    assert differences(here, after) == [] and differences(before, after) == []
    expected = None if scaling is None else {**{key: v for key, v in scaling.items() if key != "type"},
                                             "rope_type": scaling.get("rope_type", scaling.get("type"))}
    assert (after["rope_theta"], after["rope_scaling"], after["context_length"]) == (theta, expected, context)
    assert after["config"]["dtype"] == "bfloat16" and after["config"]["num_key_value_heads"] == 2


def test_write_copies_a_downloaded_folder_with_its_tokenizer_and_config_written(folders: dict[str, Path],
                                                                                tmp_path: Path) -> None:
    from burnqed.policy.modelfolder import main

    base = folders["bos-raw"]
    (base / "model.safetensors").write_bytes(b"weights")  # stands for the weights: copied as they are
    assert main(["write", str(base), str(tmp_path / "served")]) == 0
    served = tmp_path / "served"
    assert sorted(p.name for p in served.iterdir()) == ["config.json", "model.safetensors", "tokenizer.json",
                                                       "tokenizer_config.json"]
    assert (served / "model.safetensors").read_bytes() == b"weights"
    assert differences(describe(served), describe(folders["bos"])) == []
    (base / "model.safetensors").unlink()
    with pytest.raises(ModelError, match="exists"):
        main(["write", str(base), str(served)])


def test_the_serving_images_check_folder_reads_as_its_reference_under_both_majors(
        there: dict[str, dict[str, Any]]) -> None:
    reference = json.loads((CHECK_FOLDER / "reference.json").read_text())
    assert differences(reference, describe(CHECK_FOLDER)) == []
    assert differences(reference, there["check"]) == []
    # What it pins down: BOS first (the folder's declared rule), theta 1e5 with linear scaling ×4.
    assert reference["tokenizer"]["probe"][0] == reference["tokenizer"]["bos_token_id"] == 1
    assert (reference["rope_theta"], reference["rope_scaling"], reference["context_length"]) == (
        100000.0, {"factor": 4.0, "rope_type": "linear"}, 16384)


def check(env: dict[str, str], folder: Path, reference: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "burnqed.policy.modelfolder", "check", str(folder), str(reference)],
                          env={**env, "USE_TORCH": "0"}, capture_output=True, text=True, timeout=300, check=False)


def test_the_check_command_exits_1_with_the_differences(folders: dict[str, Path],
                                                        transformers4_env: dict[str, str], tmp_path: Path) -> None:
    reference = tmp_path / "reference.json"
    reference.write_text(json.dumps(describe(folders["bos-raw"])))
    done = check(transformers4_env, folders["bos-raw"], reference)
    assert done.returncode == 1 and "tokenizer.probe: [" in done.stderr


def test_the_pins_check_names_what_differs() -> None:
    from importlib.metadata import version

    here = f"transformers=={version('transformers')}\ntokenizers=={version('tokenizers')}  # comment\n"
    assert pin_problems(here) == []
    assert pin_problems("transformers==4.57.1\ntokenizers==0.22.2\n") == [
        f"transformers {version('transformers')} here, 4.57.1 in constraints",
        f"tokenizers {version('tokenizers')} here, 0.22.2 in constraints"]
