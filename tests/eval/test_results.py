"""Eval results: pass@N at each budget computed by hand, validation, the JSON file, the table."""

from __future__ import annotations

import json
import re
import subprocess
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from burnqed.config import Config, SearchConfig
from burnqed.errors import InputError
from burnqed.eval.metadata import config_digest, git_commit
from burnqed.eval.pass_at import build_eval_result
from burnqed.eval.per_theorem import render_not_evaluated, render_theorem_table
from burnqed.eval.rendering import render_eval_table
from burnqed.eval.result import SCHEMA_VERSION, BudgetRow, EvalResult, load_eval_result, write_eval_result
from burnqed.lean.backend import lean_backend_label
from burnqed.records.enums import SearchMode
from burnqed.records.results import BudgetUsage, FailureReason, TheoremResult, UsageCurve
from burnqed.records.theorem import SkippedDeclaration
from burnqed.storage import Store

NAMES = ["thm_a", "thm_b", "thm_c", "thm_d"]
BUDGETS = [10, 30, 60]
WHEN = datetime(2025, 11, 21, 9, 58, 0, tzinfo=UTC)


def proved(name: str, at: int, time_s: float, proof: str | None = None) -> TheoremResult:
    """Proved at `at` expansions, having generated 10 tokens and sent 2 Lean requests per expansion."""
    return TheoremResult(
        name=name, proved=True, budget_at_proof=at, nodes_expanded=at, time_s=time_s, proof=proof or f"{name}@{at}",
        tokens=10 * at, lean_calls=2 * at,
    )


def failed(name: str, reason: FailureReason, nodes: int, time_s: float) -> TheoremResult:
    return TheoremResult(name=name, proved=False, failure_reason=reason, nodes_expanded=nodes, time_s=time_s,
                         tokens=10 * nodes, lean_calls=2 * nodes)


def two_passes() -> list[list[TheoremResult]]:
    """The hand-worked example (numbers in test_budget_rows_by_hand)."""
    first = [
        proved("thm_a", 5, 2.0),
        failed("thm_b", FailureReason.MAX_NODES, 60, 30.0),
        proved("thm_c", 40, 20.0),
        failed("thm_d", FailureReason.EXHAUSTED, 8, 4.0),
    ]
    second = [
        proved("thm_a", 12, 6.0),
        proved("thm_b", 25, 10.0),
        failed("thm_c", FailureReason.TIMEOUT, 50, 50.0),
        failed("thm_d", FailureReason.START_ERROR, 0, 1.0),
    ]
    return [first, second]


def build(attempts: list[list[TheoremResult]], budgets: list[int] | None = None, **overrides: object) -> EvalResult:
    kwargs: dict[str, object] = {
        "benchmark": "mini",
        "model": "tiny",
        "ebm": None,
        "lean_backend": "replay",
        "iteration": 0,
        "config_digest": "0123456789abcdef",
        "git_commit": None,
        "theorem_names": NAMES,
        "timestamp": WHEN,
    }
    kwargs.update(overrides)
    return build_eval_result(attempts, budgets or BUDGETS, **kwargs)  # type: ignore[arg-type]


def test_budget_rows_by_hand():
    result = build(two_passes())
    # budget 10: a solved (5 nodes, 2 s). b: both attempts cross 10 → nodes 10; time max(30·10/60, 10·10/25) = 5.
    # c: nodes 10; time max(20·10/40, 50·10/50) = 10. d: stopped at 8 nodes/4 s and 0 nodes/1 s → 8, 4.
    # budget 30: a 5/2; b solved by pass 2 (25, 10); c 30 nodes, max(20·30/40, 50·30/50) = 30 s; d 8/4.
    # budget 60: a 5/2; b 25/10; c solved by pass 1 (40, 20); d 8/4.
    # Tokens (no usage records: totals, pro rata beyond the budget), summed over both passes:
    # 10: a 50 + 100, b 100 + 100, c 100 + 100, d 80 + 0 = 630;  30: a 50 + 120, b 300 + 250, c 300 + 300, d 80 = 1400;
    # 60: every attempt stopped within 60: 10 × (5 + 60 + 40 + 8 + 12 + 25 + 50 + 0) = 2000. Lean requests: a fifth.
    assert result.budgets == [
        BudgetRow(budget=10, solved=1, total=4, rate=0.25, avg_nodes=8.25, avg_time_s=5.25, median_time_s=4.5,
                  tokens=630, lean_calls=126, avg_tokens=157.5),
        BudgetRow(budget=30, solved=2, total=4, rate=0.5, avg_nodes=17.0, avg_time_s=11.5, median_time_s=7.0,
                  tokens=1400, lean_calls=280, avg_tokens=350.0),
        BudgetRow(budget=60, solved=3, total=4, rate=0.75, avg_nodes=19.5, avg_time_s=9.0, median_time_s=7.0,
                  tokens=2000, lean_calls=400, avg_tokens=500.0),
    ]
    assert (result.mode, result.budget_unit, result.has_tokens) == (SearchMode.STEP, "expansions", True)
    assert result.cumulative_solved == 3
    assert result.solved_names == ["thm_a", "thm_b", "thm_c"]
    assert result.failure_reasons == {"exhausted": 1}
    assert result.total == 4
    assert result.pass_n == 2
    assert result.lean_backend == "replay"
    assert result.timestamp == WHEN


