"""Shared nouns of burnqed, one module for each kind of record. No I/O here.

    from burnqed.records.enums import DeclarationForm, SearchMode    # how a theorem is written, how it is searched
    from burnqed.records.replies import Goal, TacticResult           # what Lean answered
    from burnqed.records.theorem import Theorem, TheoremIndex        # a theorem index entry, its name, its split
    from burnqed.records.results import Edge, TheoremResult          # what a search gave: trajectory rows, results

Wire formats are parsed into these records once, at the edge (`burnqed.lean.protocol` for Lean replies,
`Theorem`/`TheoremIndex` for theorem index files), and everything inside works on records.
Hot-path records are frozen slotted dataclasses; file formats are pydantic models (validated on load).
"""
