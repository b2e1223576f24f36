"""`burnqed fetch URI DIR`: the model folder a sidecar serves, downloaded atomically with its ready file last; a
finished output fetched twice is downloaded once; unfinished outputs are refused with --require-done."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from burnqed import storage
from burnqed.cluster.fetch import READY_NAME, fetch
from burnqed.errors import InputError
from burnqed.storage import Store


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
def test_fetch_from_s3(s3_root: str, tmp_path: Path, cli, store: Store) -> None:
    uri = f"{s3_root}/iter_1/export"
    publish(uri, {"config.json": "{}", "model.safetensors": "x" * 5000}, store=store)
    result = CliRunner().invoke(cli, ["fetch", uri, str(tmp_path / "policy"), "--require-done"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"fetched {uri} -> {tmp_path / 'policy'} (3 files, ")
    assert (tmp_path / "policy" / "model.safetensors").read_text() == "x" * 5000
    assert (tmp_path / "policy" / READY_NAME).is_file()
    result = CliRunner().invoke(cli, ["fetch", uri, str(tmp_path / "policy")])
    assert result.stdout == f"{tmp_path / 'policy'} already holds {uri}\n"


def test_fetch_errors_are_one_line(tmp_path: Path, cli) -> None:
    result = CliRunner().invoke(cli, ["fetch", str(tmp_path / "missing"), str(tmp_path / "out")])
    assert result.exit_code == 2
    assert result.stderr == f"error: {tmp_path / 'missing'} does not exist\n"