def test_per_theorem_at_largest_budget():
    by_name = {t.name: t for t in build(two_passes()).per_theorem}
    assert [t.name for t in build(two_passes()).per_theorem] == NAMES
    a = by_name["thm_a"]
    assert (a.proved, a.budget_at_proof, a.nodes_used, a.time_s, a.proof) == (True, 5, 5, 2.0, "thm_a@5")
    assert (a.failure_reason, a.attempts, a.attempts_proved) == (None, 2, 2)
    b = by_name["thm_b"]
    assert (b.proved, b.budget_at_proof, b.proof, b.attempts_proved) == (True, 25, "thm_b@25", 1)
    c = by_name["thm_c"]
    assert (c.proved, c.budget_at_proof, c.nodes_used, c.time_s, c.proof) == (True, 40, 40, 20.0, "thm_c@40")
    d = by_name["thm_d"]
    assert (d.proved, d.budget_at_proof, d.nodes_used, d.time_s, d.proof) == (False, None, 8, 4.0, None)
    # exhausted and start_error once each: the tie goes to the earlier pass
    assert (d.failure_reason, d.attempts_proved) == (FailureReason.EXHAUSTED, 0)


def test_pass_at_n_is_the_union_of_attempts():
    attempts = two_passes()
    only_first = build(attempts[:1])
    only_second = build(attempts[1:])
    both = build(attempts)
    assert [row.solved for row in only_first.budgets] == [1, 1, 2]  # a@5, c@40
    assert [row.solved for row in only_second.budgets] == [0, 2, 2]  # a@12, b@25
    assert [row.solved for row in both.budgets] == [1, 2, 3]
    assert set(both.solved_names) == set(only_first.solved_names) | set(only_second.solved_names)


def test_the_winning_attempt_is_the_one_with_the_fewest_nodes():
    attempts = [
        [proved("t", 20, 1.0, proof="slow-budget")],
        [proved("t", 9, 3.0, proof="fast-budget")],
        [proved("t", 9, 2.0, proof="fast-budget-quicker")],
    ]
    result = build(attempts, [10, 30], theorem_names=["t"])
    only = result.per_theorem[0]
    assert (only.budget_at_proof, only.nodes_used, only.time_s, only.proof) == (9, 9, 2.0, "fast-budget-quicker")
    assert only.attempts_proved == 3
    assert [(row.avg_nodes, row.avg_time_s) for row in result.budgets] == [(9.0, 2.0), (9.0, 2.0)]


def test_failure_reason_is_the_most_frequent_and_beyond_budget_counts_as_max_nodes():
    attempts = [
        [failed("t", FailureReason.EXHAUSTED, 3, 1.0)],
        [proved("t", 50, 9.0)],  # proved, but beyond the largest budget (30)
        [failed("t", FailureReason.MAX_NODES, 30, 6.0)],
    ]
    result = build(attempts, [10, 30], theorem_names=["t"])
    only = result.per_theorem[0]
    assert (only.proved, only.failure_reason, only.budget_at_proof, only.attempts_proved) == (
        False,
        FailureReason.MAX_NODES,
        None,
        0,
    )
    assert only.nodes_used == 30
    assert only.time_s == 6.0  # max(1.0, 9·30/50 = 5.4, 6.0)
    assert result.failure_reasons == {"max_nodes": 1}
    assert result.cumulative_solved == 0
    assert [row.rate for row in result.budgets] == [0.0, 0.0]


