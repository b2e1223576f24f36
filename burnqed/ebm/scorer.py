"""The value function search uses: `EnergyScorer`, a `ValueFn` over a trained head and an embedding encoder.

    head, manifest = load_value_model("runs/iter_1/ebm", store=store)
    scorer = EnergyScorer(head, encoder, manifest.prompt_format)
    await scorer.energies(goal, [state_1, state_2, ...])      # one encode call for the states not seen before

Per call the new states (and the goal, the first time) are embedded in one encoder call, the head runs in a worker
thread, and energies are remembered per (goal, state) (docs/ebm.md, "Scoring in search"). Wiring (which encoder,
the identity check) is `commands.edges.open_value_fn`. This module imports torch at the top: import it inside the
functions that need it.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TypeVar

import torch

from burnqed import storage
from burnqed.ebm.formats import MANIFEST_FILE, EbmManifest
from burnqed.ebm.head import GoalConditionedEnergyHead, load_head
from burnqed.errors import InputError, PolicyError
from burnqed.policy.base import AsyncClosing, Encoder
from burnqed.text.prompt import PromptFormat, build_embedding_text

GOAL_CACHE = 4096  # goal embeddings kept (one per theorem being searched)

K = TypeVar("K")
V = TypeVar("V")


def _remember(table: OrderedDict[K, V], key: K, value: V, size: int) -> None:
    """Insert into an LRU table of at most `size` entries (size 0: keep nothing)."""
    if size <= 0:
        return
    table[key] = value
    table.move_to_end(key)
    while len(table) > size:
        table.popitem(last=False)


def load_value_model(
    uri: str, device: str = "cpu", *, store: storage.Store
) -> tuple[GoalConditionedEnergyHead, EbmManifest]:
    """The trained head at `uri` (a finished `train-ebm` output, local or remote) in eval mode, and its manifest."""
    if store.is_file(uri):
        raise InputError(f"--ebm {uri} is a file: --ebm must be a value-model folder (a train-ebm output)")
    if not store.is_done(uri):
        raise InputError(f"{uri} is not a finished value model (no {storage.MARKER_NAME}); train one with "
                         "`burnqed train-ebm --output URI`")
    folder = store.local_input(uri)
    manifest = store.read_model(storage.join(uri, MANIFEST_FILE), EbmManifest, "EBM manifest",
                                hint="format: docs/ebm.md")
    head = load_head(manifest.head, folder / manifest.weights, device)
    head.eval()
    return head, manifest


class EnergyScorer(AsyncClosing):
    """`ValueFn`: energies of states under a goal from `head` over `encoder`'s embeddings (module docstring)."""

    def __init__(self, head: GoalConditionedEnergyHead, encoder: Encoder, fmt: PromptFormat, *,
                 cache_size: int = 200_000) -> None:
        self.head = head.baked()
        self.encoder = encoder
        self.fmt = fmt
        self.cache_size = cache_size
        self.device = next(head.parameters()).device
        self._goals: OrderedDict[str, torch.Tensor] = OrderedDict()
        self._energies: OrderedDict[tuple[str, str], float] = OrderedDict()
        self._lock = threading.Lock()
        self.encode_calls = 0  # encoder calls made
        self.encoded = 0  # texts embedded
        self.calls = 0  # energies() calls

    async def energies(self, goal: str, states: Sequence[str]) -> list[float]:
        """One energy per state (lower = more promising), conditioned on the root `goal`."""
        self.calls += 1
        known: dict[str, float] = {}
        for state in states:
            value = self._energies.get((goal, state))
            if value is not None:
                self._energies.move_to_end((goal, state))
                known[state] = value
        todo = list(dict.fromkeys(s for s in states if s not in known))
        if todo:
            goal_vector = self._goals.get(goal)
            texts = ([] if goal_vector is not None else [goal]) + todo
            vectors = await self.encoder.encode([build_embedding_text(self.fmt, text) for text in texts])
            self.encode_calls += 1
            self.encoded += len(texts)
            if len(vectors) != len(texts):
                raise PolicyError(f"the encoder returned {len(vectors)} embeddings for {len(texts)} texts")
            if goal_vector is None:
                goal_vector = torch.tensor(vectors[0], dtype=torch.float32)
                _remember(self._goals, goal, goal_vector, GOAL_CACHE)
                vectors = vectors[1:]
            values = await asyncio.to_thread(self._score, goal_vector, vectors)
            for state, value in zip(todo, values, strict=True):
                known[state] = value
                _remember(self._energies, (goal, state), value, self.cache_size)
        return [known[state] for state in states]

    def _score(self, goal: torch.Tensor, vectors: list[list[float]]) -> list[float]:
        with self._lock, torch.no_grad():
            states = torch.tensor(vectors, dtype=torch.float32, device=self.device)
            energies = self.head(states, goal.to(self.device))
            return [float(e) for e in energies.cpu().tolist()]

    async def close(self) -> None:
        """Close the encoder."""
        await self.encoder.close()
