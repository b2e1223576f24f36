"""The value function in search: one batched encode per expansion, energies from the head, caches."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest
import torch

from burnqed.config import LeanConfig
from burnqed.ebm.formats import HeadSpec
from burnqed.ebm.head import GoalConditionedEnergyHead
from burnqed.ebm.scorer import EnergyScorer
from burnqed.lean.guard import TacticGuard
from burnqed.lean.inprocess import InProcessReplay
from burnqed.policy.base import AsyncClosing, Sampling
from burnqed.records.theorem import Theorem
from burnqed.search.step import StepSettings, prove
from burnqed.storage import Store
from burnqed.text.prompt import PromptFormat, build_embedding_text
from leankit.corpus import load_corpus
from minilean.replay.replay_server import ReplayServer
from tests.doubles.ebm_doubles import CountingEncoder, vector
from tests.doubles.policy_double import ScriptedPolicy, corpus_oracle

FMT = PromptFormat.PLAIN_TACTIC


def head() -> GoalConditionedEnergyHead:
    torch.manual_seed(0)
    return GoalConditionedEnergyHead(HeadSpec(embedding_dim=8, hidden_dims=[16, 8], dropout=0.5, spectral_norm=True,
                                              first_layer_scale=0.1)).eval()


def test_one_encode_per_call_for_the_new_states_and_the_goal_once() -> None:
    encoder = CountingEncoder()
    h = head()
    scorer = EnergyScorer(h, encoder, FMT)
    energies = asyncio.run(scorer.energies("⊢ goal", ["a", "b", "a"]))
    assert encoder.calls == [[build_embedding_text(FMT, t) for t in ("⊢ goal", "a", "b")]]
    with torch.no_grad():
        expected = h(torch.tensor([vector(build_embedding_text(FMT, s)) for s in ("a", "b")]),
                     torch.tensor(vector(build_embedding_text(FMT, "⊢ goal"))))
    assert energies == pytest.approx([float(expected[0]), float(expected[1]), float(expected[0])], abs=1e-6)
    again = asyncio.run(scorer.energies("⊢ goal", ["b", "c"]))  # the goal is cached, "b" too
    assert encoder.calls[1] == [build_embedding_text(FMT, "c")] and again[0] == energies[1]
    assert asyncio.run(scorer.energies("⊢ goal", ["c", "a"])) == [again[1], energies[0]]
    assert len(encoder.calls) == 2  # everything known: no encode
    assert asyncio.run(scorer.energies("⊢ other goal", ["a"])) != [energies[0]]  # energies depend on the goal
    assert encoder.calls[2] == [build_embedding_text(FMT, t) for t in ("⊢ other goal", "a")]
    assert asyncio.run(scorer.energies("⊢ goal", [])) == [] and len(encoder.calls) == 3
    asyncio.run(scorer.close())
    assert encoder.closed


def test_a_tiny_energy_cache_still_answers_every_state() -> None:
    encoder = CountingEncoder()
    scorer = EnergyScorer(head(), encoder, FMT, cache_size=1)
    first = asyncio.run(scorer.energies("g", ["a", "b", "c"]))
    assert asyncio.run(scorer.energies("g", ["a", "b", "c"])) == first
    assert [len(call) for call in encoder.calls] == [4, 2]  # only "c" was remembered; a, b encoded again


class Recording(AsyncClosing):
    """A `ValueFn` wrapper recording every call."""

    def __init__(self, inner: EnergyScorer) -> None:
        self.inner = inner
        self.calls: list[tuple[str, list[str]]] = []

    async def energies(self, goal: str, states: Sequence[str]) -> list[float]:
        self.calls.append((goal, list(states)))
        return await self.inner.energies(goal, states)

    async def close(self) -> None:
        """Nothing to release."""


def test_search_with_the_ebm_calls_the_value_function_once_per_expansion_batched() -> None:
    corpus = load_corpus()
    encoder = CountingEncoder()
    value = Recording(EnergyScorer(head(), encoder, FMT))
    settings = StepSettings(sampling=Sampling(n=16), max_nodes=30, timeout_s=30.0)
    names = ["algebra_abs_lt_interval", "algebra_2x_plus_3_eq_11", "algebra_reciprocal_equation"]
    total_children = 0
    for name in names:
        spec = corpus.by_name(name)
        assert spec is not None
        calls_before = len(value.calls)
        outcome = asyncio.run(prove(Theorem.from_recorded(spec), InProcessReplay(ReplayServer(corpus)),
                                    ScriptedPolicy(corpus_oracle(corpus)), settings,
                                    TacticGuard.from_config(LeanConfig()), value))
        assert outcome.result.proved
        scored = [e for e in outcome.edges if e.energy is not None]
        calls = value.calls[calls_before:]
        # one call per expansion that produced new states, carrying all of them; the first call also
        # carries the root's own state (value_reference "root": energies are taken relative to it)
        root = outcome.edges[0].state_before
        assert len(calls) == len({e.parent_id for e in scored}) >= 1
        assert calls[0][1][0] == root
        asked = [s for _, states in calls for s in states][1:]
        assert sorted(asked) == sorted(e.state_after or "" for e in scored)
        assert all(goal == outcome.edges[0].state_before for goal, _ in calls)
        total_children += len(scored)
    assert len(value.calls) >= 5 and any(len(states) > 1 for _, states in value.calls)
    assert len(encoder.calls) == len(value.calls)  # one encode per value call
    # every state once (the root's among them), every goal once
    assert encoder.texts == total_children + 2 * len(names)
    assert value.inner.calls == len(value.calls)


def test_the_energy_scorer_scores_hybrid_nodes_once_per_round() -> None:
    from burnqed.search.hybrid import prove_hybrid
    from burnqed.search.hybrid_settings import HybridSettings

    corpus = load_corpus()
    spec = corpus.by_name("algebra_abs_lt_interval")
    assert spec is not None
    encoder = CountingEncoder()
    value = Recording(EnergyScorer(head(), encoder, FMT))
    settings = HybridSettings(sampling=Sampling(stop=("```",)), num_proofs=16, min_proofs=16, timeout_s=30.0)
    outcome = asyncio.run(prove_hybrid(Theorem.from_recorded(spec), InProcessReplay(ReplayServer(corpus)),
                                       ScriptedPolicy(corpus_oracle(corpus)), settings,
                                       TacticGuard.from_config(LeanConfig()), value))
    assert outcome.result.proved and outcome.result.value_s > 0
    scored = [e for e in outcome.edges if e.energy is not None]
    assert scored and len(value.calls) <= outcome.result.nodes_expanded  # at most one call per round
    assert sorted(s for _, states in value.calls for s in states) == sorted(e.state_after or "" for e in scored)
    assert all(goal == outcome.edges[0].state_before for goal, _ in value.calls)


@pytest.mark.slow
def test_open_value_fn_refuses_a_head_trained_on_another_encoder(tiny_model_dir: Path, tmp_path: Path,
                                                                 store: Store) -> None:
    from burnqed.commands.edges import open_value_fn
    from burnqed.config import load_config
    from burnqed.ebm.encoder_identity import local_identity
    from burnqed.errors import ConfigError
    from burnqed.policy.localmodel import LocalModel
    from tests.ebm.test_train import publish

    model = LocalModel.load(tiny_model_dir, device="cpu")
    tiny = local_identity(str(tiny_model_dir), str(tiny_model_dir), model.encoder_spec("mean", False, 4096))
    model.close()
    assert (tiny.pooling, tiny.max_tokens, tiny.dtype, tiny.layer) == ("mean", 2048, "float32", -1)
    trained_on_tiny = tmp_path / "tiny"
    publish(trained_on_tiny, encoder=tiny, dim=64, store=store)
    trained_on_other = tmp_path / "other"
    publish(trained_on_other, encoder=tiny.model_copy(update={"digest": "0123456789abcdef"}), dim=64, store=store)

    async def score(uri: Path, *sets: str) -> list[float]:
        async with open_value_fn(str(uri), load_config(sets=[f"policy.model={tiny_model_dir}", *sets]),
                                 store=store) as value:
            assert isinstance(value, EnergyScorer)
            return await value.energies("⊢ 1 + 1 = 2", ["⊢ 2 = 2", "⊢ True"])

    energies = asyncio.run(score(trained_on_tiny))
    assert len(energies) == 2 and energies[0] != energies[1]
    for uri, sets, difference in (
        (trained_on_other, (), f"(digest 0123456789abcdef vs {tiny.digest})"),
        (trained_on_tiny, ("ebm.pooling=last",), "(pooling mean vs last)"),
        (trained_on_tiny, ("ebm.normalize=true",), "(normalize False vs True)"),
        (trained_on_tiny, ("ebm.encoder_max_tokens=512",), "(max_tokens 2048 vs 512)"),
    ):
        with pytest.raises(ConfigError) as refused:
            asyncio.run(score(uri, *sets))
        message = str(refused.value)
        assert message.startswith(f"value model {uri} was trained on embeddings of burnqed ") and "\n" not in message
        assert difference in message, message