def test_proof_modes_count_proofs_and_read_their_cost_at_each_budget_from_the_search():
    def usage(*marks: tuple[int, int, int]) -> list[BudgetUsage]:
        return [BudgetUsage(budget=b, tokens=t, lean_calls=c, time_s=1.0) for b, t, c in marks]

    attempts = [[
        TheoremResult(name="t", mode=SearchMode.WHOLE, proved=True, budget_at_proof=12, proofs_sampled=16,
                      time_s=2.0, proof="p", tokens=1600, lean_calls=9, usage=usage((8, 800, 6), (16, 1600, 9))),
        TheoremResult(name="u", mode=SearchMode.WHOLE, proved=True, budget_at_proof=20, proofs_sampled=24,
                      time_s=3.0, proof="q", tokens=2400, lean_calls=20, usage=usage((8, 900, 7), (16, 1700, 15))),
    ]]
    result = build(attempts, [8, 16], theorem_names=["t", "u"], mode=SearchMode.WHOLE)
    assert (result.mode, result.budget_unit) == (SearchMode.WHOLE, "proofs")
    assert [(r.solved, r.avg_nodes, r.tokens, r.lean_calls) for r in result.budgets] == [
        (0, 8.0, 1700, 13), (1, 14.0, 3300, 24),
    ]
    assert result.failure_reasons == {"max_proofs": 1}  # u proved only beyond the largest budget
    assert "whole (budget in proofs)" in render_eval_table(result) and "avg proofs" in render_eval_table(result)


def test_each_theorem_records_its_attempts_curves_summed_so_its_cost_reads_at_any_budget():
    def attempt(name: str, tokens: list[int], calls: list[int], total: tuple[int, int], at: int | None = None
                ) -> TheoremResult:
        return TheoremResult(name=name, mode=SearchMode.WHOLE, proved=at is not None, budget_at_proof=at,
                             proof="p" if at else None, proofs_sampled=len(tokens), time_s=1.0, tokens=total[0],
                             lean_calls=total[1], curve=UsageCurve(tokens=tokens, lean_calls=calls))

    # t: pass 0 proves it at its 2nd proof and ends (then 5 more tokens: its totals), pass 1 samples all 4.
    # u: pass 0 ends at its 1st proof, pass 1 after 3 proofs unproved (exhausted).
    attempts = [
        [attempt("t", [10, 30], [2, 3], (35, 3), at=2), attempt("u", [7], [1], (7, 1), at=1)],
        [attempt("t", [20, 40, 60, 80], [1, 2, 3, 4], (80, 4)), attempt("u", [5, 5, 9], [2, 2, 2], (9, 2))],
    ]
    result = build(attempts, [2, 4], theorem_names=["t", "u"], mode=SearchMode.WHOLE)
    t, u = result.per_theorem
    assert t.curve == UsageCurve(tokens=[30, 70, 95, 115], lean_calls=[3, 5, 6, 7]) and (t.tokens, t.lean_calls) == (
        115, 7)
    assert u.curve == UsageCurve(tokens=[12, 12, 16], lean_calls=[3, 3, 3]) and (u.tokens, u.lean_calls) == (16, 3)
    # The rungs' rows read the same curves: (70 + 12) / 2 at 2, (115 + 16) / 2 at 4.
    assert [row.avg_tokens for row in result.budgets] == [41.0, 65.5]
    assert result.has_curves
    assert result.mean_curve("tokens") == [21.0, 41.0, 55.5, 65.5]
    assert result.mean_curve("lean_calls") == [3.0, 4.0, 4.5, 5.0]
    # A theorem whose attempts all ended early: its curve stops there, one entry past it reads the totals.
    short = build([[attempt("t", [10], [1], (12, 2), at=1), attempt("u", [3], [1], (3, 1), at=1)]], [2, 100],
                  theorem_names=["t", "u"], mode=SearchMode.WHOLE)
    assert [t.curve for t in short.per_theorem] == [UsageCurve(tokens=[10], lean_calls=[1]),
                                                     UsageCurve(tokens=[3], lean_calls=[1])]
    assert short.mean_curve("tokens") == [6.5, 7.5]
    # An attempt without a curve (a result of an older burnqed): its theorem has none, nor does the result.
    older = build([[attempt("t", [10], [1], (12, 2), at=1),
                    TheoremResult(name="u", proved=False, failure_reason=FailureReason.EXHAUSTED, time_s=1.0)]], [2],
                  theorem_names=["t", "u"])
    assert older.per_theorem[1].curve is None and not older.has_curves
    with pytest.raises(ValueError, match="no per-theorem curves"):
        older.mean_curve("tokens")


