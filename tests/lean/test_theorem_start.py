"""Theorems started as a Lean user's file states them (`start_theorem`): the header's opens and options hold for
the start and for every later tactic, the binders are hypotheses, and theorems with different headers share a
worker without one running under the other's scope. Against the strict double at the newest Pantograph (0.3.16,
`frontend.distil`), 0.3.4 and 0.3.2 (`frontend.process {sorrys: true}`), and the replay server."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from burnqed.errors import LeanProtocolError
from burnqed.lean.client import LeanWorker
from burnqed.lean.inprocess import InProcessReplay
from burnqed.lean.lease import LeanLease
from burnqed.lean.pool import LeanPool
from burnqed.records.replies import TacticKind
from leankit.corpus import load_corpus
from leankit.version import PantographVersion
from minilean.replay.replay_server import ReplayServer
from tests.conftest import double_argv
from tests.doubles.line_servers import DoubleServer
from tests.lean.test_requests import logged

V = PantographVersion.parse
# miniF2F's header, as its Lean 4 files write it.
MINIF2F = "import Mathlib\nimport Aesop\n\nset_option maxHeartbeats 400000\n\nopen BigOperators Real Nat Topology Rat"
PI = "theorem mathd_geometry_pi (r : ℝ) (h₀ : 0 < r) : 0 < π * r ^ 2"
FACTORIAL = "theorem mathd_numbertheory_fact (n : ℕ) (h₀ : 3 ≤ n) : 6 ≤ n !"
VERSIONS = ["0.3.16", "0.3.4", "0.3.2"]
# A replay-corpus theorem (recorded in ∀ form, proof `intro x h₀; linarith`) written in binder form.
CORPUS_DECL = "theorem algebra_2x_plus_3_eq_11 (x : ℝ) (h₀ : 2 * x + 3 = 11) : x = 4"


def worker(version: str, *flags: str, pipe: bool = False) -> LeanWorker | InProcessReplay:
    """The strict double at `version`: in this process, its requests appended to the file after `--log`, or with
    any other flag (`--without`) or `pipe` a process of its own (what the client sends over a pipe, its start's
    requests among them, is the subject there). Elsewhere a theorem's start is the subject, not the pipe."""
    if not pipe and (not flags or (flags[0] == "--log" and len(flags) == 2)):
        return InProcessReplay(DoubleServer(version, log=Path(flags[1]) if flags else None))
    return LeanWorker(double_argv("--pantograph-version", version, *flags), ready_timeout_s=10)


@pytest.mark.slow
@pytest.mark.parametrize("version", VERSIONS)
def test_minif2f_statements_start_with_binders_as_hypotheses_and_the_header_in_scope(version: str) -> None:
    async def run() -> None:
        async with worker(version) as lean:
            # The old way: a bare `goal.start` runs in the REPL's empty scope, where `π` does not resolve.
            with pytest.raises(LeanProtocolError, match="unknown identifier 'π'"):
                await lean.start_goal(expr="∀ (r : ℝ), 0 < r → 0 < π * r ^ 2")
            state = await lean.start_theorem(MINIF2F, PI)
            (goal,) = await lean.goals(state)
            assert goal.target == "0 < π * r ^ 2"
            assert [(v.name, v.type) for v in goal.variables] == [("r", "ℝ"), ("h₀", "0 < r")]
            assert (await lean.tactic(state, "uses r h₀")).kind is TacticKind.SUCCESS
            assert (await lean.tactic(state, "uses x")).errors[0].endswith("unknown identifier 'x'\n" if
                                                                            V(version) < V("0.3.4") else "'x'")
            # Unqualified `Real` lemmas resolve: the header's `open Real` holds for goal.tactic.
            closing = await lean.tactic(state, "nlinarith [pi_pos, sq_nonneg r, sqrt_nonneg r]")
            assert closing.kind is TacticKind.SUCCESS, closing.errors
            scope = await lean.tactic(state, "scope")
            assert scope.goals[0].target == (
                "opens BigOperators Real Nat Topology Rat | options maxHeartbeats=400000 | namespace -")
            factorial = await lean.start_theorem(MINIF2F, FACTORIAL)
            (goal,) = await lean.goals(factorial)
            assert goal.target == "6 ≤ n !" and [v.name for v in goal.variables] == ["n", "h₀"]
            assert (await lean.tactic(factorial, "exact factorial_pos n")).kind is TacticKind.SUCCESS

    asyncio.run(run())


