"""The failed proofs the RL stage's repair prompts revise (docs/training.md, "GRPO stage"): the trajectory rows of
earlier searches that hold Lean's messages on a failed proof (search.repair_rounds > 0), of the theorems RL prompts,
and the one failed proof each theorem's repair prompt shows.

    found = read_failed_proofs(trajectories, theorems, store=store)   # every distinct one, by theorem
    chosen = pick_failed_proofs(found, seed=cfg.rl.seed)                # one per theorem that has any, seeded
    LeanReward(theorems, open_pool, guard, RewardSettings(fmt, form, repair=repair_fmt), failed=chosen)

A row counts when its theorem result (the same run's) shows the theorem RL prompts: the same header, and its
declaration in either form (a search of another statement under the same name is left out, and so is a theorem whose
answer is open: its failed attempt's answer, which the repair prompt shows, is not recorded). Nothing is read back out
of text: the feedback is the record the search wrote (`text.feedback.Feedback`), and a trajectory of schema version 1
holds none.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from burnqed.errors import InputError
from burnqed.records.enums import DeclarationForm
from burnqed.records.results import TheoremResult
from burnqed.records.theorem import Theorem
from burnqed.search.answer import AnswerSlot
from burnqed.text.feedback import Feedback

if TYPE_CHECKING:
    from burnqed.storage import Store


@dataclass(frozen=True, slots=True)
class FailedProof:
    """A failed proof of `theorem` as its trajectory row records it: what a repair prompt shows of it."""

    theorem: str
    feedback: Feedback  # the proof as it was checked, Lean's messages on it (capped), the goal at the first error
    revision: int  # its place in its repair chain (the row's `revision`): the round a repair prompt names

    @property
    def key(self) -> tuple[int, str]:
        """What makes two rows the same failed proof (the same repair prompt): the round and the feedback record."""
        return self.revision, self.feedback.to_json()


@dataclass(frozen=True, slots=True)
class FailedProofs:
    """The distinct failed proofs of each theorem (in the theorems' order, each theorem's sorted by `key`), and the
    rows with feedback that were left out."""

    by_theorem: dict[str, list[FailedProof]] = field(default_factory=dict)
    other_statement: int = 0  # rows of a search that showed another header or declaration, or recorded none
    open_answer: int = 0  # rows of a theorem whose answer is open

    def __len__(self) -> int:
        return sum(len(found) for found in self.by_theorem.values())


def read_failed_proofs(uris: Sequence[str], theorems: Sequence[Theorem], *, store: Store) -> FailedProofs:
    """Every distinct failed proof with Lean's messages that the searches of `uris` recorded for `theorems` (module
    docstring); InputError for a prefix without committed parts or a feedback record that does not parse."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from burnqed.trajectory.reader import read_edges, require_trajectories

    wanted = {theorem.name: theorem for theorem in theorems}
    found: dict[str, dict[tuple[int, str], FailedProof]] = {name: {} for name in wanted}
    other = opened = 0
    for uri in uris:
        shows = {(part.run_id, result.name): _shows(wanted[result.name], result)
                 for part in require_trajectories(uri, store=store) for result in part.theorems
                 if result.name in wanted}
        table = read_edges(uri, ["run_id", "theorem", "node_id", "revision", "feedback"], store=store)
        keep = pc.and_(pc.is_valid(table["feedback"]), pc.is_in(table["theorem"], value_set=pa.array(list(wanted))))
        rows = table.filter(keep).to_pydict()
        for run, name, node, revision, text in zip(rows["run_id"], rows["theorem"], rows["node_id"], rows["revision"],
                                                   rows["feedback"], strict=True):
            if not AnswerSlot(wanted[name]).record_repairable:
                opened += 1
                continue
            if not shows.get((run, name), False):
                other += 1
                continue
            try:
                feedback = Feedback.from_json(text)
            except ValueError as exc:
                raise InputError(f"trajectory {uri}: theorem {name!r}, row {node}: {exc}") from None
            failed = FailedProof(name, feedback, revision)
            found[name].setdefault(failed.key, failed)
    by_theorem = {name: [failed[key] for key in sorted(failed)] for name, failed in found.items() if failed}
    return FailedProofs(by_theorem, other, opened)


def _shows(theorem: Theorem, result: TheoremResult) -> bool:
    """Whether a search's result shows `theorem`: its header, and its declaration in one of the forms."""
    declarations: Iterable[str | None] = (theorem.declaration(form) for form in DeclarationForm)
    return result.declaration is not None and result.header == theorem.header and result.declaration in declarations


def pick_failed_proofs(found: FailedProofs, seed: int) -> list[FailedProof]:
    """One failed proof of each theorem that has any, in the theorems' order: drawn uniformly from its distinct
    failed proofs by a generator seeded with (`seed`, the theorem's name), so a theorem's draw depends on no other
    theorem's."""
    return [random.Random(f"{seed}\0{name}").choice(failed) for name, failed in found.by_theorem.items()]