def test_failure_reasons_count_unsolved_theorems():
    attempts = [
        [
            failed("a", FailureReason.START_ERROR, 0, 0.5),
            failed("b", FailureReason.TIMEOUT, 4, 300.0),
            failed("c", FailureReason.START_ERROR, 0, 0.5),
            TheoremResult(name="d", proved=False),
        ]
    ]
    result = build(attempts, [10], theorem_names=["a", "b", "c", "d"])
    assert result.failure_reasons == {"start_error": 2, "timeout": 1, "unknown": 1}
    assert list(result.failure_reasons) == ["start_error", "timeout", "unknown"]


def test_a_pass_missing_a_theorem_is_rejected():
    attempts = two_passes()
    attempts[1] = attempts[1][:3]
    with pytest.raises(ValueError, match=r"pass 1: .*missing \['thm_d'\]"):
        build(attempts)


def test_a_duplicate_in_a_pass_is_rejected():
    attempts = two_passes()
    attempts[0] = [*attempts[0], proved("thm_a", 7, 1.0)]
    with pytest.raises(ValueError, match=r"pass 0: .*repeated \['thm_a'\]"):
        build(attempts)


def test_an_unknown_theorem_in_a_pass_is_rejected():
    attempts = two_passes()
    attempts[0] = [*attempts[0][:3], proved("thm_z", 7, 1.0)]
    with pytest.raises(ValueError, match=r"missing \['thm_d'\]; not in the benchmark \['thm_z'\]"):
        build(attempts)


def test_duplicate_theorem_names_and_no_passes_are_rejected():
    with pytest.raises(ValueError, match=r"duplicates: \['thm_a'\]"):
        build(two_passes(), theorem_names=[*NAMES, "thm_a"])
    with pytest.raises(ValueError, match="pass_n must be at least 1"):
        build([])


def test_a_proof_without_budget_at_proof_is_rejected():
    attempts = [[TheoremResult(name="t", proved=True, nodes_expanded=3)]]
    with pytest.raises(ValueError, match="t is proved but has no budget_at_proof"):
        build(attempts, [10], theorem_names=["t"])


@pytest.mark.parametrize(
    ("budgets", "message"),
    [([], "budgets is empty"), ([0, 10], "positive"), ([10, -5], "positive"), ([30, 10], "ascending"),
     ([10, 10, 30], "unique")],
)
def test_bad_budgets_are_rejected(budgets: list[int], message: str):
    with pytest.raises(ValueError, match=message):
        build_eval_result(
            two_passes(), budgets, benchmark="mini", model="tiny", ebm=None, lean_backend="replay", iteration=0,
            config_digest="x", git_commit=None, theorem_names=NAMES,
        )


def test_an_empty_benchmark_scores_zero():
    result = build([[]], [10], theorem_names=[])
    assert result.budgets == [
        BudgetRow(budget=10, solved=0, total=0, rate=0.0, avg_nodes=0.0, avg_time_s=0.0, median_time_s=0.0,
                  tokens=0, lean_calls=0, avg_tokens=0.0)
    ]


def test_default_timestamp_is_now_in_utc():
    before = datetime.now(UTC)
    result = build(two_passes(), timestamp=None)
    assert before <= result.timestamp <= datetime.now(UTC)
    assert result.timestamp.utcoffset() == timedelta(0)


def test_timestamp_is_stored_in_utc():
    paris = datetime(2025, 11, 21, 10, 58, 0, tzinfo=timezone(timedelta(hours=1)))
    result = build(two_passes(), timestamp=paris)
    assert result.model_dump(mode="json")["timestamp"] == "2025-11-21T09:58:00Z"


def test_json_round_trip(tmp_path: Path, store: Store):
    result = build(two_passes(), ebm="ebm-iter0", git_commit="a" * 40, iteration=2)
    path = tmp_path / "out" / "eval.json"
    write_eval_result(result, path, store=store)
    assert load_eval_result(path, store=store) == result
    raw = json.loads(path.read_text(encoding="utf-8"))
    assert raw["schema_version"] == SCHEMA_VERSION == 12
    assert raw["not_evaluated"] == []
    assert raw["timestamp"] == "2025-11-21T09:58:00Z"
    assert (raw["mode"], raw["budget_unit"]) == ("step", "expansions")
    assert raw["budgets"][0] == {
        "budget": 10, "solved": 1, "total": 4, "rate": 0.25, "avg_nodes": 8.25, "avg_time_s": 5.25,
        "median_time_s": 4.5, "tokens": 630, "lean_calls": 126, "avg_tokens": 157.5,
    }
    assert (raw["per_theorem"][0]["tokens"], raw["per_theorem"][0]["lean_calls"]) == (170, 34)
    assert raw["per_theorem"][3]["failure_reason"] == "exhausted"
    assert [p.name for p in tmp_path.joinpath("out").iterdir()] == ["eval.json"]  # no temp file left


