"""`eval --resume` continues only the eval that was interrupted: the identity each pass prefix records before its
first search (`_EVAL.json`) must match, and every committed theorem must be in the benchmark; every setting that
changes what a search finds refuses a finished eval, an eval's resume and a search's resume, naming itself."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from burnqed.config import DEFAULT_DENY, load_config
from burnqed.data.index import bundled_index_path, load_local_theorem_index, select_split
from burnqed.errors import InputError
from burnqed.eval.arms import EvalRequest, check_resumable
from burnqed.eval.identity import EvalIdentity, EvalJobSettings, record_identity
from burnqed.eval.resume import PassState, resume_state
from burnqed.provenance import IDENTITY_NAME, INPUTS_NAME
from burnqed.records.theorem import TheoremIndex
from burnqed.runner.reuse import Finished, check_reusable, eval_inputs, resume_prefix, search_inputs
from burnqed.storage import Store
from tests.trajectory.factories import simple_theorem, write_trajectory


def identity(index: TheoremIndex, *sets: str, budgets: tuple[int, ...] = (4, 8)) -> EvalIdentity:
    return EvalIdentity.of(index, EvalJobSettings.from_config(load_config(sets=sets), budgets), pass_n=1,
                           iteration=0, ebm=None)


def state(uri: Path, index: TheoremIndex, ident: EvalIdentity, store: Store, resume: bool = True) -> PassState:
    return resume_state(str(uri), index.theorems, list(ident.budgets), ident.mode, 0, resume, store=store,
                        identity=ident)


@pytest.fixture
def index() -> TheoremIndex:
    return load_local_theorem_index(bundled_index_path())


def test_a_resume_with_other_settings_or_theorems_is_refused_naming_the_difference(
    tmp_path: Path, store: Store, index: TheoremIndex
) -> None:
    first = identity(index)
    record_identity(str(tmp_path), first, store=store)
    assert (tmp_path / IDENTITY_NAME).exists()
    assert state(tmp_path, index, first, store).done == []  # the same eval: accepted
    with pytest.raises(InputError, match=r"policy\.temperature was 0\.8, now 0\.5"):
        state(tmp_path, index, identity(index, "policy.temperature=0.5"), store)
    # every sampling field is part of what an eval is (docs/search.md, "Every sampling field sent")
    assert {key: first.search[f"policy.{key}"] for key in ("top_k", "min_p", "repetition_penalty",
                                                           "frequency_penalty", "presence_penalty")} == {
        "top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0}
    with pytest.raises(InputError, match=r"policy\.repetition_penalty was 1\.0, now 1\.2"):
        state(tmp_path, index, identity(index, "policy.repetition_penalty=1.2"), store)
    subset = select_split(index, "test").model_copy(update={"name": index.name})  # --split: same file, fewer
    with pytest.raises(InputError, match=rf"theorems was {len(index.theorems)}, now {len(subset.theorems)}"):
        state(tmp_path, subset, identity(subset), store)
    swapped = index.model_copy(update={"theorems": [index.theorems[0].model_copy(update={"statement": "True"}),
                                                    *index.theorems[1:]]})
    with pytest.raises(InputError, match="the theorem set differs"):
        state(tmp_path, swapped, identity(swapped), store)
    with pytest.raises(InputError, match="budgets was"):
        state(tmp_path, index, identity(index, budgets=(4, 9)), store)
    # without --resume a prefix with nothing committed is a fresh start: its identity is replaced
    assert state(tmp_path, subset, identity(subset), store, resume=False).run_id is None


def test_a_prefix_holding_theorems_outside_the_benchmark_is_refused_even_without_a_recorded_identity(
    tmp_path: Path, store: Store, index: TheoremIndex
) -> None:
    prefix = tmp_path / "traj"
    write_trajectory(str(prefix), [simple_theorem("not_in_the_benchmark", 1)], every=1, store=store,
                     finish=False)
    assert not (prefix / IDENTITY_NAME).exists()  # written before the identity was recorded
    with pytest.raises(InputError, match=r"holds 1 theorems that are not in this benchmark "
                       r"\(e\.g\. 'not_in_the_benchmark'\)"):
        state(prefix, index, identity(index), store)


DENY_WITHOUT_SORRY = json.dumps([pattern for pattern in DEFAULT_DENY if pattern != r"\bsorry\b"])
# Issue 59: each of these changed what a search finds but not eval's identity: a finished eval was reused, a resume
# mixed theorems searched under both values. (mode, the changed setting, the difference named)
MISSED = [
    ("step", "search.revisits=3", "search.revisits was 16, now 3"),
    ("step", "search.revisit_penalty=2.5", "search.revisit_penalty was 1.0, now 2.5"),
    ("step", "search.revisit_temperature=0.7", "search.revisit_temperature was 1.2, now 0.7"),
    ("step", "search.value_reference=none", "search.value_reference was 'root', now 'none'"),
    ("step", "search.probe_logprob=-2", "search.probe_logprob was -1.0, now -2.0"),
    ("hybrid", "search.exploration=2", "search.exploration was 1.41, now 2.0"),
    ("hybrid", "search.prior_weight=0.5", "search.prior_weight was 1.0, now 0.5"),
    ("hybrid", "search.goal_penalty=0.6", "search.goal_penalty was 0.3, now 0.6"),
    ("hybrid", "search.max_rounds=7", "search.max_rounds was 30, now 7"),
    ("hybrid", "search.value_weight=0.5", "search.value_weight was 1.0, now 0.5"),
    ("whole", "policy.declaration_form=forall", "policy.declaration_form was 'binder', now 'forall'"),
    ("step", f"lean.deny={DENY_WITHOUT_SORRY}", r"""lean.deny changed: '\bsorry\b' removed"""),
]


@pytest.mark.parametrize(("mode", "setting", "difference"), MISSED, ids=[setting[:24] for _, setting, _ in MISSED])
def test_a_setting_that_changes_what_a_search_finds_refuses_a_finished_eval_and_a_resume(
    tmp_path: Path, store: Store, index: TheoremIndex, mode: str, setting: str, difference: str
) -> None:
    sets = (f"search.mode={mode}",)
    before, after = load_config(sets=sets), load_config(sets=(*sets, setting))
    was, now = identity(index, *sets), identity(index, *sets, setting)
    assert was.describe_difference(now) == difference
    # a finished eval (its result records eval_inputs): refused, naming the setting
    finished = Finished(str(tmp_path / "eval.json"), None, eval_inputs(was, before, store))
    with pytest.raises(InputError, match=f": {re.escape(difference)}; --force redoes it"):
        check_reusable(finished, eval_inputs(now, after, store), "eval result")
    # eval --resume: the identity its pass prefix recorded before its first search
    record_identity(str(tmp_path), was, store=store)
    with pytest.raises(InputError, match=f"started by an eval that differs from this one: {re.escape(difference)};"):
        state(tmp_path, index, now, store)
    # search --resume: the record of an interrupted search
    prefix = tmp_path / "search"
    prefix.mkdir()
    (prefix / INPUTS_NAME).write_text(search_inputs(before, store, index, shard=None, iteration=0, ebm=None)
                                      .model_dump_json(), encoding="utf-8")
    with pytest.raises(InputError, match=f"made with other inputs: {re.escape(difference)};"):
        resume_prefix(store, str(prefix), search_inputs(after, store, index, shard=None, iteration=0, ebm=None),
                      resume=True)


def test_settings_no_search_reads_change_no_identity(index: TheoremIndex, store: Store) -> None:
    """Workers, concurrency and another mode's settings do not make a finished eval differ."""
    first = identity(index)
    for setting in ("lean.workers=3", "search.concurrency=5", "search.speculate=0", "search.checkpoint_every=2",
                    "search.exploration=2", "search.max_nodes=7", "policy.max_inflight_requests=3"):
        assert first.describe_difference(identity(index, setting)) is None, setting
    cfg = load_config(sets=["search.mode=hybrid"])
    assert eval_inputs(identity(index, "search.mode=hybrid"), cfg, store).difference(
        eval_inputs(identity(index, "search.mode=hybrid", "search.revisits=3"), cfg, store)) is None


