"""The tokenizers-only tokenizer (burnqed.policy.tokenizers_only.TokenizersOnlyTokenizer): for every folder shape it
accepts, the ids, texts, special tokens and padding that transformers' PreTrainedTokenizerFast gives (5.x here,
4.57.1 in a child), for the calls burnqed makes; every folder it does not understand is refused and read by
transformers."""

from __future__ import annotations

import contextlib
import json
import random
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from burnqed.policy.modelfolder import encode_texts, load_tokenizer
from burnqed.policy.tokenizers_only import PATCHED_VOCAB, TokenizersOnlyTokenizer, tokenizers_only_refusal

TEXTS = [
    "theorem foo (x : ℝ) (h₀ : 0 < x) : x ^ 2 > 0 := by\n  positivity",
    "",
    "  two  spaces\tand a tab\n\n",
    "<|bos|> literal <|eos|> special<|pad|>tokens",
    "∀ n : ℕ, n + 0 = n ⟨h₀, h₁⟩ ∣ ≤ ≠ 🙂 Ünïcødé",
    "norm_num [Nat.factorial] at h₀ ⊢",
]
LENGTHS = (1, 2, 3, 7, 40)


def _copy(tiny: Path, target: Path, config: Callable[[dict[str, Any]], None] | None = None,
          tokenizer: Callable[[dict[str, Any]], None] | None = None) -> Path:
    target.mkdir(parents=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(tiny / name, target / name)
    for name, edit in (("tokenizer_config.json", config), ("tokenizer.json", tokenizer)):
        if edit is not None:
            data = json.loads((target / name).read_text(encoding="utf-8"))
            edit(data)
            (target / name).write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return target


def _bos_and_eos(data: dict[str, Any]) -> None:
    data["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<|bos|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                   {"SpecialToken": {"id": "<|eos|>", "type_id": 0}}],
        "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<|bos|>": {"id": "<|bos|>", "ids": [1], "tokens": ["<|bos|>"]},
                           "<|eos|>": {"id": "<|eos|>", "ids": [2], "tokens": ["<|eos|>"]}}}


def _other_sides(config: dict[str, Any]) -> None:
    config.update(padding_side="right", truncation_side="left", clean_up_tokenization_spaces=False)
    config.pop("model_max_length")


def _no_pad(config: dict[str, Any]) -> None:
    config.pop("pad_token")


@pytest.fixture(scope="module")
def accepted(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Folder shapes the tokenizers-only tokenizer reads: the tiny model's own (BOS only, left padding, 2048
    tokens), BOS and EOS with right padding, left truncation and no length, and one without a pad token."""
    root = tmp_path_factory.mktemp("tokenizers-only")
    return {"tiny": tiny_model_dir,
            "bos-eos": _copy(tiny_model_dir, root / "bos-eos", _other_sides, _bos_and_eos),
            "no-pad": _copy(tiny_model_dir, root / "no-pad", _no_pad)}


def _readings(tokenizer: Any) -> dict[str, Any]:
    """Everything burnqed asks of a tokenizer, on fixed texts and random ids (special ones included)."""
    rng = random.Random(7)
    size = 860
    id_rows = [[rng.randrange(size) for _ in range(rng.randrange(1, 14))] for _ in range(120)]
    return {
        "encode": [tokenizer.encode(text) for text in TEXTS],
        "encode-plain": [tokenizer.encode(text, add_special_tokens=False) for text in TEXTS],
        "texts": encode_texts(tokenizer, TEXTS),
        "one-text": [tokenizer(text)["input_ids"] for text in TEXTS],
        "cut": {str(length): encode_texts(tokenizer, TEXTS, length) for length in LENGTHS},
        "decode": [tokenizer.decode(ids) for ids in id_rows],
        "decode-skip": [tokenizer.decode(ids, skip_special_tokens=True) for ids in id_rows],
        "one": [tokenizer.decode([token]) for token in range(size)],
        "special": [tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id, tokenizer.unk_token_id,
                    tokenizer.bos_token, tokenizer.eos_token, tokenizer.pad_token],
        "length": tokenizer.model_max_length,
        "sides": [tokenizer.padding_side, tokenizer.truncation_side],
    }


def test_every_accepted_shape_reads_as_transformers_reads_it(accepted: dict[str, Path]) -> None:
    from transformers import PreTrainedTokenizerFast

    for name, folder in accepted.items():
        assert tokenizers_only_refusal(folder) is None, name
        ours, reference = load_tokenizer(folder, avoid_transformers=True), load_tokenizer(folder)
        assert isinstance(ours, TokenizersOnlyTokenizer) and isinstance(reference, PreTrainedTokenizerFast), name
        assert _readings(ours) == _readings(reference), name
        if reference.pad_token is None:  # what LocalModel.load does then, on either reading
            reference.pad_token = reference.eos_token
            ours.pad_token = ours.eos_token
            assert (ours.pad_token, ours.pad_token_id) == (reference.pad_token, reference.pad_token_id)
        rows = encode_texts(reference, TEXTS)
        for side in ("left", "right", None):
            mine = ours.pad({"input_ids": rows}, padding=True, padding_side=side)
            theirs = reference.pad({"input_ids": rows}, padding=True, padding_side=side)
            assert mine == {key: theirs[key] for key in ("input_ids", "attention_mask")}, (name, side)


_TRANSFORMERS4 = """
import json, sys
from transformers import PreTrainedTokenizerFast
from burnqed.policy.modelfolder import encode_texts
spec = json.load(sys.stdin)
out = []
for folder in spec["folders"]:
    t = PreTrainedTokenizerFast.from_pretrained(folder)
    out.append({"encode": [t.encode(x) for x in spec["texts"]],
                "cut": {str(n): encode_texts(t, spec["texts"], n) for n in spec["lengths"]},
                "decode": [t.decode(ids) for ids in spec["ids"]],
                "decode-skip": [t.decode(ids, skip_special_tokens=True) for ids in spec["ids"]],
                "special": [t.bos_token_id, t.eos_token_id, t.pad_token_id],
                "length": t.model_max_length})
