"""summarize/render_summary on a small hand-built trajectory with exact expected numbers."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from burnqed.records.results import EdgeOutcome, FailureReason
from burnqed.stages.summary import _median, render_summary, summarize
from burnqed.storage import Store
from burnqed.trajectory.labels import label_edges
from tests.trajectory.factories import edge, result, write_trajectory

OK, CLOSED, ERROR, TIMEOUT, REFUSED = (EdgeOutcome.OK, EdgeOutcome.CLOSED, EdgeOutcome.ERROR,
                                       EdgeOutcome.TIMEOUT, EdgeOutcome.REFUSED)


def build(tmp_path: Path, *, store: Store) -> str:
    a = [edge(1, 0, OK), edge(2, 0, ERROR), edge(3, 0, OK), edge(4, 1, CLOSED, 2), edge(5, 1, TIMEOUT, 2)]
    label_edges(a, [4], True)
    b = [edge(1, 0, OK), edge(2, 0, REFUSED), edge(3, 1, OK, 2)]
    label_edges(b, [], False)
    d = [edge(1, 0, CLOSED), edge(2, 0, OK)]
    label_edges(d, [1], True)
    uri = str(tmp_path / "traj")
    write_trajectory(uri, [
        (result("A", True, edges=5, depth=2, time_s=10, policy_s=6, lean_s=3, value_s=1), a),
        (result("B", reason=FailureReason.MAX_NODES, edges=3, time_s=5, policy_s=4, lean_s=1), b),
        (result("C", reason=FailureReason.START_ERROR, time_s=0.5, lean_s=0.5), []),
        (result("D", True, edges=2, depth=1, time_s=4, policy_s=2, lean_s=2), d),
    ], every=2, store=store)
    return uri


def test_summary_numbers(tmp_path: Path, store: Store):
    s = summarize(build(tmp_path, store=store), store=store)
    assert (s.parts, s.theorems, s.proved, s.proof_rate, s.edges) == (2, 4, 2, 0.5, 10)
    assert s.outcomes == {"ok": 5, "closed": 2, "error": 1, "timeout": 1, "refused": 1, "prompt_rejected": 0}
    assert s.labels == {"positive": 3, "negative": 5, "unknown": 2}
    assert s.proof_depths == {1: 1, 2: 1}
    # expansions: A/0 (3 edges), A/1 (2), B/0 (2), B/1 (1), D/0 (2)
    assert (s.expansions, s.candidates_mean, s.candidates_median) == (5, 2.0, 2.0)
    assert (s.time_s, s.policy_s, s.lean_s, s.value_s) == (19.5, 12.0, 6.5, 1.0)
    assert s.policy_frac == pytest.approx(12 / 19.5)
    assert s.lean_frac == pytest.approx(6.5 / 19.5)
    assert s.value_frac == pytest.approx(1 / 19.5)
    assert s.failure_reasons == {"max_nodes": 1, "start_error": 1}


def test_render_summary_shows_the_numbers(tmp_path: Path, store: Store):
    text = render_summary(summarize(build(tmp_path, store=store), store=store))
    assert "proved 2/4 (50.0%), 10 edges, 5 expansions" in text
    assert "median 2" in text
    for needle in ("closed", "2 (20.0%)", "positive", "3 (30.0%)", "max_nodes", "1 (50.0%)", "61.5%"):
        assert needle in text
    assert "\x1b[" not in text


def test_summary_counts_tokens_and_lean_calls_per_mode(tmp_path: Path, store: Store):
    uri = str(tmp_path / "traj")
    write_trajectory(uri, [
        (result("A", True, mode="hybrid", tokens=900, lean_calls=40, proofs_sampled=24), []),
        (result("B", mode="hybrid", tokens=600, lean_calls=30, proofs_sampled=32), []),
        (result("C", True, tokens=300, lean_calls=12), []),
    ], store=store)
    s = summarize(uri, store=store)
    assert (s.tokens, s.lean_calls, s.proofs_sampled, s.tokens_per_proof) == (1800, 82, 56, 900.0)
    assert {m: (n.theorems, n.proved, n.tokens, n.lean_calls, n.proofs_sampled) for m, n in s.modes.items()} == {
        "hybrid": (2, 1, 1500, 70, 56), "step": (1, 1, 300, 12, 0)}
    rows = [[c.strip() for c in line.strip("│").split("│")] for line in render_summary(s).splitlines()
            if line.startswith("│")]
    assert ["hybrid", "2", "1", "1500", "1500", "70", "56"] in rows
    assert ["all", "3", "2", "1800", "900", "82", "56"] in rows


def test_summary_of_a_missing_prefix_is_all_zero(tmp_path: Path, store: Store):
    s = summarize(str(tmp_path / "none"), store=store)
    assert (s.theorems, s.edges, s.proof_rate, s.expansions, s.candidates_median, s.policy_frac) == (0, 0, 0, 0, 0, 0)
    assert s.outcomes == dict.fromkeys(("ok", "closed", "error", "timeout", "refused", "prompt_rejected"), 0)
    assert "proved 0/0" in render_summary(s)


@pytest.mark.parametrize(
    ("values", "median"),
    [({}, 0.0), ({3: 1}, 3.0), ({1: 1, 4: 1}, 2.5), ({1: 2, 5: 1}, 1.0), ({2: 3, 7: 3}, 4.5),
     ({1: 1, 2: 1, 9: 1}, 2.0)],
)
def test_median_from_a_histogram(values: dict[int, int], median: float):
    assert _median(Counter(values)) == median