def test_each_arm_of_an_ablation_resumes_only_its_own_eval(tmp_path: Path, store: Store, index: TheoremIndex
                                                           ) -> None:
    """`eval --ablation --resume` checks both arms' prefixes before the first search: the arm without the value model
    is refused when it was started under another setting, though the first arm's matches."""
    (tmp_path / "ebm").mkdir()
    request = EvalRequest(str(tmp_path / "eval.json"), ebm=str(tmp_path / "ebm"), ablation=True, resume=True,
                          trajectories=str(tmp_path / "traj"))
    now = EvalJobSettings.from_config(load_config(sets=["search.revisits=3"]), (4, 8))
    earlier = EvalJobSettings.from_config(load_config(), (4, 8))
    first, second = request.arms()
    assert first.trajectories is not None and second.trajectories is not None and second.ebm is None
    record_identity(first.trajectories, EvalIdentity.of(index, now, pass_n=1, iteration=0, ebm=first.ebm), store=store)
    record_identity(second.trajectories, EvalIdentity.of(index, earlier, pass_n=1, iteration=0, ebm=None),
                    store=store)
    with pytest.raises(InputError, match=rf"--trajectories-out {re.escape(second.trajectories)} was started by an eval "
                       r"that differs from this one: search\.revisits was 16, now 3;"):
        check_resumable(request, index, now, store=store)
    record_identity(second.trajectories, EvalIdentity.of(index, now, pass_n=1, iteration=0, ebm=None), store=store)
    check_resumable(request, index, now, store=store)  # both arms the same eval: accepted