print(json.dumps(out))
"""


@pytest.mark.slow  # a child importing transformers 4.57
def test_transformers_4_57_reads_every_accepted_shape_alike(accepted: dict[str, Path],
                                                            transformers4_env: dict[str, str]) -> None:
    """The older serving image's transformers (SGLang 0.5.6's 4.57.1) reads the same ids, texts and tokens."""
    rng = random.Random(3)
    ids = [[rng.randrange(860) for _ in range(rng.randrange(1, 14))] for _ in range(60)]
    folders = list(accepted.values())
    # Not a length below the special tokens' count: 4.57 then leaves the text whole where 5.x (and this reading)
    # keeps one token of it (measured: BOS + EOS cut to 1); the encoders' lengths are hundreds.
    lengths = [length for length in LENGTHS if length >= 2]
    spec = {"folders": [str(f) for f in folders], "texts": TEXTS, "lengths": lengths, "ids": ids}
    done = subprocess.run([sys.executable, "-c", _TRANSFORMERS4], input=json.dumps(spec), capture_output=True,
                          text=True, env={**transformers4_env, "USE_TORCH": "0"}, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    for folder, theirs in zip(folders, json.loads(done.stdout), strict=True):
        ours = TokenizersOnlyTokenizer.from_folder(folder)
        assert ours is not None
        mine = {"encode": [ours.encode(x) for x in TEXTS],
                "cut": {str(n): encode_texts(ours, TEXTS, n) for n in lengths},
                "decode": [ours.decode(row) for row in ids],
                "decode-skip": [ours.decode(row, skip_special_tokens=True) for row in ids],
                "special": [ours.bos_token_id, ours.eos_token_id, ours.pad_token_id],
                "length": ours.model_max_length}
        assert mine == theirs, folder


def _many_tokens(data: dict[str, Any]) -> None:
    vocab = data["model"]["vocab"]
    vocab.update({f"extra{i}": len(vocab) + i for i in range(PATCHED_VOCAB)})


REFUSED: dict[str, tuple[Callable[[dict[str, Any]], None] | None, Callable[[dict[str, Any]], None] | None]] = {
    "another class": (lambda c: c.update(tokenizer_class="LlamaTokenizerFast"), None),
    "a BOS flag": (lambda c: c.update(add_bos_token=True), None),
    "an unread key": (lambda c: c.update(extra_special_tokens=["<|x|>"]), None),
    "added tokens in the config": (lambda c: c.update(added_tokens_decoder={}), None),
    "space clean-up": (lambda c: c.update(clean_up_tokenization_spaces=True), None),
    "split special tokens": (lambda c: c.update(split_special_tokens=True), None),
    "a padding side of neither": (lambda c: c.update(padding_side="both"), None),
    "a float length": (lambda c: c.update(model_max_length=1e30), None),
    "a special token as a dict": (lambda c: c.update(bos_token={"content": "<|bos|>", "special": True}), None),
    "a special token outside the vocabulary": (lambda c: c.update(pad_token="<|newpad|>"), None),
    "no post-processor": (None, lambda t: t.update(post_processor=None)),
    "a truncation of its own": (None, lambda t: t.update(truncation={"max_length": 8, "strategy": "LongestFirst",
                                                                    "direction": "Right", "stride": 0})),
    "a normalized special token": (None, lambda t: t["added_tokens"][0].update(normalized=True)),
    "a special token not special": (None, lambda t: t["added_tokens"][2].update(special=False)),
    "a stripped special token": (None, lambda t: t["added_tokens"][1].update(lstrip=True)),
    "a vocabulary transformers may patch": (None, _many_tokens),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_folder_it_does_not_understand_is_read_by_transformers(case: str, tiny_model_dir: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    config, tokenizer = REFUSED[case]
    folder = _copy(tiny_model_dir, tmp_path / "folder", config, tokenizer)
    assert tokenizers_only_refusal(folder) is not None
    _read_by_transformers(folder, monkeypatch)


def _read_by_transformers(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`load_tokenizer(folder, avoid_transformers=True)` goes to transformers: whatever it makes of the folder
    (some of these it refuses itself), never the tokenizers-only reading."""

    def read_alone(self: TokenizersOnlyTokenizer, tokenizer_json: str, config: dict[str, Any]) -> None:
        raise AssertionError(f"{folder} was read by the tokenizers-only tokenizer")

    monkeypatch.setattr(TokenizersOnlyTokenizer, "__init__", read_alone)
    # transformers may refuse some itself (a special token as a dict, a padding side it does not know)
    with contextlib.suppress(TypeError, ValueError):
        load_tokenizer(folder, avoid_transformers=True)


