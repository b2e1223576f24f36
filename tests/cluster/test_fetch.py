"""`burnqed fetch URI DIR`: the model folder a sidecar serves, downloaded atomically with its ready file last; a
finished output fetched twice is downloaded once; unfinished outputs are refused with --require-done."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from burnqed import storage
from burnqed.cluster.fetch import MODEL_FOLDER_LINE, READY_NAME, fetch
from burnqed.errors import InputError
from burnqed.storage import Store
from tests.processes import cli


def publish(uri: str, files: dict[str, str], *, store: Store) -> None:
    with store.staged_output(uri, stage="export") as folder:
        for name, text in files.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(text)


def test_fetch_a_finished_folder_once(tmp_path: Path, store: Store) -> None:
    uri = f"file://{tmp_path}/run/iter_0/export"
    publish(uri, {"config.json": "{}", "weights/model.safetensors": "w" * 1000}, store=store)
    dest = tmp_path / "models" / "policy"
    report = fetch(uri, dest, require_done=True, store=store)
    assert not report.skipped and report.files == 3  # two files and the completion marker
    assert (dest / "weights" / "model.safetensors").read_text() == "w" * 1000
    assert (dest / READY_NAME).read_text().startswith(storage.normalize(uri) + "\n")
    assert not (tmp_path / "models" / ".policy.partial").exists()
    again = fetch(uri, dest, require_done=True, store=store)
    assert again.skipped and again.files == 3
    publish(uri, {"config.json": "{\"v\": 2}"}, store=store)  # re-published: a new marker, so a new download
    third = fetch(uri, dest, require_done=True, store=store)
    assert not third.skipped and (dest / "config.json").read_text() == "{\"v\": 2}"
    assert not (dest / "weights").exists()


def test_fetch_a_file_and_a_folder_without_marker(tmp_path: Path, store: Store) -> None:
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "tokenizer.json").write_text("t")
    assert fetch(str(tmp_path / "base"), tmp_path / "a", store=store).files == 1
    assert (tmp_path / "a" / "tokenizer.json").read_text() == "t"
    fetch(str(tmp_path / "base" / "tokenizer.json"), tmp_path / "b", store=store)
    assert (tmp_path / "b" / "tokenizer.json").read_text() == "t"
    with pytest.raises(InputError, match="is not a finished output"):
        fetch(str(tmp_path / "base"), tmp_path / "c", require_done=True, store=store)
    assert not (tmp_path / "c").exists()


@pytest.mark.slow
def test_fetch_from_s3(s3_root: str, tmp_path: Path, store: Store) -> None:
    uri = f"{s3_root}/iter_1/export"
    publish(uri, {"config.json": "{}", "model.safetensors": "x" * 5000}, store=store)
    result = cli("fetch", uri, str(tmp_path / "policy"), "--require-done")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"fetched {uri} -> {tmp_path / 'policy'} (3 files, ")
    assert (tmp_path / "policy" / "model.safetensors").read_text() == "x" * 5000
    assert (tmp_path / "policy" / READY_NAME).is_file()
    result = cli("fetch", uri, str(tmp_path / "policy"))
    assert result.stdout == f"{tmp_path / 'policy'} already holds {uri}\n"


def test_fetch_errors_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = cli("fetch", str(tmp_path / "missing"), str(tmp_path / "out"))
    assert result.returncode == 2
    assert result.stderr == f"error: {tmp_path / 'missing'} does not exist\n"
    monkeypatch.chdir(tmp_path)
    for dest in ("s3://bucket/x", "file:///tmp/x", "s3:bucket/x"):  # a URI where a local folder goes: nothing made
        result = cli("fetch", str(tmp_path / "missing"), dest)
        assert (result.returncode, result.stderr) == (
            2, f"error: fetch DEST {dest!r}: a local folder to download into, not a URI\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def deepseek_shaped_base(folder: Path) -> Path:
    """A base model folder as DeepSeek's is downloaded: Llama's tokenizer class with `add_bos_token` (4.x adds BOS
    from the flag) over a byte-level tokenizer.json whose post-processor adds nothing, a 4.x config, weights."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {token: k for k, token in enumerate(["<unk>", "<s>", "</s>", *alphabet])}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=True)
    tokenizer.decoder = decoders.ByteLevel()
    folder.mkdir(parents=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "LlamaTokenizerFast", "add_bos_token": True, "add_eos_token": False,
        "bos_token": {"__type": "AddedToken", "content": "<s>", "lstrip": False, "normalized": True, "rstrip": False,
                      "single_word": False},
        "eos_token": "</s>", "unk_token": "<unk>",
        "model_max_length": 4096}))
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "rope_theta": 100000.0,
        "rope_scaling": {"type": "linear", "factor": 4.0}, "torch_dtype": "bfloat16", "vocab_size": len(vocab)}))
    (folder / "model.safetensors").write_bytes(b"weights")
    return folder


