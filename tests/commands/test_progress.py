"""Progress that shows the science: theorems solved so far and the rate on every eval and search progress line, the
machinery (theorems in flight, policy batches, Lean workers) only with `-v` or BURNQED_LOG_LEVEL=INFO."""

from __future__ import annotations

import io
import logging
import os
import re
import sys
import time

import pytest

from burnqed.base import progress
from burnqed.commands.kit import LOG_LEVEL_ENV, verbose_callback
from burnqed.records.results import FailureReason, TheoremResult
from burnqed.search.monitor import SolveTally
from tests.processes import cli

LINE = re.compile(r"^searching: (\d+)/3 \(\d+\.\d/s, (?:done|ETA \S+)\)(.*)$")


def result(name: str, proved: bool) -> TheoremResult:
    return TheoremResult(name=name, proved=proved, failure_reason=None if proved else FailureReason.MAX_NODES)


def lines_of(monkeypatch: pytest.MonkeyPatch, show_detail: bool | None) -> list[str]:
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    monkeypatch.setattr(progress, "LOG_EVERY_S", 0.05)
    tally = SolveTally()
    with progress.progress_bar("searching", total=3, status=tally.line, detail=lambda: "in flight 3/4",
                               show_detail=show_detail) as advance:
        time.sleep(0.12)  # nothing finished yet: the ticker reports the machinery alone, or nothing after the rate
        tally.add(result("a", True))
        advance(1)
        tally.add(result("b", False), result("c", True))
        advance(2)
    return stream.getvalue().splitlines()


def test_progress_lines_show_solved_so_far_and_the_machinery_only_when_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    quiet = lines_of(monkeypatch, show_detail=False)
    assert len(quiet) >= 2 and all(LINE.match(line) for line in quiet), quiet
    assert LINE.match(quiet[0]).groups() == ("0", "")  # type: ignore[union-attr]
    assert LINE.match(quiet[-1]).groups() == ("3", " · solved 2/3 (66.7 %)")  # type: ignore[union-attr]
    assert not any("in flight" in line for line in quiet)

    verbose = lines_of(monkeypatch, show_detail=True)
    assert LINE.match(verbose[0]).groups() == ("0", " · in flight 3/4")  # type: ignore[union-attr]
    assert LINE.match(verbose[-1]).groups() == ("3", " · solved 2/3 (66.7 %) · in flight 3/4")  # type: ignore[union-attr]


def test_the_machinery_shows_when_burnqeds_info_lines_do(monkeypatch: pytest.MonkeyPatch,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="burnqed")
    assert not progress.verbose()
    assert "in flight" not in lines_of(monkeypatch, show_detail=None)[-1]
    caplog.set_level(logging.INFO, logger="burnqed")
    assert progress.verbose()
    assert lines_of(monkeypatch, show_detail=None)[-1].endswith(" · solved 2/3 (66.7 %) · in flight 3/4")


def test_the_tally_counts_distinct_theorems_solved_by_any_pass() -> None:
    tally = SolveTally()
    assert tally.line() == ""
    tally.add(result("thm_a", True), result("thm_b", False), result("thm_c", True), result("thm_d", False))
    assert tally.line() == "solved 2/4 (50.0 %)"
    tally.add(result("thm_a", True), result("thm_b", True))  # pass 2: thm_b now solved, thm_a counted once
    assert tally.line() == "solved 3/4 (75.0 %)"
    tally.add(result("thm_c", False), result("thm_d", False))  # a later failure does not unsolve thm_c
    assert tally.line() == "solved 3/4 (75.0 %)"


@pytest.mark.parametrize(("before", "after"), [
    (None, "INFO"), ("WARNING", "INFO"), ("error", "INFO"), ("DEBUG", "DEBUG"), ("info", "info"),
    ("loud", "loud"),  # not a level: left for `configure` to refuse by name
])
def test_dash_v_asks_for_info_lines_unless_the_environment_asks_for_more(
    monkeypatch: pytest.MonkeyPatch, before: str | None, after: str
) -> None:
    # First a value monkeypatch records the variable's state before the test from, so that it puts that state back
    # (a delenv of a variable that is not set records nothing, and the -v below would outlive the test)
    monkeypatch.setenv(LOG_LEVEL_ENV, "WARNING")
    if before is None:
        monkeypatch.delenv(LOG_LEVEL_ENV)
    else:
        monkeypatch.setenv(LOG_LEVEL_ENV, before)
    assert verbose_callback(True) is True
    assert os.environ[LOG_LEVEL_ENV] == after
    monkeypatch.setenv(LOG_LEVEL_ENV, "WARNING")
    verbose_callback(False)
    assert os.environ[LOG_LEVEL_ENV] == "WARNING"


@pytest.mark.slow  # one command
def test_a_log_level_that_is_none_is_one_line_exit_2() -> None:
    done = cli("config", "show", env={LOG_LEVEL_ENV: "loud"})
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == ("error: BURNQED_LOG_LEVEL='loud' is not a log level: use one of DEBUG, INFO, WARNING, "
                           "ERROR, CRITICAL (or -v for INFO)\n")


def test_an_evals_machinery_names_the_pass_it_is_in_when_there_are_several() -> None:
    from burnqed.eval.run import _machinery
    from burnqed.search.monitor import SearchMonitor

    first, second = SearchMonitor(concurrency=4), SearchMonitor(concurrency=4)
    second.sample()
    assert _machinery([first], 1) == "starting"
    assert _machinery([first, second], 3) == "pass 2/3 · in flight 0/4"