def test_a_value_model_named_from_another_folder_is_the_same_one(tmp_path: Path, index: TheoremIndex,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The identity records a local value model by its absolute URI: the same folder named relatively from another
    working folder resumes, another folder of the same relative name does not."""
    for folder in ("a", "b"):
        (tmp_path / folder / "ebm").mkdir(parents=True)
    settings = EvalJobSettings.from_config(load_config(), (4, 8))
    monkeypatch.chdir(tmp_path / "a")
    relative = EvalIdentity.of(index, settings, pass_n=1, iteration=0, ebm="ebm")
    assert relative.ebm == f"file://{tmp_path}/a/ebm"
    absolute = EvalIdentity.of(index, settings, pass_n=1, iteration=0, ebm=str(tmp_path / "a" / "ebm"))
    assert relative.describe_difference(absolute) is None
    monkeypatch.chdir(tmp_path / "b")
    assert relative.describe_difference(EvalIdentity.of(index, settings, pass_n=1, iteration=0, ebm="ebm")) == (
        f"ebm was 'file://{tmp_path}/a/ebm', now 'file://{tmp_path}/b/ebm'")


def test_a_finished_eval_whose_benchmark_lists_other_declarations_not_evaluated_is_redone(
        tmp_path: Path, store: Store, index: TheoremIndex) -> None:
    """The same theorems, and a broken statement deleted from the file: the finished result would list it still, so
    it is not reused; a resume goes on (its result lists them afresh)."""
    from burnqed.records.theorem import SkippedDeclaration

    broken = SkippedDeclaration(name="broken", file="x.lean", line=11, reason="unparsable_statement", detail="…")
    listed = index.model_copy(update={"skipped": [broken]})
    finished = Finished("x.json", None, eval_inputs(identity(listed), load_config(), store))
    with pytest.raises(InputError, match=re.escape("not evaluated was [\"x.lean:11: unparsable_statement\"], "
                                                   "now []")):
        check_reusable(finished, eval_inputs(identity(index), load_config(), store), "eval result")
    assert identity(listed).describe_difference(identity(index)) is None