@pytest.mark.slow
@pytest.mark.parametrize("version", ["0.3.16", "0.3.4"])
def test_the_requests_are_the_versions_and_a_bad_statement_is_refused(version: str, tmp_path: Path) -> None:
    log = tmp_path / "requests.log"

    async def run() -> None:
        async with worker(version, "--log", str(log), pipe=True) as lean:
            await lean.goals(await lean.start_theorem(MINIF2F, PI))
            # A header without `open Real`: Lean cannot elaborate `π` in the theorem's own file.
            with pytest.raises(LeanProtocolError, match="unknown identifier 'π'"):
                await lean.start_theorem("open Nat", PI)

    asyncio.run(run())
    rows = logged(log)
    body = "set_option maxHeartbeats 400000\n\nopen BigOperators Real Nat Topology Rat"
    # The start first (it reads no REPL scope), then the scope load before the first scoped request.
    if V(version).distil:
        assert rows[1] == ("frontend.distil", {"file": f"{body}\n\n{PI} := by sorry\n", "ignoreValues": False})
    else:
        assert rows[1][0] == "frontend.process"
        assert rows[1][1]["sorrys"] is True and rows[1][1]["inheritEnv"] is False
    assert rows[2] == ("frontend.process", {"file": body, "readHeader": False, "inheritEnv": True,
                                            **({} if V(version) >= V("0.3.7") else {"sorrys": False,
                                                                                      "typeErrorsAsGoals": False}),
                                            "newConstants": False})
    assert rows[3][0] == "goal.print" and [row[0] for row in rows[4:]] == ["frontend.distil" if V(version).distil
                                                                           else "frontend.process"]


@pytest.mark.slow
@pytest.mark.parametrize("version", ["0.3.16", "0.3.4"])
def test_two_headers_on_one_worker_never_share_a_scope(version: str, tmp_path: Path) -> None:
    log = tmp_path / "requests.log"

    async def run() -> None:
        factory = iter([worker(version, "--log", str(log))]).__next__
        async with (LeanPool(factory, 1, theorems_per_worker=2) as pool, pool.lease("pi", header=MINIF2F) as a,
                    pool.lease("bare") as b):
            pi = await a.start_theorem(MINIF2F, PI)
            bare = await b.start_theorem(None, "theorem bare (r : ℝ) (h₀ : 0 < r) : 0 < r")
            for _ in range(2):  # interleaved: each tactic runs under its own theorem's scope
                assert (await a.tactic(pi, "exact pi_pos")).kind is TacticKind.SUCCESS
                refused = await b.tactic(bare, "exact pi_pos")
                assert refused.errors == ("unknown identifier 'pi_pos'",)
            assert (await b.tactic(bare, "scope")).goals[0].target == "opens - | options - | namespace -"

    asyncio.run(run())
    loads = [payload["file"] for command, payload in logged(log, piped=False) if payload.get("inheritEnv") is True]
    header = "set_option maxHeartbeats 400000\n\nopen BigOperators Real Nat Topology Rat"
    # Loaded for each tactic whose neighbour's ran before it (the starts read no scope), never more.
    assert loads == [header, "", header, ""]


@pytest.mark.slow
def test_the_pool_prefers_a_worker_in_the_same_scope() -> None:
    async def run() -> None:
        workers = iter([worker("0.3.16"), worker("0.3.16")]).__next__
        async with LeanPool(workers, 2, theorems_per_worker=3) as pool, pool.lease("a", header=MINIF2F) as a:
            await a.start_theorem(MINIF2F, PI)
            # Worker 1 is idle, worker 0 holds `a`: the same header still goes to worker 0.
            async with pool.lease("a2", header=MINIF2F) as a2, pool.lease("b") as b:
                assert a2.worker is a.worker and isinstance(a2, LeanLease) and a2.header == a.header
                assert b.worker is not a.worker  # the empty scope of the idle worker
                async with pool.lease("b2") as b2:
                    assert b2.worker is b.worker  # load alone would pick it too (1 theorem against 2)

    asyncio.run(run())


@pytest.mark.slow
def test_a_respawned_worker_is_given_the_header_again() -> None:
    async def run() -> None:
        async with worker("0.3.16") as lean:
            state = await lean.start_theorem(MINIF2F, PI)
            crashed = await lean.tactic(state, "crash")
            assert crashed.kind is TacticKind.CRASH
            assert lean.repl_scope == ""  # nothing loaded in the process that will replace it
            state = await lean.start_theorem(MINIF2F, PI)
            assert (await lean.tactic(state, "exact pi_pos")).kind is TacticKind.SUCCESS
            assert lean.repl_scope == "set_option maxHeartbeats 400000\n\nopen BigOperators Real Nat Topology Rat"

    asyncio.run(run())


@pytest.mark.slow
def test_a_0_3_6_build_without_distil_falls_back_to_sorrys_once(tmp_path: Path) -> None:
    """"0.3.6" names two protocols: builds with and without `frontend.distil`. The first start probes it."""
    log = tmp_path / "requests.log"

    async def run() -> None:
        async with worker("0.3.6", "--without", "frontend.distil", "--log", str(log)) as lean:
            for _ in range(2):
                state = await lean.start_theorem(MINIF2F, PI)
                assert [v.name for v in (await lean.goals(state))[0].variables] == ["r", "h₀"]

    asyncio.run(run())
    starts = [(command, payload.get("sorrys")) for command, payload in logged(log)
              if command == "frontend.distil" or payload.get("sorrys")]
    assert starts == [("frontend.distil", None), ("frontend.process", True), ("frontend.process", True)]


