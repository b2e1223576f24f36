"""A file's lemmas as burnqed declares them (docs/lean.md, "One file: lemmas before the theorem"): the record of one
(`FileLemma`), their names (`LEMMA_PREFIX`), their block between the header and the theorem, and whether a proof's
tactics name one. The rules they pass before Lean are `soundness.check_lemmas`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from burnqed.text.completion import join_tactics
from leankit.statements import append_code

__all__ = ["LEMMA_PREFIX", "FileLemma", "lemma_block", "names_file_lemmas"]

LEMMA_PREFIX = "burnqed_lemma_"  # a file's lemmas are named this and their number, by burnqed, never by the model


@dataclass(frozen=True, slots=True)
class FileLemma:
    """A lemma the file declares between the header and the theorem: `theorem burnqed_lemma_<index> <statement> :=
    by` and its tactics, indented. The name is burnqed's; `statement` (its binders, ` : `, its type) and `tactics`
    are model text, read by `check_lemmas` before Lean sees them."""

    index: int
    statement: str
    tactics: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{LEMMA_PREFIX}{self.index}"

    def text(self) -> str:
        """The declaration as the file holds it, its last line ended."""
        declaration = append_code(f"theorem {self.name} {self.statement.strip()}", ":= by")
        return f"{declaration}\n{join_tactics(self.tactics)}\n"


def lemma_block(lemmas: Sequence[FileLemma]) -> str:
    """The lemmas as the file holds them between the header and the theorem, a blank line after each."""
    return "".join(f"{lemma.text()}\n" for lemma in lemmas)


def names_file_lemmas(tactics: Sequence[str]) -> bool:
    """Whether a counted proof's tactics use lemmas its file declares (`burnqed_lemma_<k>`, names burnqed gives and
    `check_lemmas` reserves: a proof without lemmas that names one does not compile). Such tactics are not a proof of
    the theorem on their own: training leaves them out as a whole proof (`sft.examples`)."""
    return any(LEMMA_PREFIX in tactic for tactic in tactics)
