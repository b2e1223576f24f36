"""`commands.kit`: the preamble every stage command starts with (`setup`, `already_done`), the command boundary
(`reports_errors`) for the failures leankit raises, and the root group's one-line errors (`one_line_errors`)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import typer

from burnqed.base.signals import Terminated
from burnqed.commands.kit import already_done, one_line_errors, setup
from burnqed.errors import InputError, LeanStartError, from_leankit
from burnqed.provenance import InputStamp, StageInputs, when
from burnqed.storage import MARKER_NAME, Store
from leankit.failures import BadInput, LeankitFailure, LeanStartFailure
from tests.processes import cli


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


@pytest.mark.parametrize(("failure", "code", "error"), [
    (BadInput("corpus file c.json is not valid JSON: Expecting value: line 1 column 1 (char 0)"), 2, InputError),
    (LeanStartFailure("cannot run `repl --version` to learn the Pantograph version: [Errno 2] No such file or "
                      "directory: 'repl'. Check lean.command and lean.cwd."), 1, LeanStartError),
])
def test_a_leankit_failure_reaching_a_command_is_one_line_and_burnqeds_exit_code(
    failure: LeankitFailure, code: int, error: type[Exception], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import burnqed.cluster.fetch

    def work(*args: object, **kwargs: object) -> None:  # what `burnqed fetch` calls once its options are read
        raise failure

    monkeypatch.setattr(burnqed.cluster.fetch, "fetch", work)
    result = cli("fetch", str(tmp_path / "model"), str(tmp_path / "out"))
    assert (result.returncode, result.stdout, result.stderr) == (code, "", f"error: {failure}\n")
    assert type(from_leankit(failure)) is error and str(from_leankit(failure)) == str(failure)


def test_a_broken_corpus_source_stops_data_prepare_with_one_line(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"name": "x", "theorems": [', encoding="utf-8")
    result = cli("data", "prepare", "--output", str(tmp_path / "out"), "--set",
                 f'data.sources=[{{"kind": "bundled", "path": "{broken}"}}]')
    assert result.returncode == 2
    assert result.stderr == (f"error: corpus file {broken} is not valid JSON: Expecting value: line 1 column 28 "
                             "(char 27) (the format is in docs/replay-corpus.md)\n")


def test_a_logged_warning_reads_like_every_other_warning_line() -> None:
    """A command's logging (set up by `configure`, as every command does): a burnqed WARNING record, `eval`'s
    answer-open theorems one, prints `warning: …` beside the commands' own warning lines, not a timestamped log line;
    with BURNQED_LOG_LEVEL=INFO an INFO record keeps time, level and logger."""
    import os
    import subprocess
    import sys

    code = ("import logging\nfrom burnqed.commands.kit import configure\nconfigure(None, [])\n"
            "logging.getLogger('burnqed.eval.run').warning('%s mode does not evaluate %d theorems', 'step', 2)\n"
            "logging.getLogger('burnqed.lean.pool').info('worker %d started', 1)\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    env.pop("BURNQED_LOG_LEVEL", None)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env,
                          timeout=120)
    assert done.stderr == "warning: step mode does not evaluate 2 theorems\n"
    verbose = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env={**env, "BURNQED_LOG_LEVEL": "INFO"}, timeout=120)
    lines = verbose.stderr.splitlines()
    assert lines[0] == "warning: step mode does not evaluate 2 theorems"
    assert lines[1].endswith(" INFO burnqed.lean.pool: worker 1 started") and len(lines) == 2


@pytest.mark.parametrize(("raised", "err", "code"), [
    (typer.Abort(), "error: stopped by SIGINT\n", 130),
    (EOFError(), "\nerror: stopped by SIGINT\n", 130),  # typer's reading of an end of input: a blank line, an Abort
    (typer.BadParameter("out of range"), "error: Invalid value: out of range\n", 2),  # a usage error, no command
    (typer.TyperException("a file error"), "error: a file error\n", 1),
])
def test_one_line_errors_turns_typers_errors_and_stops_into_one_line_and_an_exit(
    raised: BaseException, err: str, code: int, capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(typer.Exit) as stopped, one_line_errors():
        raise raised
    assert stopped.value.exit_code == code
    assert capsys.readouterr() == ("", err)


def test_an_abort_caused_by_sigterm_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(typer.Exit) as stopped, one_line_errors():
        raise typer.Abort() from Terminated(signal.SIGTERM)
    assert stopped.value.exit_code == 143 and capsys.readouterr().err == "error: stopped by SIGTERM\n"
    with pytest.raises(ValueError, match="a bug"), one_line_errors():  # anything else keeps its traceback
        raise ValueError("a bug")
