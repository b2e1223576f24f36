"""`burnqed show`: one theorem's search tree drawn from its trajectory rows (burnqed/trajectory/theorem_tree.py),
found in a run root's eval trajectories or training searches, bounded for big trees; a proved and an unproved
theorem, and a sketch search's sketches, subgoals and assembled proof, exact text."""

from __future__ import annotations

from pathlib import Path

from burnqed.layout import Layout
from burnqed.records.enums import SearchMode
from burnqed.records.results import (
    Edge,
    EdgeOutcome,
    FailureReason,
    SketchAttempt,
    SketchOutcome,
    SubgoalAttempt,
    SubgoalSource,
    TheoremResult,
)
from burnqed.storage import Store
from burnqed.trajectory.labels import label_edges
from burnqed.trajectory.reader import read_theorem
from burnqed.trajectory.theorem_tree import render_search
from tests.processes import cli
from tests.trajectory.factories import write_trajectory

ROOT = "x : ℕ\n⊢ x + 0 = x"


def step(node: int, parent: int, depth: int, tactic: str, outcome: EdgeOutcome, after: str | None = None,
         error: str | None = None, score: float | None = None, before: str = ROOT) -> Edge:
    return Edge(node_id=node, parent_id=parent, depth=depth, state_before=before, tactic=tactic, state_after=after,
                outcome=outcome, error=error, logprob=-0.25 * node, n_tokens=4, score=score, energy=None,
                lean_ms=1.0, gen_ms=2.0, timestamp_ms=node)


def proved() -> tuple[TheoremResult, list[Edge]]:
    edges = [step(1, 0, 1, "simp", EdgeOutcome.ERROR, error="error: simp made no progress"),
             step(2, 0, 1, "intro h", EdgeOutcome.OK, "x : ℕ\n⊢ x = x", score=-0.5),
             step(3, 0, 1, "rw [Nat.add_zero]", EdgeOutcome.OK, "x : ℕ\n⊢ x = x", score=-0.75),
             step(4, 2, 2, "omega", EdgeOutcome.TIMEOUT, error="interrupt", before="x : ℕ\n⊢ x = x"),
             step(5, 2, 2, "rfl", EdgeOutcome.CLOSED, "", score=-1.25, before="x : ℕ\n⊢ x = x")]
    label_edges(edges, [5], True)
    return TheoremResult(name="add_zero", proved=True, proof="theorem add_zero ... := by\n  intro h\n  rfl",
                         budget_at_proof=2, nodes_expanded=2, edges=5, time_s=1.5), edges


def unproved() -> tuple[TheoremResult, list[Edge]]:
    return TheoremResult(name="bad", proved=False, failure_reason=FailureReason.START_ERROR,
                         detail="Lean could not start the goal: unknown identifier 'foo'",
                         declaration="theorem bad : foo = 1", time_s=0.25), []


def written(uri: str, store: Store) -> None:
    write_trajectory(uri, [proved(), unproved()], run_id="iter0", store=store)


def test_a_proved_theorem_is_drawn_with_its_proof_path(tmp_path: Path, store: Store) -> None:
    uri = f"file://{tmp_path}/traj"
    written(uri, store)
    [search] = read_theorem(uri, "add_zero", store=store)
    assert render_search(search, max_depth=8, max_nodes=60) == (
        f"add_zero: proved at budget 2; step search, 2 expansions, 5 edges, 1.5 s (run iter0 in {uri})\n"
        "x : ℕ\n"
        "⊢ x + 0 = x\n"
        "├── ✗ simp → error: simp made no progress  (logprob -0.25)\n"
        "├── ★ intro h → ok: ⊢ x = x  (logprob -0.50, score -0.50)\n"
        "│   ├── ✗ omega → timeout: interrupt  (logprob -1.00)\n"
        "│   └── ★ rfl → closed  (logprob -1.25, score -1.25)\n"
        "└── · rw [Nat.add_zero] → ok: ⊢ x = x  (logprob -0.75, score -0.75)\n"
        "proof path: intro h; rfl\n")


