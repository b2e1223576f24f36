"""A stored proof file read back (docs/lean.md, "One file"): the header it was assembled under (`assembled_header`)
and the lemmas it declares (`stored_lemmas`), each the inverse of `soundness.assemble_proof` on the file it wrote, so
a stored file is judged again exactly as it was when assembled.
"""

from __future__ import annotations

from collections.abc import Sequence

from burnqed.lean.declared_lemmas import LEMMA_PREFIX, FileLemma
from burnqed.lean.soundness import assemble_proof
from burnqed.lean.start import START_FORM
from burnqed.records.theorem import Theorem
from burnqed.text.completion import join_tactics
from leankit.statements import append_code

__all__ = ["assembled_header", "stored_lemmas"]

_INDENT = "  "  # `join_tactics`' indentation of a proof's lines under `:= by`


def assembled_header(proof: str, theorem: Theorem, tactics: Sequence[str]) -> str | None:
    """The header `proof` was assembled under: `proof` is `assemble_proof` of `theorem` with some header and `tactics`,
    and this is that header as the file holds it (trailing blanks gone; "" for none); None when `proof` is no such
    assembly. What the compile's pinned shape held the proof to (`pinned_starts`: the file begins with it)."""
    declaration = theorem.declaration(START_FORM)
    if declaration is None:
        return None
    tail = f"{append_code(declaration, ':= by')}\n{join_tactics(tactics)}\n"
    if not proof.endswith(tail):
        return None
    head = proof[: len(proof) - len(tail)]
    if not head:
        return ""
    return head[:-2] if head.endswith("\n\n") and head[:-2].strip() else None


def stored_lemmas(proof: str, theorem: Theorem, tactics: Sequence[str]) -> tuple[FileLemma, ...] | None:
    """The lemmas `proof` was assembled with: `proof` is `assemble_proof(theorem, tactics, lemmas)` for these, each
    lemma's proof one tactic block (so the file is reproduced byte for byte); () for a file without lemmas; None when
    `proof` is no such assembly. A stored file read back for its re-check: `check_lemmas` and the compile's pin judge
    what is read, exactly as when it was assembled."""
    plain = assemble_proof(theorem, tactics)
    if plain is None or proof == plain:
        return None if plain is None else ()
    head = f"{theorem.header.rstrip()}\n\n" if theorem.header else ""
    tail = plain[len(head) :]
    if not proof.startswith(head) or not proof.endswith(tail) or len(proof) < len(head) + len(tail):
        return None
    middle = proof[len(head) : len(proof) - len(tail)]
    lemmas: list[FileLemma] = []
    while middle:
        lemma = _first_lemma(middle, len(lemmas) + 1)
        if lemma is None:
            return None
        lemmas.append(lemma)
        middle = middle[len(lemma.text()) + 1 :]
    return tuple(lemmas)


def _first_lemma(text: str, index: int) -> FileLemma | None:
    """The lemma `index` that `text` begins with, or None: its statement up to the first `:= by` line end, its proof
    the indented lines after it up to the blank line before the next lemma (or the end), read when the lemma so read
    writes exactly that text (`FileLemma.text`). One pass of `str.find` each: linear in `text`."""
    opening = f"theorem {LEMMA_PREFIX}{index} "
    start = text.find(":= by\n") + 6
    if not text.startswith(opening) or start < 6:
        return None
    end = text.find(f"\n\ntheorem {LEMMA_PREFIX}{index + 1} ", start)
    end = len(text) - 2 if end == -1 else end
    block = "\n".join(line[len(_INDENT) :] for line in text[start:end].split("\n"))
    lemma = FileLemma(index, text[len(opening) : start - 6].rstrip(), (block,))
    return lemma if text[: end + 2] == f"{lemma.text()}\n" else None