def test_fetch_model_folder_serves_the_base_model_written_like_an_export(tmp_path: Path, store: Store) -> None:
    from tokenizers import Tokenizer

    from burnqed.policy.modelfolder import PROBE_TEXT, write_folder

    base = deepseek_shaped_base(tmp_path / "hub" / "base")
    written = tmp_path / "written"
    write_folder(base, written)  # `python -m burnqed.policy.modelfolder write BASE OUT`, read alike under both majors
    dest = tmp_path / "models" / "policy"
    report = fetch(str(base), dest, model_folder=True, store=store)
    assert not report.skipped
    served = sorted(p.name for p in dest.iterdir())
    assert served == sorted([READY_NAME, *(p.name for p in written.iterdir())])
    for name in ("tokenizer.json", "tokenizer_config.json", "config.json", "model.safetensors"):
        assert (dest / name).read_bytes() == (written / name).read_bytes(), name
    # What it changed: the class both majors load, the flag's BOS rule in the post-processor, RoPE beside dtype.
    assert json.loads((dest / "tokenizer_config.json").read_text())["tokenizer_class"] == "PreTrainedTokenizerFast"
    raw = Tokenizer.from_file(str(base / "tokenizer.json")).encode(PROBE_TEXT).tokens
    assert raw[0] != "<s>" and Tokenizer.from_file(str(dest / "tokenizer.json")).encode(PROBE_TEXT).tokens == [
        "<s>", *raw]
    assert (dest / READY_NAME).read_text().endswith(f"\n{MODEL_FOLDER_LINE}\n")
    assert fetch(str(base), dest, model_folder=True, store=store).skipped
    # A folder fetched as it is (no --model-folder) is not taken for a written one, nor the other way round.
    plain = fetch(str(base), dest, store=store)
    assert not plain.skipped and (dest / "tokenizer_config.json").read_bytes() == (
        base / "tokenizer_config.json").read_bytes()
    assert not fetch(str(base), dest, model_folder=True, store=store).skipped


def test_fetch_model_folder_leaves_a_folder_burnqed_wrote_byte_for_byte(tmp_path: Path, store: Store) -> None:
    from burnqed.policy.modelfolder import write_folder

    export = tmp_path / "run" / "iter_0" / "export"
    write_folder(deepseek_shaped_base(tmp_path / "base"), export)
    fetch(str(export), tmp_path / "policy", model_folder=True, store=store)
    for path in export.iterdir():
        assert (tmp_path / "policy" / path.name).read_bytes() == path.read_bytes(), path.name


def test_fetch_model_folder_refuses_what_it_cannot_write(tmp_path: Path, store: Store) -> None:
    base = deepseek_shaped_base(tmp_path / "base")
    (base / "tokenizer.json").unlink()
    with pytest.raises(InputError, match=f"cannot serve {base}: .* has no tokenizer.json"):
        fetch(str(base), tmp_path / "a", model_folder=True, store=store)
    assert not (tmp_path / "a").exists() and not (tmp_path / ".a.partial").exists()
    result = cli("fetch", str(base / "config.json"), str(tmp_path / "b"), "--model-folder")
    assert result.returncode == 2
    assert result.stderr == f"error: {base / 'config.json'} is not a model folder (no config.json)\n"