def test_an_unproved_theorem_says_why(tmp_path: Path, store: Store) -> None:
    uri = f"file://{tmp_path}/traj"
    written(uri, store)
    [search] = read_theorem(uri, "bad", store=store)
    assert render_search(search, max_depth=8, max_nodes=60) == (
        "bad: not proved: start_error (Lean could not start the goal: unknown identifier 'foo'); step search, "
        f"0 expansions, 0 edges, 0.2 s (run iter0 in {uri})\n"
        "theorem bad : foo = 1\n")


def test_a_produced_answer_is_shown_as_produced_and_not_as_the_reference(tmp_path: Path, store: Store) -> None:
    # A search proves a theorem with the answer its proof filled in; only `burnqed eval` judges that answer against
    # the reference, so the header says the answer was produced and not compared.
    result, edges = proved()
    write_trajectory(f"file://{tmp_path}/traj", [(result.model_copy(update={"answer": "100"}), edges)],
                     run_id="iter0", store=store)
    [search] = read_theorem(f"file://{tmp_path}/traj", "add_zero", store=store)
    assert render_search(search, max_depth=8, max_nodes=60).splitlines()[0] == (
        "add_zero: proved at budget 2 with the answer it produced, 100 (not compared with the reference: "
        f"`burnqed eval` judges answers); step search, 2 expansions, 5 edges, 1.5 s (run iter0 in file://{tmp_path}/traj)")


def test_a_big_tree_is_bounded_and_says_what_it_left_out(tmp_path: Path, store: Store) -> None:
    result, edges = proved()
    wide = [*edges, *(step(6 + k, 0, 1, f"linarith [h{k}]", EdgeOutcome.ERROR, error="linarith failed")
                      for k in range(6))]
    uri = f"file://{tmp_path}/traj"
    write_trajectory(uri, [(result.model_copy(update={"edges": len(wide)}), wide)], run_id="iter0", store=store)
    [search] = read_theorem(uri, "add_zero", store=store)
    text = render_search(search, max_depth=1, max_nodes=3)
    assert text.splitlines()[3:] == [
        "├── ✗ simp → error: simp made no progress  (logprob -0.25)",
        "├── ★ intro h → ok: ⊢ x = x  (logprob -0.50, score -0.50)",
        "│   └── … 2 more (deeper than --depth): closed 1, timeout 1",
        "├── · rw [Nat.add_zero] → ok: ⊢ x = x  (logprob -0.75, score -0.75)",
        "└── … 6 more: error 6",
        "shown 3 of 11 edges (the proof path, then breadth first up to --max-nodes 3, no deeper than --depth 1)",
        "proof path: intro h; rfl",
    ]


def test_show_finds_the_theorem_in_the_run_roots_eval_or_searches(tmp_path: Path, store: Store) -> None:
    at = Layout(f"file://{tmp_path}/run")
    write_trajectory(at.eval_trajectories(0), [proved()], run_id="eval", store=store)
    write_trajectory(at.trajectories(0), [unproved()], run_id="iter0", store=store)
    shown = cli("show", "add_zero", "--root", str(tmp_path / "run"))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"add_zero: proved at budget 2; step search, 2 expansions, 5 edges, 1.5 s (run eval "
                                   f"in {at.eval_trajectories(0)})\n")
    searched = cli("show", "bad", "--root", str(tmp_path / "run"), "--iter", "0")
    assert searched.returncode == 0 and f"(run iter0 in {at.trajectories(0)})" in searched.stdout
    direct = cli("show", "add_zero", "--trajectories", at.eval_trajectories(0), "--max-nodes", "1")
    assert direct.returncode == 0 and "│   └── … 1 more: timeout 1\n└── … 2 more: error 1, ok 1\n" in direct.stdout


def test_show_reads_a_pass_at_n_evals_first_pass(tmp_path: Path, store: Store) -> None:
    prefix = tmp_path / "r.trajectories"
    for k in range(2):
        write_trajectory(f"file://{prefix}/pass-{k}", [proved()], run_id=f"pass{k}", store=store)
    shown = cli("show", "add_zero", "--trajectories", str(prefix))
    assert shown.returncode == 0 and f"(run pass0 in {prefix}/pass-0)" in shown.stdout.splitlines()[0]