def test_load_rejects_bad_json_with_the_file_name(tmp_path: Path, store: Store):
    path = tmp_path / "broken.json"
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(InputError, match=r"eval result .*broken\.json is not valid JSON"):
        load_eval_result(path, store=store)


def test_load_rejects_a_missing_field_with_the_file_name(tmp_path: Path, store: Store):
    raw = build(two_passes()).model_dump(mode="json")
    del raw["pass_n"]
    path = tmp_path / "partial.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(InputError, match=r"eval result .*partial\.json: pass_n: Field required"):
        load_eval_result(path, store=store)


def test_load_rejects_unknown_fields_and_schema_versions(tmp_path: Path, store: Store):
    raw = build(two_passes()).model_dump(mode="json")
    path = tmp_path / "future.json"
    path.write_text(json.dumps({**raw, "schema_version": SCHEMA_VERSION + 1}), encoding="utf-8")
    with pytest.raises(InputError, match=r"future\.json: schema_version"):
        load_eval_result(path, store=store)
    path.write_text(json.dumps({**raw, "extra": 1}), encoding="utf-8")
    with pytest.raises(InputError, match=r"future\.json: extra: Extra inputs are not permitted"):
        load_eval_result(path, store=store)
    with pytest.raises(InputError, match=r"missing\.json does not exist"):
        load_eval_result(tmp_path / "missing.json", store=store)


def test_render_shows_every_number():
    text = render_eval_table(build(two_passes(), ebm="ebm0"))
    lines = text.splitlines()
    assert "mini · tiny + EBM ebm0 · step (budget in expansions) · pass@2 · iter 0 · replay" in text
    rows = [[cell.strip() for cell in line.strip("│").split("│")] for line in lines if line.startswith("│")]
    assert rows == [
        ["10", "1/4", "25.0 %", "4.6–69.9", "8.2", "5.2 s", "4.5 s", "158", "126"],
        ["30", "2/4", "50.0 %", "15.0–85.0", "17.0", "11.5 s", "7.0 s", "350", "280"],
        ["60", "3/4", "75.0 %", "30.1–95.4", "19.5", "9.0 s", "7.0 s", "500", "400"],
    ]
    assert lines[-1] == "cumulative solved: 3/4; failures: exhausted 1"


def test_config_digest_is_stable_and_sensitive():
    digest = config_digest(Config())
    assert len(digest) == 16
    assert all(c in "0123456789abcdef" for c in digest)
    assert config_digest(Config()) == digest
    changed = Config(search=SearchConfig(max_nodes=301))
    assert config_digest(changed) != digest


def test_git_commit_in_a_checkout_and_outside(tmp_path: Path):
    repo = tmp_path / "repo"
    repo.mkdir()
    env_free = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", *env_free, "-C", str(repo), "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    expected = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    assert git_commit(repo) == expected
    outside = tmp_path / "plain"
    outside.mkdir()
    assert git_commit(outside) is None
    assert git_commit(tmp_path / "does-not-exist") is None


