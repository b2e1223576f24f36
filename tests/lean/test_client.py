"""The Pantograph client against a real subprocess: the fault-injecting double."""

from __future__ import annotations

import asyncio
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from burnqed.errors import LeanCrashError, LeanProtocolError, LeanStartError
from burnqed.lean.client import LeanWorker, child_setup
from burnqed.records.replies import TacticKind
from leankit.version import PantographVersion
from tests.conftest import double_argv


def worker(*flags: str, timeout: float = 5.0, ready: float = 5.0) -> LeanWorker:
    return LeanWorker(double_argv(*flags), tactic_timeout_s=timeout, watchdog_grace_s=0.2, ready_timeout_s=ready)


async def spawned(lean: LeanWorker) -> int:
    """The pid of the process `lean.start()` (running as a task) has spawned, once it runs."""
    for _ in range(500):
        if lean.pid is not None:
            assert not group_is_gone(lean.pid)
            return lean.pid
        await asyncio.sleep(0.01)
    raise AssertionError("the worker spawned no process within 5 s")


def group_is_gone(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.slow
def test_commands_round_trip(tmp_path: Path):
    log = tmp_path / "requests.log"

    async def run() -> None:
        async with worker("--log", str(log)) as lean:
            state = await lean.start_goal(expr="∀ (n : ℕ), n = n")
            assert state == 0
            result = await lean.tactic(state, "intro n")
            assert result.kind is TacticKind.SUCCESS
            assert result.state_id == 1
            assert result.goals[0].pretty() == "x : ℕ\n⊢ after intro n"
            assert (await lean.goals(state))[0].target == "start"
            info = await lean.root_info(1)
            assert info.has_mvar and not info.has_sorry
            assert await lean.stat() == 2
            await lean.delete([1])
            assert await lean.stat() == 1
            assert (await lean.compile("theorem t : True := by\n  trivial\n")).ok
            assert await lean.reset() == 1
            assert await lean.stat() == 0
            assert lean.requests == 11  # options.set at start + 10 above
            with pytest.raises(LeanProtocolError, match="elab: unknown identifier"):
                await lean.start_goal(expr="bad statement")

    asyncio.run(run())
    first = log.read_text(encoding="utf-8").splitlines()[0]
    assert first == 'options.set {"timeout":5000,"automaticMode":true}'


@pytest.mark.slow
def test_a_line_printed_before_a_compiles_reply_is_caught_by_the_echo_after_it():
    """Code in a compiled file (an `#eval` writing to stdout) prints a line that reads as a reply: here the double's
    reply to an honest twin of the file, the same length, before its own. The echo sent after the compile reads the
    double's own reply instead of its answer: the compile raises (a failed verdict) and the next gets a new process."""
    async def run() -> None:
        async with worker() as lean:
            honest = await lean.compile("theorem t : True := by\n  trivial\n")
            assert honest.ok
            first = lean.pid
            with pytest.raises(LeanCrashError, match="not the echo of the number sent after it"):
                await lean.compile("theorem t : True := by\n  forged_reply\n")
            assert (await lean.compile("theorem t : True := by\n  trivial\n")).ok
            assert lean.pid != first

    asyncio.run(run())


@pytest.mark.slow
def test_watchdog_kills_hung_worker_and_next_request_respawns():
    async def run() -> None:
        async with worker(timeout=0.3) as lean:
            state = await lean.start_goal(expr="p")
            old_pid = lean.pid
            assert old_pid is not None
            started = time.monotonic()
            result = await lean.tactic(state, "hang")
            assert time.monotonic() - started < 2.0
            assert result.kind is TacticKind.TIMEOUT
            assert result.states_lost
            assert not lean.alive
            assert group_is_gone(old_pid)
            assert await lean.start_goal(expr="p") == 0
            assert lean.generation == 2
            assert lean.pid != old_pid

    asyncio.run(run())


@pytest.mark.parametrize(
    ("word", "message"),
    [
        ("crash", "killed by signal 9 (exit 137)"),
        ("garbage", "not JSON"),
        ("partial", "partial line of 21 bytes"),
        ("eof", "exited with code 0"),
    ],
)
@pytest.mark.slow
def test_crashes_are_values_and_worker_recovers(word: str, message: str):
    async def run() -> None:
        async with worker() as lean:
            state = await lean.start_goal(expr="p")
            pid = lean.pid
            assert pid is not None
            result = await lean.tactic(state, word)
            assert result.kind is TacticKind.CRASH
            assert result.states_lost
            assert message in result.errors[0]
            assert group_is_gone(pid)
            state = await lean.start_goal(expr="p")
            assert (await lean.tactic(state, "done")).closed_all_goals

    asyncio.run(run())


def test_crash_during_goal_start_raises_typed_error():
    from burnqed.errors import LeanCrashError

    async def run() -> None:
        async with worker() as lean:
            with pytest.raises(LeanCrashError, match="exit 137"):
                await lean.start_goal(expr="crash")

    asyncio.run(run())


@pytest.mark.slow
def test_lean_side_interrupt_keeps_the_worker():
    async def run() -> None:
        async with worker() as lean:
            state = await lean.start_goal(expr="p")
            pid = lean.pid
            result = await lean.tactic(state, "interrupt")
            assert result.kind is TacticKind.TIMEOUT
            assert not result.states_lost
            assert lean.pid == pid and lean.alive

    asyncio.run(run())


@pytest.mark.slow
def test_reply_over_one_megabyte():
    async def run() -> None:
        async with worker() as lean:
            state = await lean.start_goal(expr="p")
            result = await lean.tactic(state, "huge:3000000")
            assert result.kind is TacticKind.SUCCESS
            assert len(result.goals[0].target) == 3_000_004

    asyncio.run(run())


@pytest.mark.slow
def test_characters_outside_the_basic_plane_travel_raw(tmp_path: Path):
    log = tmp_path / "requests.log"
    text = "echo 𝔽 𝕜 ∀ x ∈ ℝ, ⊢ 🎉"

    async def run() -> None:
        async with worker("--log", str(log)) as lean:
            state = await lean.start_goal(expr="∀ (x : 𝔽), x = x")
            result = await lean.tactic(state, text)
            assert result.goals[0].target == text

    asyncio.run(run())
    raw = log.read_bytes()
    assert "𝔽 𝕜 ∀ x ∈ ℝ, ⊢ 🎉".encode() in raw
    assert b"\\u" not in raw


@pytest.mark.slow
def test_slow_ready_within_deadline_and_preamble():
    async def run() -> None:
        async with worker("--ready-delay", "0.3", "--preamble", "loading Mathlib") as lean:
            assert lean.preamble == ["loading Mathlib"]
            assert await lean.start_goal(expr="p") == 0

    asyncio.run(run())


@pytest.mark.slow
def test_ready_deadline_is_a_start_error():
    async def run() -> None:
        lean = worker("--ready-delay", "30", ready=0.3)
        starting = asyncio.create_task(lean.start())
        pid = await spawned(lean)
        started = time.monotonic()  # the deadline runs from here, not the 30 s the process would take
        with pytest.raises(LeanStartError, match=r"no `ready.` within lean.ready_timeout_s=0.3s"):
            await starting
        assert time.monotonic() - started < 2.0
        assert not lean.alive
        assert group_is_gone(pid)  # the process that never got ready is killed and reaped

    asyncio.run(run())


@pytest.mark.slow
def test_exit_without_ready_is_a_clear_configuration_error():
    async def run() -> None:
        lean = worker("--no-ready", "1")
        with pytest.raises(LeanStartError) as info:
            await lean.start()
        text = str(info.value)
        assert "exited with code 1 before printing `ready.`" in text
        assert "unknown package 'Mathlib'" in text
        assert "not retried" in text

    asyncio.run(run())


@pytest.mark.slow
def test_the_error_quotes_what_lean_wrote_on_stderr_after_its_stdout_ended():
    # What a dying Lean writes last may reach its stderr pipe after the end of its stdout was seen (here a child it
    # leaves behind writes it 0.3 s later): the start error waits for the pipe to close before quoting it, instead of
    # quoting whatever the drain had read by then. (A crash mid-request is quoted once the process is reaped, which
    # kills such a child: there the pipe holds only what the dead process wrote, and `_reap` reads it to the end.)
    late = "exec 1>&-; (sleep 0.3; echo 'error: the last words' >&2) & exit 3"

    async def run() -> None:
        lean = LeanWorker(["/bin/sh", "-c", late], version=PantographVersion(0, 3, 4), ready_timeout_s=10)
        with pytest.raises(LeanStartError) as info:
            await lean.start()
        await lean.close()
        assert "exited with code 3 before printing `ready.`" in str(info.value)
        assert str(info.value).endswith(" stderr: error: the last words")

    asyncio.run(run())


def test_missing_executable_is_a_start_error():
    async def run() -> None:
        lean = LeanWorker(["/nonexistent/repl", "Mathlib"])
        # The first thing run is the version probe (`repl --version`, the module argument dropped).
        with pytest.raises(LeanStartError, match=r"cannot run `/nonexistent/repl --version`.*Check lean.command"):
            await lean.start()
        lean = LeanWorker(["/nonexistent/repl", "Mathlib"], version=PantographVersion(0, 3, 4))
        with pytest.raises(LeanStartError, match="cannot start Lean worker"):
            await lean.start()

    asyncio.run(run())


@pytest.mark.slow
def test_stderr_flood_is_drained():
    async def run() -> None:
        # 1 MB on stderr before `ready.` would block the process on a full pipe if nobody read it.
        async with worker("--stderr-bytes", "1000000", ready=5.0) as lean:
            assert await lean.start_goal(expr="p") == 0
            assert lean.stderr_tail()

    asyncio.run(run())


@pytest.mark.slow
def test_false_finishes_from_the_double_are_not_closed():
    async def run() -> None:
        async with worker() as lean:
            state = await lean.start_goal(expr="p")
            outcomes = {word: await lean.tactic(state, word)
                        for word in ("sorry", "nogoals", "nullstate", "parse", "strmsg", "legacy-err", "error")}
            assert outcomes["sorry"].closed_all_goals and outcomes["sorry"].has_sorry
            assert outcomes["parse"].kind is TacticKind.PARSE_ERROR
            for word in ("nogoals", "nullstate", "strmsg", "legacy-err", "error"):
                assert outcomes[word].kind is TacticKind.ERROR, word
                assert not outcomes[word].closed_all_goals
            # A v0.2 success lacks hasSorry/hasUnsafe, which 0.3.4 always sends: not a success from 0.3.4.
            legacy = await lean.tactic(state, "legacy-ok")
            assert legacy.kind is TacticKind.ERROR and "lacks Bool hasSorry/hasUnsafe" in legacy.errors[0]
            for word in ("noflags",):
                assert (await lean.tactic(state, word)).kind is TacticKind.ERROR

    asyncio.run(run())
    old = worker("--pantograph-version", "0.2.25")

    async def run_old() -> None:
        async with old as lean:
            assert lean.version == PantographVersion(0, 2, 25)
            state = await lean.start_goal(expr="p")
            legacy = await lean.tactic(state, "legacy-ok")
            assert legacy.kind is TacticKind.SUCCESS and legacy.goals[0].target == "p"
            assert not legacy.flags_reported

    asyncio.run(run_old())


@pytest.mark.slow
def test_cancelled_request_never_answers_the_next_one():
    async def run() -> None:
        async with worker() as lean:
            state = await lean.start_goal(expr="p")
            pid = lean.pid
            assert pid is not None
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.2):
                    await lean.tactic(state, "sleep:500")
            assert not lean.alive
            state = await lean.start_goal(expr="p")  # respawns; the killed process is reaped first
            assert group_is_gone(pid)
            result = await lean.tactic(state, "echo fresh")
            assert result.goals[0].target == "echo fresh"

    asyncio.run(run())


