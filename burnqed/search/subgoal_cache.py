"""The subgoal cache of sketch search: proofs of subgoals, keyed by the subgoal in normal form with its context.

    key = subgoal_key(goal, header)                # the target and every hypothesis, up to spelling; `?m.N` dropped
    cache = SubgoalCache()                         # in memory
    for tactics in cache.lookup(key): ...          # proofs stored under exactly this key, oldest first
    cache.store(key, ["nlinarith [h₀]"], theorem="mathd_algebra_48")
    cache.stats                                    # lookups, hits, misses, rejected, stored

A key holds the header, each hypothesis (its name, type and value) and the target, each in
`leankit.normal_form.statement_normal_form`: two subgoals share a key only when every hypothesis has the same name and
type (a proof names its hypotheses) under the same header. A draft's `?m.N` values are dropped (Lean 4.22 writes them
for the holes before; docs/lean.md, "Sketches"). A cached proof is a candidate only: the search re-checks it on the
subgoal in Lean before it counts (`record_hit` / `record_rejected`), and the assembled proof is compiled as any proof.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from burnqed.records import Goal
from leankit.normal_form import statement_normal_form

_METAVARIABLE = re.compile(r"\?m\.\d+")


@dataclass(frozen=True, slots=True)
class SubgoalKey:
    """A subgoal as the cache keys it: `text` the normal-form context and target (one line per part), `digest` its
    SHA-256 (what a stored entry is named by)."""

    text: str
    digest: str


def _part(text: str) -> str:
    return statement_normal_form(" ".join(text.split()))


def subgoal_key(goal: Goal, header: str | None) -> SubgoalKey:
    """The cache key of `goal` (as Lean printed it) in a theorem whose header is `header` (see the module docstring)."""
    lines = [f"header {' '.join((header or '').split())}"]
    for variable in goal.variables:
        value = variable.value
        if value is not None and _METAVARIABLE.fullmatch(value.strip()):
            value = None
        shown = f"{variable.name} : {_part(variable.type)}"
        lines.append(shown if value is None else f"{shown} := {_part(value)}")
    lines.append(f"⊢ {_part(goal.target)}")
    text = "\n".join(lines)
    return SubgoalKey(text, hashlib.sha256(text.encode()).hexdigest())


@dataclass(slots=True)
class CacheStats:
    """What one run asked of the cache: lookups, hits (a stored proof re-checked and used), misses (nothing stored),
    rejected (stored proofs Lean refused on re-check) and stored (proofs added)."""

    lookups: int = 0
    hits: int = 0
    misses: int = 0
    rejected: int = 0
    stored: int = 0

    @property
    def hit_rate(self) -> float | None:
        """Hits per lookup; None before any lookup (not measured, never 0)."""
        return self.hits / self.lookups if self.lookups else None


@dataclass(slots=True)
class SubgoalCache:
    """Proofs of subgoals by key, in memory (see the module docstring)."""

    entries: dict[str, list[list[str]]] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)  # digest → key text: a digest names one key, never two
    stats: CacheStats = field(default_factory=CacheStats)

    def lookup(self, key: SubgoalKey) -> list[list[str]]:
        """The proofs stored under `key`, oldest first (a copy); counts a lookup, and a miss when there are none."""
        self.stats.lookups += 1
        found = [list(tactics) for tactics in self.entries.get(key.digest, [])] if self._same(key) else []
        if not found:
            self.stats.misses += 1
        return found

    def record_hit(self) -> None:
        """A proof `lookup` gave passed its re-check in the new context."""
        self.stats.hits += 1

    def record_rejected(self) -> None:
        """A proof `lookup` gave failed its re-check in the new context."""
        self.stats.rejected += 1

    def store(self, key: SubgoalKey, tactics: list[str], theorem: str) -> None:
        """Add a proof of `key`'s subgoal that Lean accepted (found in `theorem`'s search); a proof already stored
        under the key is not stored twice."""
        if not tactics:
            raise ValueError(f"an empty proof of a subgoal of {theorem} cannot be cached")
        if not self._same(key):
            raise ValueError(f"digest {key.digest[:12]} names two keys; refusing to mix them")
        self.keys[key.digest] = key.text
        proofs = self.entries.setdefault(key.digest, [])
        if list(tactics) not in proofs:
            proofs.append(list(tactics))
            self.stats.stored += 1

    def _same(self, key: SubgoalKey) -> bool:
        known = self.keys.get(key.digest)
        return known is None or known == key.text
