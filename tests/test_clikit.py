"""`clikit.setup` and `clikit.already_done`: the preamble every stage command starts with."""

from __future__ import annotations

from pathlib import Path

import pytest

from burnqed.clikit import already_done, setup
from burnqed.errors import InputError
from burnqed.storage import MARKER_NAME, Store


def test_setup_builds_the_configuration_and_store_and_checks_the_output(tmp_path: Path) -> None:
    cfg, store = setup(None, ["lean.workers=3"], output=str(tmp_path / "out"), folder=True)
    assert cfg.lean.workers == 3 and isinstance(store, Store)
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="--cache"):  # a file where a folder is expected, named by its flag
        setup(None, None, output=str(tmp_path / "file"), what="--cache", folder=True)


def test_already_done_only_with_the_marker_and_not_when_forced(tmp_path: Path, store: Store,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "prepared"
    out.mkdir()
    assert not already_done(store, str(out), "prepared")
    (out / MARKER_NAME).write_text("{}")
    assert not already_done(store, str(out), "prepared", force=True)
    assert capsys.readouterr().out == ""
    assert already_done(store, str(out), "prepared", redo="--force prepares it again")
    assert capsys.readouterr().out == (f"{out} is already prepared (its {MARKER_NAME} exists); nothing to do "
                                       "(--force prepares it again)\n")
