"""`eval --resume` continues only the eval that was interrupted: the identity each pass prefix records before its
first search (`_EVAL.json`) must match, and every committed theorem must be in the benchmark."""

from __future__ import annotations

from pathlib import Path

import pytest

from burnqed.config import load_config
from burnqed.data.index import bundled_index_path, load_local_theorem_index, select_split
from burnqed.errors import InputError
from burnqed.eval.run import IDENTITY_NAME, EvalIdentity, EvalJobSettings, PassState, record_identity, resume_state
from burnqed.records import TheoremIndex
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
    with pytest.raises(InputError, match=r"search setting temperature was 0\.8, now 0\.5"):
        state(tmp_path, index, identity(index, "policy.temperature=0.5"), store)
    # every sampling field is part of what an eval is (docs/search.md, "Every sampling field sent")
    assert {key: first.search[key] for key in ("top_k", "min_p", "repetition_penalty", "frequency_penalty",
                                               "presence_penalty")} == {
        "top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0}
    with pytest.raises(InputError, match=r"search setting repetition_penalty was 1\.0, now 1\.2"):
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