def test_an_unknown_theorem_is_one_line_naming_where_it_looked_and_the_close_names(tmp_path: Path,
                                                                                   store: Store) -> None:
    at = Layout(f"file://{tmp_path}/run")
    write_trajectory(at.eval_trajectories(0), [proved()], run_id="eval", store=store)
    done = cli("show", "add_zer0", "--root", str(tmp_path / "run"))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith(f"error: theorem add_zer0 is in none of the trajectories looked in "
                                  f"({at.eval_trajectories(0)}); did you mean add_zero? ")
    assert done.stderr.count("\n") == 1 and "summary" not in done.stderr  # `burnqed summary` lists no names
    nowhere = cli("show", "add_zero", "--trajectories", str(tmp_path / "nonexistent"))
    assert (nowhere.returncode, nowhere.stderr) == (2, f"error: --trajectories {tmp_path / 'nonexistent'} does not "
                                                       "exist: give a trajectory prefix (an eval's R.trajectories, a "
                                                       "search output, merged trajectories)\n")
    missing = cli("show", "add_zero", "--root", str(tmp_path / "run"), "--iter", "3")
    assert (missing.returncode, missing.stderr) == (2, f"error: {at.iter_dir(3)} does not exist: check --root and "
                                                       "--iter, or give --trajectories PREFIX\n")


CONTEXT = "x y : ℝ\nh₀ : 0 < x\nh₁ : 0 < y"
PLAN = "have hxy : 0 < x * y := by sorry\nhave hx : 0 < x := by sorry\nnlinarith [hxy, hx]"
ASSEMBLED = ("theorem two_facts (x y : ℝ) (h₀ : 0 < x) (h₁ : 0 < y) : 0 < x * y + x := by\n"
             "  have hxy : 0 < x * y := by\n    positivity\n  have hx : 0 < x := by\n    exact h₀\n"
             "  nlinarith [hxy, hx]")


def sketched() -> TheoremResult:
    """A sketch search: a refused plan, a plan whose second subgoal failed, a re-plan that kept the first subgoal's
    proof and took the second's from the cache, verified."""
    hxy = SubgoalAttempt(name="hxy", statement="0 < x * y", goal=f"{CONTEXT}\n⊢ 0 < x * y", proved=True,
                         tactics=["positivity"], source=SubgoalSource.SEARCH, spent=3)
    hx = SubgoalAttempt(name="hx", statement="0 < x", goal=f"{CONTEXT}\nhxy : 0 < x * y\n⊢ 0 < x", proved=False,
                        spent=4, detail="exhausted")
    return TheoremResult(
        name="two_facts", mode=SearchMode.SKETCH, proved=True, proof=ASSEMBLED, nodes_expanded=9, budget_at_proof=9,
        declaration="theorem two_facts (x y : ℝ) (h₀ : 0 < x) (h₁ : 0 < y) : 0 < x * y + x", time_s=2.5,
        sketches=[
            SketchAttempt(round=0, body="have h : 0 < x := by native_decide\nlinarith", outcome=SketchOutcome.REFUSED,
                          detail="the tactic guard refuses native_decide", tokens=12),
            SketchAttempt(round=0, body=PLAN, outcome=SketchOutcome.ELABORATED, subgoals=[hxy, hx], tokens=40),
            SketchAttempt(round=1, body=PLAN, outcome=SketchOutcome.ELABORATED, verified=True, tokens=38, subgoals=[
                hxy.model_copy(update={"source": SubgoalSource.KEPT, "spent": 0}),
                hx.model_copy(update={"proved": True, "tactics": ["exact h₀"], "source": SubgoalSource.CACHE,
                                      "spent": 1, "detail": None})]),
        ])