@pytest.mark.slow
def test_cancelled_start_leaves_nothing_running():
    async def run() -> None:
        lean = worker("--ready-delay", "5")
        starting = asyncio.create_task(lean.start())
        pid = await spawned(lean)  # it now waits 5 s before `ready.`
        starting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await starting
        assert not lean.alive
        await lean.close()  # waits for the background reaper
        assert group_is_gone(pid)  # killed, not merely forgotten

    asyncio.run(run())


# What a child started with `child_setup` holds: its RLIMIT_DATA and its parent-death signal (prctl PR_GET_PDEATHSIG).
_LIMITS = ("import ctypes, resource; sig = ctypes.c_int(); ctypes.CDLL(None).prctl(2, ctypes.byref(sig), 0, 0, 0); "
           "print(resource.getrlimit(resource.RLIMIT_DATA)[0], sig.value)")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl and RLIMIT_DATA as Linux has them")
@pytest.mark.parametrize(("memory_limit_mb", "data"), [(300, 300 * 2**20), (0, resource.RLIM_INFINITY)])
def test_a_worker_child_dies_with_its_parent_and_holds_its_memory_limit(memory_limit_mb: int, data: int) -> None:
    """The memory limit is set beside `dies_with_parent`, not in its place (0: no limit of its own)."""
    if memory_limit_mb == 0 and resource.getrlimit(resource.RLIMIT_DATA)[0] != resource.RLIM_INFINITY:
        pytest.skip("this process runs under a data limit of its own")
    done = subprocess.run([sys.executable, "-c", _LIMITS], preexec_fn=child_setup(memory_limit_mb),
                          capture_output=True, text=True, check=True)
    assert done.stdout.split() == [str(data), "9"]  # SIGKILL