def test_git_commit_without_git(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert git_commit(tmp_path) is None


def _git(repo: Path, *args: str) -> str:
    """`git -C repo args…` with a throwaway identity; its stdout stripped."""
    identity = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    return subprocess.run(["git", *identity, "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def test_git_commit_reads_the_repository_files_afresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """HEAD through its branch, a loose then a packed ref, a commit made after a first call, a detached HEAD, a
    sub-folder and a worktree's `.git` file: each the commit git names, with no git on PATH (the files answer)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "commit", "-q", "--allow-empty", "-m", "one")
    first = _git(repo, "rev-parse", "HEAD")
    _git(repo, "commit", "-q", "--allow-empty", "-m", "two")
    second = _git(repo, "rev-parse", "HEAD")
    _git(repo, "worktree", "add", "-q", "--detach", str(tmp_path / "tree"), first)
    (repo / "sub" / "deeper").mkdir(parents=True)
    with monkeypatch.context() as without_git:
        without_git.setenv("PATH", str(tmp_path / "no-bin"))
        assert git_commit(repo) == second
        assert git_commit(repo / "sub" / "deeper") == second
        assert (tmp_path / "tree" / ".git").is_file()
        assert git_commit(tmp_path / "tree") == first
    _git(repo, "commit", "-q", "--allow-empty", "-m", "three")
    third = _git(repo, "rev-parse", "HEAD")
    _git(repo, "pack-refs", "--all")
    assert not (repo / ".git" / "refs" / "heads" / "main").exists()
    _git(tmp_path / "tree", "checkout", "-q", "--detach", second)
    with monkeypatch.context() as without_git:
        without_git.setenv("PATH", str(tmp_path / "no-bin"))
        assert git_commit(repo) == third
        assert git_commit(tmp_path / "tree") == second
    _git(repo, "checkout", "-q", "--detach", first)
    assert (repo / ".git" / "HEAD").read_text().strip() == first
    assert git_commit(repo) == first


def test_git_commit_outside_any_repository_is_none_without_asking_git(monkeypatch: pytest.MonkeyPatch,
                                                                       tmp_path: Path):
    def no_process(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"git was started: {args}")

    plain = tmp_path / "plain" / "deeper"
    plain.mkdir(parents=True)
    monkeypatch.setattr(subprocess, "run", no_process)
    assert git_commit(plain) is None
    monkeypatch.chdir(plain)
    assert git_commit() is None


def test_git_commit_asks_git_where_the_files_are_not_enough(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """An unborn branch is None as git says; a bare repository and GIT_DIR set are git's answers."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    assert git_commit(repo) is None
    _git(repo, "commit", "-q", "--allow-empty", "-m", "one")
    _git(tmp_path, "clone", "-q", "--bare", str(repo), str(tmp_path / "bare.git"))
    assert git_commit(tmp_path / "bare.git") == _git(repo, "rev-parse", "HEAD")
    other = tmp_path / "other"
    other.mkdir()
    _git(other, "init", "-q", "-b", "main")
    _git(other, "commit", "-q", "--allow-empty", "-m", "elsewhere")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    assert git_commit(repo) == _git(other, "rev-parse", "HEAD") != _git(repo, "--git-dir", str(repo / ".git"),
                                                                        "rev-parse", "HEAD")


def test_lean_backend_label():
    assert lean_backend_label(Config().lean.command) == "minilean"
    assert lean_backend_label(["/usr/bin/python3", "-m", "minilean", "--pantograph-version", "0.3.4"]) == "minilean"
    assert lean_backend_label(["/usr/bin/python3", "-m", "minilean"]) == "minilean"
    assert lean_backend_label(["/usr/bin/python3", "-m", "minilean.replay", "--corpus", "c.json"]) == "replay"
    assert lean_backend_label(["repl", "Mathlib"]) == "pantograph"


def test_groups_seed_and_settings_are_recorded_and_shown(tmp_path: Path, store: Store):
    from burnqed.eval.settings import EvalSettings

    settings = EvalSettings(backend="local", prompt_format="plain-tactic", num_candidates=8, temperature=0.8,
                            top_p=0.95, max_new_tokens=128, max_nodes=60, max_depth=50, timeout_s=300.0, alpha=0.5,
                            expand_batch=1, probe_tactics=[], verify=True, stop_at_first=True, value_weight=1.0,
                            value_ramp_depth=0, concurrency=1)
    sources = {"thm_a": "world", "thm_b": "world", "thm_c": "hand", "thm_d": None}
    result = build(two_passes(), theorem_sources=sources, seed=3, settings=settings)
    # thm_a within 5, thm_b within 25, thm_c within 40; thm_d never.
    assert [(g.group, g.budget, g.solved, g.total) for g in result.groups] == [
        ("world", 10, 1, 2), ("world", 30, 2, 2), ("world", 60, 2, 2),
        ("hand", 10, 0, 1), ("hand", 30, 0, 1), ("hand", 60, 1, 1),
        ("none", 10, 0, 1), ("none", 30, 0, 1), ("none", 60, 0, 1)]
    assert (result.seed, result.mode, result.settings) == (3, "step", settings)
    path = tmp_path / "eval.json"
    write_eval_result(result, path, store=store)
    assert load_eval_result(path, store=store) == result
    lines = render_eval_table(result).splitlines()
    assert lines[-2] == "by source at budget 60: world 2/2 (100.0 %), hand 1/1 (100.0 %), none 0/1 (0.0 %)"
    assert lines[-1] == "seed 3 · step search · 8 candidates at T 0.8 · top_p 0.95"


def test_a_repair_arms_header_says_its_repair_rounds() -> None:
    """A whole search that revised failed proofs with Lean's messages: its title says `whole+repair` and its
    settings line `repair_rounds`; the same search without repair says neither."""
    from burnqed.eval.settings import EvalSettings

    common = dict(backend="local", prompt_format="plain-tactic", num_candidates=4, temperature=1.0, top_p=0.95,
                  max_new_tokens=256, max_proofs=16, timeout_s=300.0, verify=True, stop_at_first=True, concurrency=1)
    attempts = [[TheoremResult(name="t", mode=SearchMode.WHOLE, proved=True, budget_at_proof=4, proofs_sampled=4,
                               time_s=1.0, proof="p")]]
    repaired = build(attempts, [8], theorem_names=["t"], mode=SearchMode.WHOLE, seed=0,
                     settings=EvalSettings(**common, repair_rounds=2, repair_message_tokens=512))
    text = render_eval_table(repaired)
    assert "whole+repair (budget in proofs)" in " ".join(text.split())
    assert text.splitlines()[-1] == ("seed 0 · whole+repair search · repair_rounds 2 (Lean's messages cut at 512 "
                                     "tokens) · 4 candidates at T 1 · top_p 0.95")
    plain = build(attempts, [8], theorem_names=["t"], mode=SearchMode.WHOLE, seed=0,
                  settings=EvalSettings(**common, repair_rounds=0))
    text = render_eval_table(plain)
    assert "whole (budget in proofs)" in " ".join(text.split()) and "repair" not in text
    assert text.splitlines()[-1] == "seed 0 · whole search · 4 candidates at T 1 · top_p 0.95"


def test_a_result_written_before_groups_and_settings_still_loads(tmp_path: Path, store: Store):
    raw = build(two_passes()).model_dump(mode="json")
    for key in ("groups", "seed", "settings"):
        del raw[key]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    old = load_eval_result(path, store=store)
    assert (old.groups, old.seed, old.settings) == ([], None, None)
    assert render_eval_table(old).splitlines()[-1] == "cumulative solved: 3/4; failures: exhausted 1"


# ----------------------------------------------------------------------------------- per-theorem detail


def test_per_theorem_says_what_happened_and_what_it_cost():
    start = TheoremResult(name="thm_a", proved=False, failure_reason=FailureReason.START_ERROR,
                          detail="unknown identifier 'foo'\nmore context", time_s=0.1)
    nothing = TheoremResult(name="thm_b", proved=False, failure_reason=FailureReason.EXHAUSTED, nodes_expanded=1,
                            time_s=0.5, policy_s=0.4)
    budget = TheoremResult(name="thm_c", proved=False, failure_reason=FailureReason.MAX_NODES, nodes_expanded=60,
                           edges=240, time_s=9.0, policy_s=5.0, lean_s=3.0, value_s=0.5, tokens=900)
    late = proved("thm_d", 80, 12.0)
    late = late.model_copy(update={"edges": 7, "policy_s": 1.5, "lean_s": 2.5})
    result = build([[start, nothing, budget, late]], wall_s=42.5)
    by_name = {t.name: t for t in result.per_theorem}
    assert by_name["thm_a"].detail == "Lean could not start the goal: unknown identifier 'foo'"
    assert by_name["thm_b"].detail == "the policy proposed nothing: no tactic or proof to try"
    assert by_name["thm_c"].detail == "budget reached: 60 expansions, 240 tactics tried"
    assert by_name["thm_d"].detail == "proved only after 80 expansions, beyond the largest budget"
    assert (by_name["thm_c"].edges, by_name["thm_c"].policy_s, by_name["thm_c"].lean_s,
            by_name["thm_c"].value_s) == (240, 5.0, 3.0, 0.5)
    assert (by_name["thm_d"].edges, by_name["thm_d"].lean_s) == (7, 2.5)
    assert result.wall_s == 42.5 and result.schema_version == SCHEMA_VERSION


def test_a_result_of_schema_4_loads_with_nothing_not_evaluated_and_prints_as_it_did(tmp_path: Path, store: Store):
    raw = build(two_passes()).model_dump(mode="json")
    raw["schema_version"] = 4
    del raw["not_evaluated"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    old = load_eval_result(path, store=store)
    assert (old.schema_version, old.not_evaluated, old.declarations) == (SCHEMA_VERSION, [], 4)  # read as current
    assert render_eval_table(old).splitlines()[-1] == "cumulative solved: 3/4; failures: exhausted 1"
    assert render_not_evaluated(old) == ""


def test_declarations_not_evaluated_are_counted_under_the_table_and_listed_with_line_and_reason():
    skipped = [SkippedDeclaration(name="broken", file="bench/x.lean", line=11, reason="unparsable_statement",
                                  detail="no `theorem … : type` declaration found"),
               SkippedDeclaration(name=None, file="bench/x.jsonl", line=None, reason="malformed_row",
                                  detail="invalid JSON")]
    result = build(two_passes()).model_copy(update={"not_evaluated": skipped})
    assert (result.total, result.declarations) == (4, 6)
    assert render_eval_table(result).splitlines()[-2:] == [
        "cumulative solved: 3/4; failures: exhausted 1",
        "of 6 declarations: 4 evaluated (every rate is of these), 2 not evaluated (listed below)"]
    listing = render_not_evaluated(result).splitlines()
    assert listing[0] == "mini: 2 of 6 declarations not evaluated"
    cells = [[cell.strip() for cell in re.split("[│┃]", line)[1:-1]] for line in listing if line[0] in "│┃"]
    assert cells == [["where", "declaration", "reason", "detail"],
                     ["bench/x.lean:11", "broken", "unparsable_statement", "no `theorem … : type` declaration found"],
                     ["bench/x.jsonl", "–", "malformed_row", "invalid JSON"]]
    assert render_theorem_table(result).splitlines()[-1].startswith(
        "solved (3/4; 2 more of the 6 declarations not evaluated): ")


def test_the_theorem_tables_print_brackets_as_written_not_as_markup():
    """rich reads `[word …]` as a style tag and drops it: a proof's `nlinarith [sq_nonneg x]`, a Lean message's
    `[propext, sorryAx]` and a name's brackets are text."""
    unproved = TheoremResult(name="thm_[b]", proved=False, failure_reason=FailureReason.START_ERROR,
                             detail="'thm_b' depends on axioms: [propext, sorryAx]")
    result = build([[proved("thm_a", 5, 1.0, proof="theorem thm_a : p := by\n  nlinarith [sq_nonneg x, mul_pos h]"),
                     unproved]], theorem_names=["thm_a", "thm_[b]"])
    result = result.model_copy(update={"not_evaluated": [SkippedDeclaration(
        name="odd[x]", file="bench/[y].lean", line=3, reason="unparsable_statement", detail="at [bold]here")]})
    def cells(text: str) -> list[list[str]]:
        return [[cell.strip() for cell in line.split("│")[1:-1]] for line in text.splitlines() if line[:1] == "│"]

    assert [(row[0], row[-1]) for row in cells(render_theorem_table(result, width=200))] == [
        ("thm_a", "nlinarith [sq_nonneg x, mul_pos h]"),
        ("thm_[b]", "Lean could not start the goal: 'thm_b' depends on axioms: [propext, sorryAx]")]
    assert cells(render_not_evaluated(result, width=200)) == [
        ["bench/[y].lean:3", "odd[x]", "unparsable_statement", "at [bold]here"]]


def test_results_of_schema_2_still_load(tmp_path: Path, store: Store):
    raw = build(two_passes()).model_dump(mode="json")
    raw["schema_version"] = 2
    for key in ("wall_s", "resumed"):
        del raw[key]
    for entry in raw["per_theorem"]:
        for key in ("detail", "edges", "policy_s", "lean_s", "value_s"):
            del entry[key]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    old = load_eval_result(path, store=store)
    assert old.schema_version == SCHEMA_VERSION and old.wall_s is None and old.per_theorem[0].detail is None


def test_theorem_table_names_the_solved_and_says_why_the_rest_failed():
    from burnqed.eval.per_theorem import render_theorem_table

    start = TheoremResult(name="thm_b", proved=False, failure_reason=FailureReason.START_ERROR,
                          detail="unknown identifier 'foo'")
    result = build([[proved("thm_a", 5, 1.0, proof="theorem thm_a : p := by\n  intro h\n  exact h"), start,
                     failed("thm_c", FailureReason.TIMEOUT, 9, 3.0), failed("thm_d", FailureReason.EXHAUSTED, 2, 1)]])
    text = render_theorem_table(result)
    lines = text.splitlines()
    row_a = next(line for line in lines if line.startswith("│ thm_a") or " thm_a " in line)
    assert "proved @5" in row_a and "intro h; exact h" in row_a
    assert "Lean could not start the goal: unknown identifier 'foo'" in text
    assert "time limit reached after 3.0 s" in text
    assert lines[-1] == "solved (1/4): thm_a"