def test_a_sketch_search_draws_its_sketches_subgoals_and_assembled_proof(tmp_path: Path, store: Store) -> None:
    uri = f"file://{tmp_path}/traj"
    write_trajectory(uri, [(sketched(), [])], run_id="iter0", store=store)
    [search] = read_theorem(uri, "two_facts", store=store)
    assert render_search(search, max_depth=8, max_nodes=60) == (
        f"two_facts: proved at budget 9; sketch search, 9 expansions, 0 edges, 2.5 s (run iter0 in {uri})\n"
        "theorem two_facts (x y : ℝ) (h₀ : 0 < x) (h₁ : 0 < y) : 0 < x * y + x\n"
        "sketches: 3 written, 1 re-plan\n"
        "sketch 1 (round 0): refused: the tactic guard refuses native_decide, 12 tokens\n"
        "  have h : 0 < x := by native_decide\n"
        "  linarith\n"
        "sketch 2 (round 0): elaborated, 1 of 2 subgoals proved, 40 tokens\n"
        "  have hxy : 0 < x * y := by sorry\n"
        "  have hx : 0 < x := by sorry\n"
        "  nlinarith [hxy, hx]\n"
        "  ├── ✓ hxy : 0 < x * y  (search, spent 3): positivity\n"
        "  └── ✗ hx : 0 < x  (spent 4): exhausted\n"
        "sketch 3 (round 1): verified, 2 of 2 subgoals proved, 38 tokens\n"
        "  have hxy : 0 < x * y := by sorry\n"
        "  have hx : 0 < x := by sorry\n"
        "  nlinarith [hxy, hx]\n"
        "  ├── ✓ hxy : 0 < x * y  (kept, spent 0): positivity\n"
        "  └── ✓ hx : 0 < x  (cache, spent 1): exact h₀\n"
        "assembled proof (sketch 3):\n"
        "  theorem two_facts (x y : ℝ) (h₀ : 0 < x) (h₁ : 0 < y) : 0 < x * y + x := by\n"
        "    have hxy : 0 < x * y := by\n"
        "      positivity\n"
        "    have hx : 0 < x := by\n"
        "      exact h₀\n"
        "    nlinarith [hxy, hx]\n")
    shown = cli("show", "two_facts", "--trajectories", uri)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == render_search(search, max_depth=8, max_nodes=60)


def test_a_long_sketch_and_proof_are_cut_saying_how_much() -> None:
    from burnqed.trajectory.theorem_tree import render_sketches

    body = "\n".join(f"have h{k} : {k} = {k} := by sorry" for k in range(14))
    result = TheoremResult(name="long", mode=SearchMode.SKETCH, proved=False, failure_reason=FailureReason.EXHAUSTED,
                           sketches=[SketchAttempt(round=0, body=body, outcome=SketchOutcome.ERROR,
                                                   detail="unknown identifier 'foo'\nand more")])
    assert render_sketches(result) == [
        "sketches: 1 written, 0 re-plans",
        "sketch 1 (round 0): error: unknown identifier 'foo' and more, 0 tokens",
        *(f"  have h{k} : {k} = {k} := by sorry" for k in range(12)),
        "  … 2 more lines",
    ]
    assert render_sketches(sketched().model_copy(update={"sketches": []})) == []


def test_an_empty_completion_is_labelled_as_what_it_is_and_only_a_refused_prompt_as_never_asked(
        tmp_path: Path, store: Store) -> None:
    sketch = TheoremResult(name="planned", proved=False, mode=SearchMode.SKETCH,
                           failure_reason=FailureReason.EXHAUSTED, nodes_expanded=1, edges=2, time_s=0.5)
    rows = [step(1, 0, 1, "", EdgeOutcome.REFUSED, error="no sketch could be read: empty"),
            step(2, 0, 1, "", EdgeOutcome.PROMPT_REJECTED, error="too long")]
    stepped = TheoremResult(name="stepped", proved=False, failure_reason=FailureReason.EXHAUSTED, nodes_expanded=1,
                            edges=1, time_s=0.5)
    uri = f"file://{tmp_path}/traj"
    blank = step(1, 0, 1, " ", EdgeOutcome.ERROR, error="error: empty")
    write_trajectory(uri, [(sketch, rows), (stepped, [blank])], run_id="iter0", store=store)
    [planned] = read_theorem(uri, "planned", store=store)
    assert render_search(planned, max_depth=8, max_nodes=60).splitlines()[3:5] == [
        "├── ✗ (an empty sketch: the planner wrote nothing) → refused: no sketch could be read: empty  "
        "(logprob -0.25)",
        "└── ✗ (no tactic: the policy could not be asked) → prompt_rejected: too long  (logprob -0.50)"]
    [tactic] = read_theorem(uri, "stepped", store=store)
    assert render_search(tactic, max_depth=8, max_nodes=60).splitlines()[3] == (
        "└── ✗ (an empty tactic: the policy wrote nothing) → error: empty  (logprob -0.25)")
