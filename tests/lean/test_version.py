"""Pantograph versions: the `--version` probe, detection once per pool, the override, unsupported versions,
and the replay server's emulation of each version's reply shapes."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from burnqed.config import LeanConfig, load_config
from burnqed.errors import ConfigError, LeanProtocolError
from burnqed.lean.client import LeanWorker
from burnqed.lean.pool import LeanPool
from leankit.corpus import load_corpus
from leankit.failures import BadInput, LeanStartFailure
from leankit.version import (
    PantographVersion,
    detect_lean_version,
    detect_version,
    supported_version,
    version_probe_argv,
)
from minilean.replay.replay_server import ReplayServer
from tests.conftest import double_argv

V = PantographVersion.parse


@pytest.mark.parametrize(
    ("argv", "probe"),
    [
        (["repl", "Mathlib"], ["repl", "--version"]),
        (["lake", "env", "repl", "Mathlib"], ["lake", "env", "repl", "--version"]),
        (["lake", "exe", "repl", "Mathlib.Tactic", "Aesop", "--maxHeartbeats=400000"], ["lake", "exe", "repl",
                                                                                          "--version"]),
        (["/opt/pantograph/.lake/build/bin/repl"], ["/opt/pantograph/.lake/build/bin/repl", "--version"]),
        (["{python}", "-m", "minilean.replay"], ["{python}", "-m", "minilean.replay", "--version"]),
        (["python", "-m", "minilean.replay", "--corpus", "/data/c.json", "Mathlib"],
         ["python", "-m", "minilean.replay", "--corpus", "/data/c.json", "--version"]),
        (["Mathlib"], ["Mathlib", "--version"]),  # never drops the program itself
    ],
)
def test_the_probe_drops_the_repl_arguments(argv: list[str], probe: list[str]) -> None:
    assert version_probe_argv(argv) == probe


def test_versions_parse_order_and_their_protocol_differences() -> None:
    assert V("v0.3.4") == V("0.3.4") > V("0.3.2") > V("0.2.25")
    with pytest.raises(ValueError, match="not a version"):
        V("0.3")
    assert (V("0.3.2").goal_id_required, V("0.3.3").goal_id_required) == (True, False)
    assert (V("0.3.1").invocations_is_path, V("0.3.2").invocations_is_path) == (False, True)
    assert (V("0.3.0").sorry_flags, V("0.3.1").sorry_flags) == (False, True)
    assert (V("0.3.3").message_objects, V("0.3.4").message_objects) == (False, True)
    assert (V("0.2.25").header_flags, V("0.3.0").header_flags) == (False, True)
    assert (V("0.2.25").repl_scope, V("0.3.0").repl_scope) == (False, True)
    assert (V("0.3.6").process_sorrys, V("0.3.7").process_sorrys) == (True, False)
    assert (V("0.3.5").distil, V("0.3.6").distil) == (False, True)
    assert (V("0.3.4").interrupt_kind, V("0.3.5").interrupt_kind) == ("internal", "io")


@pytest.mark.parametrize(("line", "protocol", "lean"), [
    ("0.3.15", "0.3.15", None), ("0.3.16", "0.3.16", None), ("0.3.7/v4.21.0", "0.3.7", "v4.21.0"),
    ("v0.3.4", "0.3.4", None), ("0.3.12/v4.25.2", "0.3.12", "v4.25.2"),
])
def test_current_version_lines_are_read_and_accepted(line: str, protocol: str, lean: str | None) -> None:
    version = supported_version(line)
    assert (version.protocol, version.lean, str(version)) == (protocol, lean, line.removeprefix("v"))
    assert version == V(protocol)  # the Lean part is not part of the protocol


@pytest.mark.parametrize("line", ["0.3.99", "0.3.17", "0.2.24", "1.0.0", "0.3.99/v4.30.0"])
def test_unknown_versions_are_refused_by_name(line: str) -> None:
    with pytest.raises(BadInput) as refused:
        supported_version(line)
    assert str(refused.value).startswith(f"unsupported Pantograph {line} (supported: 0.2.25, 0.3.0-0.3.16;")
    with pytest.raises(BadInput, match="is not a version"):
        supported_version("0.3.7/4.21")


def lean_version_in(folder: Path, script: str | None) -> str:
    """`detect_lean_version` with PATH = `folder` only, holding a `lean` that runs `script` (none: no `lean`)."""
    folder.mkdir(exist_ok=True)
    if script is not None:
        (folder / "lean").write_text(f"#!/bin/sh\n{script}\n")
        (folder / "lean").chmod(0o755)
    return asyncio.run(detect_lean_version(cwd=str(folder), env={"PATH": f"{folder}:/bin:/usr/bin"}, timeout_s=10))


def test_the_lean_version_is_read_from_lean_itself(tmp_path: Path) -> None:
    line = "Lean (version {}, x86_64-unknown-linux-gnu, commit 8f9843a4a5fe, Release)"
    assert lean_version_in(tmp_path / "a", f"echo '{line.format('4.29.1')}'") == "4.29.1"
    assert lean_version_in(tmp_path / "b", f"echo '{line.format('4.30.0-rc1')}'") == "4.30.0-rc1"
    assert lean_version_in(tmp_path / "c", "echo 'Lean (version 4.9.0)'") == "4.9.0"
    # it runs in the workers' folder, where elan reads lean-toolchain
    folder = tmp_path / "d"
    assert lean_version_in(folder, f'test "$PWD" = "{folder}" && echo "Lean (version 4.21.0)"') == "4.21.0"
    with pytest.raises(LeanStartFailure, match=r"^cannot run `lean --version` to learn the Lean version: .*Put "
                                             r"Lean's `lean` \(or elan's\) on the workers' PATH"):
        lean_version_in(tmp_path / "e", None)
    with pytest.raises(LeanStartFailure, match=r"^`lean --version` printed no Lean version \(exit 3, stdout 'no', "
                                             r"stderr 'toolchain not installed'\)"):
        lean_version_in(tmp_path / "f", "echo no; echo 'toolchain not installed' >&2; exit 3")


def detect(argv: list[str], timeout_s: float = 20.0) -> PantographVersion:
    # PYTHONPATH passes on so the doubles import the burnqed under test (as a worker's sealed environment does).
    env = {"PATH": "/usr/bin:/bin", **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"}}
    return asyncio.run(detect_version(argv, cwd=None, env=env, timeout_s=timeout_s))


@pytest.mark.slow
@pytest.mark.parametrize("version", ["0.2.25", "0.3.2", "0.3.4"])
def test_detection_asks_the_double_and_the_replay_server(version: str) -> None:
    assert detect(double_argv("--pantograph-version", version, "Mathlib")) == V(version)
    replay = [sys.executable, "-m", "minilean.replay", "--pantograph-version", version, "Mathlib"]
    assert detect(replay) == V(version)


@pytest.mark.slow
def test_repl_refuses_version_after_modules_like_pantograph() -> None:
    # Main.lean prints the version only for `args == ["--version"]`; the probe must drop `Mathlib` first.
    for argv in (double_argv("Mathlib", "--version"), [sys.executable, "-m", "minilean.replay", "Mathlib",
                                                         "--version"]):
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
        assert done.returncode == 1 and done.stdout == ""
        assert "Options cannot be parsed" in done.stderr


@pytest.mark.slow
def test_unknown_and_unsupported_versions_are_refused_with_one_line() -> None:
    with pytest.raises(BadInput, match=r"unsupported Pantograph 0\.3\.99 \(supported: 0\.2\.25, 0\.3\.0-0\.3\.16"):
        detect(double_argv("--pantograph-version", "0.3.99"))
    # A backport build's line names its Lean; the protocol is X.Y.Z's.
    assert detect(double_argv("--pantograph-version", "0.3.7/v4.21.0")) == V("0.3.7")
    with pytest.raises(LeanStartFailure, match=r"did not print a Pantograph version.*set lean\.pantograph_version"):
        detect(["/bin/echo", "ready."])
    with pytest.raises(LeanStartFailure, match="cannot run `/nonexistent/repl --version`"):
        detect(["/nonexistent/repl", "Mathlib"])
    with pytest.raises(LeanStartFailure, match=r"printed no version within 0\.5s"):
        detect(["/bin/sh", "-c", "sleep 30"], timeout_s=0.5)
    with pytest.raises(ConfigError, match=r"^invalid configuration: lean.pantograph_version: .*unsupported "
                       r"Pantograph 0\.3\.17 \(supported: "):
        load_config(sets=["lean.pantograph_version=0.3.17"])
    assert load_config(sets=["lean.pantograph_version=0.3.15"]).lean.pantograph_version == "0.3.15"
    with pytest.raises(ConfigError, match="'three' is not a version"):
        load_config(sets=["lean.pantograph_version=three"])
    assert load_config(sets=["lean.pantograph_version=v0.3.2"]).lean.pantograph_version == "0.3.2"


@pytest.mark.slow
def test_a_pool_detects_once_and_the_override_skips_the_probe(tmp_path: Path) -> None:
    dump = tmp_path / "env.jsonl"
    command = double_argv("--pantograph-version", "0.3.2", "--env-dump", str(dump))

    async def run(config: LeanConfig) -> PantographVersion | None:
        async with LeanPool.from_config(config, size=3) as pool:
            async with pool.lease() as lean:
                assert (await lean.tactic(await lean.start_goal(expr="p"), "done")).closed_all_goals
            return pool.version

    assert asyncio.run(run(LeanConfig(command=command))) == V("0.3.2")
    assert len(dump.read_text().splitlines()) == 4  # one probe, three workers
    dump.unlink()
    assert asyncio.run(run(LeanConfig(command=command, pantograph_version="0.3.2"))) == V("0.3.2")
    assert len(dump.read_text().splitlines()) == 3  # no probe


def test_a_wrong_override_is_refused_by_the_strict_double() -> None:
    async def run() -> None:
        # lean.pantograph_version says 0.3.4 but the REPL is 0.2.25: its FrontendProcess needs `invocations`.
        async with LeanWorker(double_argv("--pantograph-version", "0.2.25"), version=V("0.3.4")) as lean:
            with pytest.raises(LeanProtocolError, match=r"FrontendProcess\.invocations: Bool expected"):
                await lean.compile("theorem t : p := by\n  done\n")

    asyncio.run(run())


def replay(version: str) -> ReplayServer:
    return ReplayServer(load_corpus(), version=V(version))


def ask(server: ReplayServer, command: str, payload: dict[str, object]) -> dict[str, object]:
    reply = json.loads(server.handle(f"{command} {json.dumps(payload, ensure_ascii=False)}"))
    assert isinstance(reply, dict)
    return reply


@pytest.mark.slow
def test_replay_shapes_per_version() -> None:
    new, mid, old = replay("0.3.4"), replay("0.3.2"), replay("0.3.0")
    for server in (new, mid, old):
        started = ask(server, "goal.start", {"copyFrom": "logic_or_comm"})
        assert started["stateId"] == 0
        # Before any tactic the root is unassigned: no `root`, and (from 0.3.1) every flag false.
        printed = ask(server, "goal.print", {"stateId": 0, "rootExpr": True})
        assert "root" not in printed
    assert ask(new, "goal.print", {"stateId": 0, "rootExpr": True})["rootHasMVar"] is False
    assert "rootHasMVar" not in ask(old, "goal.print", {"stateId": 0, "rootExpr": True})
    # 0.3.2 needs goalId; later versions do not.
    assert ask(mid, "goal.tactic", {"stateId": 0, "tactic": "intro p q h"}) == {
        "error": "command", "desc": "Unable to parse json: Pantograph.Protocol.GoalTactic.goalId: Natural number "
                                    "expected"}
    assert "nextStateId" in ask(new, "goal.tactic", {"stateId": 0, "tactic": "intro p q h"})
    ok = ask(mid, "goal.tactic", {"stateId": 0, "goalId": 0, "tactic": "intro p q h"})
    assert ok["goals"][0]["isConversion"] is False and "fragment" not in ok["goals"][0]  # type: ignore[index]
    failed = ask(mid, "goal.tactic", {"stateId": 0, "goalId": 0, "tactic": "positivity"})
    assert isinstance(failed["messages"][0], str)  # type: ignore[index]
    assert (failed["hasSorry"], failed["hasUnsafe"]) == (False, False)
    legacy = ask(old, "goal.tactic", {"stateId": 0, "goalId": 0, "tactic": "positivity"})
    assert list(legacy) == ["tacticErrors"]
    success = ask(old, "goal.tactic", {"stateId": 0, "goalId": 0, "tactic": "intro p q h"})
    assert sorted(success) == ["goals", "nextStateId"]


def test_replay_frontend_per_version(tmp_path: Path) -> None:
    text = "import Mathlib\ntheorem logic_or_comm : ∀ (p q : Prop), p ∨ q → q ∨ p := by\n  intro p q h\n  sorry\n"
    flags = {"readHeader": False, "inheritEnv": False, "sorrys": False, "typeErrorsAsGoals": False,
             "newConstants": True}
    units = ask(replay("0.3.2"), "frontend.process", {"file": text, **flags})["units"]
    assert isinstance(units, list)
    # With readHeader false the text runs in the REPL's environment, where `import` is an error.
    assert units[0]["messages"] == [
        "<anonymous>:1:0: error: invalid 'import' command, it must be used in the beginning of the file\n"]
    assert units[1]["messages"] == ["<anonymous>:2:8: warning: declaration uses 'sorry'\n"]
    assert units[1]["newConstants"] == ["logic_or_comm"]
    header = ask(replay("0.3.2"), "frontend.process", {"file": text, **flags, "readHeader": True})["units"]
    assert isinstance(header, list) and len(header) == 1
    assert ask(replay("0.3.2"), "frontend.process", {"file": text, **flags, "invocations": False}) == {
        "error": "command",
        "desc": "Unable to parse json: Pantograph.Protocol.FrontendProcess.invocations?: String expected"}
    out = tmp_path / "invocations.json"
    with_path = ask(replay("0.3.4"), "frontend.process", {"file": text, **flags, "readHeader": True,
                                                          "invocations": str(out)})["units"]
    assert isinstance(with_path, list) and with_path[0]["nInvocations"] == 2
    assert json.loads(out.read_text())["units"][0]["invocations"][0]["tactic"] == "intro p q h"
    printed = ask(replay("0.3.4"), "frontend.process", {
        "file": text.replace("import Mathlib\n", "").replace("sorry", "exact h.symm") + "\n#print axioms "
        "logic_or_comm\n#print axioms nothing\n", **flags})["units"]
    assert isinstance(printed, list)
    assert [unit["messages"] for unit in printed[:1]] == [[]]
    report, unknown = (unit["messages"][0] for unit in printed[1:])
    assert report["severity"] == "information"
    assert report["data"] == "'logic_or_comm' depends on axioms: [propext, Classical.choice, Quot.sound]"
    assert (unknown["severity"], unknown["data"]) == ("error", "unknown constant 'nothing'")