@pytest.mark.slow
def test_without_a_repl_scope_a_header_is_refused_and_a_bare_theorem_starts() -> None:
    async def run() -> None:
        async with worker("0.2.25") as lean:
            with pytest.raises(LeanProtocolError, match="keeps no REPL scope"):
                await lean.goals(await lean.start_theorem(MINIF2F, PI))
            state = await lean.start_theorem(None, "theorem t (x : ℕ) (h₀ : 0 < x) : 0 < x + 1")
            (goal,) = await lean.goals(state)
            assert [v.name for v in goal.variables] == ["x", "h₀"]

    asyncio.run(run())


@pytest.mark.slow
def test_the_compile_carries_the_header_itself() -> None:
    """`frontend.process` starts its text from an empty scope, whatever the REPL's: the compile text must carry
    the header (opens, options) for `π` to resolve."""
    proof = f"{PI} := by\n  positivity\n\n#print axioms mathd_geometry_pi\n"

    async def run() -> None:
        async with worker("0.3.16") as lean:
            await lean.start_theorem(MINIF2F, PI)  # the REPL's scope now has `open Real`…
            bare = await lean.compile(proof)  # …which the compile does not see
            assert bare.units[0].messages[0].text == "unknown identifier 'π'"
            headed = await lean.compile(f"set_option maxHeartbeats 400000\nopen BigOperators Real Nat\n\n{proof}")
            assert [m.text for u in headed.units for m in u.messages if m.severity == "error"] == []

    asyncio.run(run())


@pytest.mark.parametrize("version", ["0.3.16", "0.3.6", "0.3.4", "0.3.2"])
def test_the_replay_server_starts_a_corpus_theorem_in_binder_form(version: str) -> None:
    spec = load_corpus().by_name("algebra_2x_plus_3_eq_11")
    assert spec is not None

    async def run() -> None:
        server = ReplayServer(load_corpus(), version=V(version))
        lean = InProcessReplay(server)
        state = await lean.start_theorem(spec.header, CORPUS_DECL)
        (goal,) = await lean.goals(state)
        # The recorded state after `intro x h₀`: the binders are hypotheses.
        assert goal.target == "x = 4" and [v.name for v in goal.variables] == ["x", "h₀"]
        assert server.scope_text == "set_option maxHeartbeats 400000\n\nopen BigOperators Real Nat Topology Rat"
        assert (await lean.tactic(state, "linarith")).closed_all_goals
        # Binder names the recorded intro does not give: a state the corpus does not know is refused, never started.
        with pytest.raises(LeanProtocolError, match="'algebra_2x_plus_3_eq_11' is recorded, but no goal these "
                           "binders start it at" if V(version) < V("0.3.6") else "cannot elaborate the declaration "
                           "algebra_2x_plus_3_eq_11"):
            await lean.start_theorem(spec.header, CORPUS_DECL.replace("h₀", "h"))
        # A binder-form compile of the recorded proof (after the intro) verifies too.
        compiled = await lean.compile(f"{CORPUS_DECL} := by\n  linarith\n")
        assert [m.text for u in compiled.units for m in u.messages] == []

    asyncio.run(run())


def test_the_replay_distil_keeps_or_drops_the_value_like_lean() -> None:
    server = ReplayServer(load_corpus(), version=V("0.3.16"))

    def ask(payload: dict[str, object]) -> dict[str, object]:
        reply = json.loads(server.handle(f"frontend.distil {json.dumps(payload, ensure_ascii=False)}"))
        assert isinstance(reply, dict)
        return reply

    kept = ask({"file": f"{CORPUS_DECL} := by sorry\n", "ignoreValues": False})
    dropped = ask({"file": f"{CORPUS_DECL} := by sorry\n", "ignoreValues": True})
    assert kept["targets"][0]["goals"][0]["target"]["pp"] == "x = 4"  # type: ignore[index]
    assert dropped["targets"][0]["goals"][0]["target"]["pp"] == "∀ (x : ℝ), 2 * x + 3 = 11 → x = 4"  # type: ignore[index]
    assert ask({"file": "x"}) == {"error": "command", "desc": "Unable to parse json: "
                                  "Pantograph.Protocol.FrontendDistil.ignoreValues: Bool expected"}
    old = ReplayServer(load_corpus(), version=V("0.3.5"))
    assert json.loads(old.handle('frontend.distil {"file": "x", "ignoreValues": false}')) == {
        "error": "command", "desc": "Unknown command frontend.distil"}


@pytest.mark.slow
def test_the_replay_process_starts_theorems_at_the_newest_version() -> None:
    async def run() -> None:
        argv = [sys.executable, "-m", "minilean.replay", "--pantograph-version", "0.3.16", "Mathlib"]
        async with LeanWorker(argv, ready_timeout_s=20) as lean:
            state = await lean.start_theorem("import Mathlib\nopen Real", CORPUS_DECL)
            assert (await lean.tactic(state, "linarith")).closed_all_goals

    asyncio.run(run())
