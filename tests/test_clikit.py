"""`clikit.setup` and `clikit.already_done`: the preamble every stage command starts with."""

from __future__ import annotations

from pathlib import Path

import pytest

from burnqed.commands.kit import already_done, setup
from burnqed.errors import InputError
from burnqed.provenance import InputStamp, StageInputs, when
from burnqed.storage import MARKER_NAME, Store


def test_setup_builds_the_configuration_and_store_and_checks_the_output(tmp_path: Path) -> None:
    cfg, store = setup(None, ["lean.workers=3"], output=str(tmp_path / "out"), folder=True)
    assert cfg.lean.workers == 3 and isinstance(store, Store)
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="--cache"):  # a file where a folder is expected, named by its flag
        setup(None, None, output=str(tmp_path / "file"), what="--cache", folder=True)


def test_already_done_reuses_the_same_inputs_refuses_others_and_redoes_when_forced(
    tmp_path: Path, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "prepared")
    made = StageInputs(inputs={"--data": InputStamp(uri="file:///d", stamp="0123456789abcdef")},
                       settings={"--iter": 0, "data.split_salt": "x"})
    assert not already_done(store, out, "prepared-data output", made_from=made)  # nothing there yet
    with store.staged_output(out, "prepare-data", made_from=made) as folder:
        (folder / "theorems.json").write_text("{}")
    marker = store.read_marker(out)
    assert marker is not None and marker.made_from == made  # recorded in the completion marker
    assert not already_done(store, out, "prepared-data output", made_from=made, force=True)
    assert capsys.readouterr().out == ""
    assert already_done(store, out, "prepared-data output", made_from=made)
    assert capsys.readouterr().out == (f"reusing {out} (finished {when(marker.written_at)}, same inputs); --force "
                                       "redoes it\n")
    salted = made.model_copy(update={"settings": {"--iter": 0, "data.split_salt": "y"}})
    with pytest.raises(InputError) as refused:
        already_done(store, out, "prepared-data output", made_from=salted)
    assert str(refused.value) == (f"{out} is a finished prepared-data output made with other inputs: data.split_salt "
                                  "was 'x', now 'y'; --force redoes it, or choose another --output")
    assert not already_done(store, out, "prepared-data output", made_from=salted, force=True)
    assert capsys.readouterr().out == ""


def test_an_output_made_before_inputs_were_recorded_is_reused_saying_so(
    tmp_path: Path, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sft"
    out.mkdir()
    (out / MARKER_NAME).write_text('{"stage": "sft", "written_at": "2026-11-20T08:30:00Z", "files": {}}')
    assert already_done(store, str(out), "sft output", made_from=StageInputs(settings={"--iter": 0}))
    assert capsys.readouterr().out == (f"reusing {out} (finished 2026-11-20 08:30:00 UTC, made by an older burnqed: "
                                       "its inputs were not recorded, so they could not be compared); --force redoes "
                                       "it\n")
