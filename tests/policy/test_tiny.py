"""The tiny embedded model: tokenizer, folder layout, determinism, atomic publishing, `ensure_model`."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from burnqed.errors import InputError, ModelError, ModelInputError
from burnqed.policy import tiny
from burnqed.policy.tiny import (
    METADATA_FILE,
    build_tiny_model,
    default_model_dir,
    ensure_model,
    missing_model_files,
    training_pairs,
)
from burnqed.records.theorem import Theorem
from burnqed.storage import Store
from burnqed.text.prompt import PromptFormat, build_completion, build_prompt
from leankit.corpus import goal_pp, load_corpus
from tests.conftest import TINY_TEST_STEPS
from tests.processes import cli

LEAN_TEXTS = [
    "x y : ℝ\nh₀ : 0 < x\n⊢ ∀ ε > 0, ∃ δ, |x - y| ≤ δ → x ≤ y + ε",
    "⊢ ∑ i ∈ Finset.range n, (2 * i + 1) = n ^ 2 ∧ ¬(p ∨ q) ↔ A ⊆ B ∩ C",
    "f : 𝔽 → 𝕜\n⊢ ⟨a, b⟩ = ⟪c⟫  -- unseen: 🙂 ∮",
]


def test_tokenizer_round_trips_lean_text_and_adds_bos(tiny_model_dir: Path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    assert (tokenizer.bos_token, tokenizer.eos_token, tokenizer.pad_token) == ("<|bos|>", "<|eos|>", "<|pad|>")
    assert 500 <= len(tokenizer) <= tiny.VOCAB_SIZE
    for text in LEAN_TEXTS:
        ids = tokenizer(text)["input_ids"]
        assert ids[0] == tokenizer.bos_token_id and ids.count(tokenizer.bos_token_id) == 1
        assert tokenizer.eos_token_id not in ids
        assert tokenizer.decode(ids, skip_special_tokens=True) == text
    # Learned merges: common Lean words are single tokens, not bytes.
    assert len(tokenizer(" linarith", add_special_tokens=False)["input_ids"]) == 1


def test_model_folder_holds_model_tokenizer_and_metadata(tiny_model_dir: Path):
    names = {p.name for p in tiny_model_dir.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", METADATA_FILE} <= names
    assert missing_model_files(tiny_model_dir) == []
    config = json.loads((tiny_model_dir / "config.json").read_text(encoding="utf-8"))
    assert config["model_type"] == "llama"
    assert (config["hidden_size"], config["num_hidden_layers"]) == (64, 2)
    assert (config["num_attention_heads"], config["num_key_value_heads"]) == (4, 2)
    assert config["tie_word_embeddings"] is True
    assert config["max_position_embeddings"] >= 2048
    meta = json.loads((tiny_model_dir / METADATA_FILE).read_text(encoding="utf-8"))
    assert meta["prompt_format"] == "plain-tactic"
    # The bundled corpus' 274 train transitions and the pretraining families' 600 (leankit.world.pretrain).
    assert (meta["seed"], meta["steps"], meta["pairs"]) == (0, TINY_TEST_STEPS, 995)
    assert meta["corpus"] == "bundled-competition+burnqed-pretrain"
    assert meta["final_loss"] < meta["initial_loss"] / 2
    assert meta["corpus_digest"].startswith("sha256:") and len(meta["corpus_digest"]) == 7 + 64
    assert 100_000 < meta["params"] < 200_000
    # Published by rename: no staging or old folders left beside it.
    assert [p.name for p in tiny_model_dir.parent.iterdir()] == [tiny_model_dir.name]


def test_training_pairs_come_from_the_train_split_only():
    corpus = load_corpus()
    pairs = training_pairs(corpus)
    assert len(pairs) == len(set(pairs)) == 315
    prompts = {p for p, _ in pairs}
    for theorem in corpus.theorems:
        # The prompt search sends at the theorem's start: its declaration over the state it starts at.
        start_prompt = build_prompt(PromptFormat.PLAIN_TACTIC, goal_pp(theorem.goals[theorem.start_goal()]),
                                    Theorem.from_recorded(theorem).declaration())
        assert (start_prompt in prompts) == (theorem.split == "train"), theorem.name
    first = corpus.theorems[0]
    assert first.split == "train" and first.start_goal() != first.root  # `x` is a binder: it starts after `intro x`
    expected = (build_prompt(PromptFormat.PLAIN_TACTIC, "x : ℝ\n⊢ 2 * x + 3 = 11 → x = 4",
                             "theorem algebra_2x_plus_3_eq_11 (x : ℝ) : 2 * x + 3 = 11 → x = 4"),
                build_completion(PromptFormat.PLAIN_TACTIC, "intro h₀"))
    assert pairs[0] == expected
    # A state on a proof path with two open goals is the whole goal list, as search sends it.
    assert any("\n\n" in p.split("/- tactic state:")[1] for p in prompts)


@pytest.mark.slow
def test_same_seed_same_weights_other_seed_other_weights(tmp_path: Path):
    from safetensors.torch import load_file

    for name, seed in (("a", 7), ("b", 7), ("c", 8)):
        build_tiny_model(tmp_path / name, steps=4, seed=seed)
    a, b, c = (load_file(tmp_path / name / "model.safetensors") for name in "abc")
    assert a.keys() == b.keys()
    assert all(a[key].equal(b[key]) for key in a)
    assert not all(a[key].equal(c[key]) for key in a)
    assert (tmp_path / "a" / "tokenizer.json").read_bytes() == (tmp_path / "b" / "tokenizer.json").read_bytes()


@pytest.mark.slow
def test_refuses_to_overwrite_a_non_empty_folder_unless_forced_and_a_users_folder_even_then(tmp_path: Path):
    target = tmp_path / "model"
    target.mkdir()
    (target / "keep.txt").write_text("mine", encoding="utf-8")
    for force in (False, True):  # not "pass --force", which would then be refused
        with pytest.raises(InputError) as refused:
            build_tiny_model(target, steps=1, force=force)
        assert str(refused.value) == (f"--output {target} is not empty and is not a tiny model folder (it has no "
                                      f"{METADATA_FILE}), so it cannot be replaced, not even with --force: choose "
                                      "another folder")
    assert [p.name for p in target.iterdir()] == ["keep.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["model"]
    empty = tmp_path / "empty"
    empty.mkdir()
    build_tiny_model(empty, steps=1)  # an empty folder is fine
    assert missing_model_files(empty) == []


def test_a_failed_build_leaves_nothing_under_the_final_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    def broken_save(self: object, *args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("transformers.PreTrainedModel.save_pretrained", broken_save)
    with pytest.raises(OSError, match="disk full"):
        build_tiny_model(tmp_path / "model", steps=1)
    assert list(tmp_path.iterdir()) == []


def test_default_model_dir_follows_burnqed_home_then_xdg_cache(tmp_path: Path):
    assert default_model_dir({"BURNQED_HOME": str(tmp_path), "XDG_CACHE_HOME": "/x"}) == (
        tmp_path / "models" / "tiny-v3"
    )
    assert default_model_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "burnqed" / "models" / "tiny-v3"
    assert default_model_dir({"HOME": "/home/u"}) == Path("/home/u/.cache/burnqed/models/tiny-v3")


def test_default_model_dir_without_any_home_is_one_line(monkeypatch: pytest.MonkeyPatch):
    def unknown(uid: int) -> object:
        raise KeyError(uid)

    monkeypatch.setattr("burnqed.storage.home.pwd.getpwuid", unknown)
    with pytest.raises(InputError) as caught:
        default_model_dir({})
    assert str(caught.value) == (
        f"no folder for the default tiny model: HOME is not set and user id {os.getuid()} has no home directory; set "
        "BURNQED_HOME (or XDG_CACHE_HOME) to a writable folder, or give policy.model")
    assert default_model_dir({"BURNQED_HOME": "/b"}) == Path("/b/models/tiny-v3")


def test_ensure_model_explains_what_is_missing(tmp_path: Path, tiny_model_dir: Path, store: Store):
    assert ensure_model(str(tiny_model_dir), store=store) == tiny_model_dir
    with pytest.raises(ModelInputError) as missing:
        ensure_model(str(tmp_path / "nowhere"), store=store)
    assert str(missing.value) == f"model folder {tmp_path / 'nowhere'}: no such folder"
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "config.json").write_text("{}", encoding="utf-8")
    with pytest.raises(ModelError) as info:
        ensure_model(str(tmp_path / "half"), store=store)
    message = str(info.value)
    assert "is missing weights (model.safetensors" in message and "a tokenizer (tokenizer.json" in message
    assert "config.json" not in message.split("missing")[1]


def test_ensure_model_none_builds_the_default_once(tmp_path: Path, tiny_model_dir: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str], store: Store):
    import shutil

    built: list[Path] = []

    def fake_build(output: Path) -> tiny.TinyBuild:
        shutil.copytree(tiny_model_dir, output)
        built.append(output)
        return tiny.TinyBuild(output, 1, 0, 6.0, 1.0, 10, 274, 0.1)

    monkeypatch.setattr(tiny, "build_tiny_model", fake_build)
    monkeypatch.setenv("BURNQED_HOME", str(tmp_path))
    expected = tmp_path / "models" / "tiny-v3"
    assert ensure_model(None, store=store) == expected
    assert ensure_model(None, store=store) == expected
    assert built == [expected]
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"building the tiny embedded model in {expected} (first use, about 20 s)"
    (expected / "model.safetensors").unlink()
    with pytest.raises(ModelError, match="--force"):
        ensure_model(None, store=store)


def test_a_process_under_torchrun_refuses_to_build_the_default_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    store: Store) -> None:
    # Under torchrun transformers' save_pretrained writes on process 0 only: process 1, first to take the build lock,
    # read back a config.json it never wrote (measured: a FileNotFoundError in the staging folder, the run failed).
    monkeypatch.setattr(tiny, "build_tiny_model", lambda output: pytest.fail("built under torchrun"))
    environ = {"BURNQED_HOME": str(tmp_path), "WORLD_SIZE": "2"}
    with pytest.raises(ModelError, match=r"is not built in .*tiny-v3, and a process under torchrun cannot build it: "
                                         r"run `burnqed model init-tiny` first"):
        ensure_model(None, environ, store=store)
    assert not (tmp_path / "models" / "tiny-v3").exists()


def test_a_mistyped_model_path_is_bad_input_with_the_folder_it_likely_meant(tmp_path: Path, tiny_model_dir: Path,
                                                                            store: Store):
    import shutil

    shutil.copytree(tiny_model_dir, tmp_path / "models" / "tiny")
    (tmp_path / "models" / "other").mkdir()
    cases = {
        tmp_path / "models" / "tyni": f"model folder {tmp_path}/models/tyni does not exist; did you mean "
                                      f"{tmp_path}/models/tiny?",
        tmp_path / "models" / "Tiny": f"model folder {tmp_path}/models/Tiny does not exist; did you mean "
                                      f"{tmp_path}/models/tiny?",
        tmp_path / "models" / "zzzzz": f"model folder {tmp_path}/models/zzzzz: no such folder",
        tmp_path / "modles" / "tiny": f"model folder {tmp_path}/modles/tiny: no such folder ({tmp_path}/modles does "
                                      "not exist)",
        tmp_path / "models" / "tiny" / "config.json": f"model folder {tmp_path}/models/tiny/config.json is a file, "
                                                      "not a folder",
    }
    for path, message in cases.items():
        with pytest.raises(ModelInputError) as info:
            ensure_model(str(path), store=store)
        assert str(info.value) == message
        assert "init-tiny" not in str(info.value)  # never: build a model at a mistyped path
    with pytest.raises(ModelInputError) as empty:
        ensure_model("", store=store)
    assert str(empty.value) == ("the model path is empty (policy.model, sft.base_model or --model): give a model "
                                "folder, or leave it unset for the tiny embedded model")
    with pytest.raises(ModelInputError, match=rf"^model folder {tmp_path}/models is missing config\.json, .*; did "
                       rf"you mean {tmp_path}/models/tiny\?$"):
        ensure_model(str(tmp_path / "models"), store=store)


def _fake_build(tiny_model_dir: Path, built: list[Path], seconds: float) -> Any:
    """A build as the real one publishes (staged beside, renamed into place) after `seconds`, counted in `built`."""
    import shutil
    import time

    def build(output: Path) -> tiny.TinyBuild:
        built.append(output)
        time.sleep(seconds)
        staging = output.parent / f".{output.name}.building-{len(built)}"
        shutil.copytree(tiny_model_dir, staging)
        staging.rename(output)
        return tiny.TinyBuild(output, 1, 0, 6.0, 1.0, 10, 274, seconds)

    return build


def test_the_default_model_is_built_once_however_many_need_it_at_once(tmp_path: Path, tiny_model_dir: Path,
                                                                      monkeypatch: pytest.MonkeyPatch,
                                                                      store: Store):
    import threading

    built: list[Path] = []
    monkeypatch.setattr(tiny, "build_tiny_model", _fake_build(tiny_model_dir, built, 0.1))
    environ = {"BURNQED_HOME": str(tmp_path)}
    found: list[Path] = []
    threads = [threading.Thread(target=lambda: found.append(ensure_model(None, environ, store=store)))
               for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    expected = tmp_path / "models" / "tiny-v3"
    assert built == [expected] and found == [expected] * 3
    assert missing_model_files(expected) == []


@pytest.mark.slow  # a second Python process holds the lock, then is killed
def test_a_builder_killed_mid_build_leaves_neither_its_lock_nor_a_half_built_folder(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch, store: Store,
    capsys: pytest.CaptureFixture[str],
):
    import subprocess
    import sys
    import threading

    expected = tmp_path / "models" / "tiny-v3"
    expected.parent.mkdir(parents=True)
    holder = subprocess.Popen(  # what a build does while it trains: the lock held, nothing under the final name yet
        [sys.executable, "-c", "import fcntl, sys, time\n"
         f"lock = open({str(expected.parent / '.tiny-v3.lock')!r}, 'a+b')\n"
         "fcntl.flock(lock, fcntl.LOCK_EX)\nprint('locked', flush=True)\ntime.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        built: list[Path] = []
        monkeypatch.setattr(tiny, "build_tiny_model", _fake_build(tiny_model_dir, built, 0.0))
        found: list[Path] = []
        waiter = threading.Thread(
            target=lambda: found.append(ensure_model(None, {"BURNQED_HOME": str(tmp_path)}, store=store)))
        waiter.start()
        waiter.join(timeout=0.5)
        assert waiter.is_alive() and built == []  # it waits for the builder
        holder.kill()  # SIGKILL: no cleanup of its own runs
        holder.wait(timeout=10)
        waiter.join(timeout=30)
    finally:
        holder.kill()
        holder.wait(timeout=10)
        assert holder.stdout is not None
        holder.stdout.close()
    assert built == [expected] and found == [expected]
    assert sorted(p.name for p in expected.parent.iterdir()) == [".tiny-v3.lock", "tiny-v3"]
    assert capsys.readouterr().err.splitlines()[0] == (
        f"waiting for another process building the tiny embedded model in {expected}")


def test_trained_model_prefers_a_training_tactic_to_a_random_string(tiny_model_dir: Path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model: Any = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    model.eval()
    prompt, completion = training_pairs(load_corpus())[0]

    def logprob(text: str) -> float:
        p = tokenizer(prompt)["input_ids"]
        c = tokenizer(text, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logp = model(input_ids=torch.tensor([p + c])).logits.log_softmax(-1)[0]
        return sum(float(logp[len(p) - 1 + i, t]) for i, t in enumerate(c))

    trained = logprob(completion)
    assert trained > -15
    assert trained > logprob("  qzv Wk ]] 9@\n```") + 40
    assert trained > logprob("  xyzzy frobnicate\n```") + 30


@pytest.mark.slow
def test_cli_init_tiny_builds_then_refuses(tmp_path: Path):
    target = tmp_path / "m"
    result = cli("model", "init-tiny", "--output", str(target), "--steps", "2", "--seed", "3")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"built tiny model in {target}: 2 steps on 995 pairs, loss ")
    assert json.loads((target / METADATA_FILE).read_text(encoding="utf-8"))["seed"] == 3
    again = cli("model", "init-tiny", "--output", str(target), "--steps", "2")
    assert again.returncode == 2
    assert again.stderr.strip() == f"error: --output {target} holds a tiny model init-tiny built; pass --force to " \
        "replace it"