def test_a_special_tokens_map_is_read_by_transformers(tiny_model_dir: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _copy(tiny_model_dir, tmp_path / "folder")
    (folder / "special_tokens_map.json").write_text(json.dumps({"additional_special_tokens": ["<|x|>"]}))
    assert tokenizers_only_refusal(folder) is not None
    _read_by_transformers(folder, monkeypatch)


def test_a_tokenizer_json_that_is_not_json_is_refused(tiny_model_dir: Path, tmp_path: Path) -> None:
    folder = _copy(tiny_model_dir, tmp_path / "folder")
    (folder / "tokenizer.json").write_text("{not json")
    assert tokenizers_only_refusal(folder) == "tokenizer.json is not JSON"


def test_padding_it_does_not_do_is_refused_not_approximated(accepted: dict[str, Path]) -> None:
    """`pad` does the one form burnqed asks for (to the longest row, lists); any other form raises rather than
    answering differently from transformers."""
    rows = {"input_ids": [[1, 5], [1]]}
    ours = TokenizersOnlyTokenizer.from_folder(accepted["tiny"])
    no_pad = TokenizersOnlyTokenizer.from_folder(accepted["no-pad"])
    assert ours is not None and no_pad is not None
    with pytest.raises(ValueError, match="lists only"):
        ours.pad(rows, padding=True, return_tensors="pt")
    with pytest.raises(ValueError, match="lists only"):
        ours.pad(rows, padding=False)
    with pytest.raises(ValueError, match="no pad token"):
        no_pad.pad(rows, padding=True)


def test_the_local_model_reads_it_with_tokenizers_alone_on_the_cpu_only(tiny_model_dir: Path) -> None:
    from burnqed.policy.localmodel import LocalModel

    assert isinstance(LocalModel.load(tiny_model_dir, device="cpu").tokenizer, TokenizersOnlyTokenizer)
    transformers_read = LocalModel.load(tiny_model_dir, device="cpu", avoid_transformers=False)
    assert not isinstance(transformers_read.tokenizer, TokenizersOnlyTokenizer)
