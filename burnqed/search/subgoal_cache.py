"""The subgoal cache of sketch search: proofs of subgoals, keyed by the subgoal in normal form with its context, in
memory or persisted under a run's root and shared by every job that opens it (docs/pipeline.md, "Subgoal cache").

    key = subgoal_key(goal, header)                # the target and every hypothesis, up to spelling; `?m.N` dropped
    cache = SubgoalCache()                         # in memory, one job
    env = cache_environment(cfg.lean, str(pool.version))       # the Lean facts a proof was checked under
    cache = SubgoalCache.open(store, Layout(root).subgoal_cache(), env)   # persisted, shared by shards and iterations
    for tactics in cache.lookup(key, limit=4): ... # at most 4 proofs of exactly this key, shortest first
    cache.record_hit()  /  cache.record_rejected(key, tactics)   # what Lean said on re-checking one in this context
    cache.store(key, ["nlinarith [h₀]"], theorem="mathd_algebra_48")   # a proof Lean accepted; written at once
    record_stats(marker_extra, cache.stats)        # into an output's record: lookups, hits, …, hit_rate

A key holds the header, each hypothesis (its name, type and value) and the target, each in
`leankit.normal_form.statement_normal_form`: two subgoals share a key only when every hypothesis has the same name and
type (a proof names its hypotheses) under the same header. A draft's `?m.N` values are dropped (Lean 4.22 writes them
for the holes before; docs/lean.md, "Sketches"). A cached proof is a candidate only: the search re-checks it on the
subgoal in Lean before it counts (`record_hit` / `record_rejected`), and the assembled proof is compiled as any proof.
A lookup serves at most `limit` proofs (`search.subgoal_cache_replays`), in an order no writer chooses (the proof's
length, then its digest), and never one Lean rejected under that key earlier in the job: planted entries cost at most
`limit` replays a lookup and one each a job.

Persisted, each proof is one object `{uri}/{environment}/{key digest}.{proof digest}.json`, written once by the job
that found it and never rewritten. The environment is what Lean answers depend on, never where it is installed
(`cache_environment`: a moved venv keeps its cache, another Lean, Pantograph or Mathlib opens another folder). A job
lists its environment's folder when it opens the cache and again on a lookup that finds nothing, at most once every
`refresh_s` seconds; it reads an entry only when its key is looked up. An entry that does not parse, whose names do
not match its content, or that was written under another environment is skipped and counted (`stats.skipped`),
never served.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

from burnqed import __version__
from burnqed.config.identity import mark_of
from burnqed.errors import InputError
from burnqed.records.replies import Goal
from burnqed.records.results import SubgoalSource, TheoremResult
from burnqed.storage import Store, is_remote, join, local_path, storage_error
from leankit.normal_form import statement_normal_form

if TYPE_CHECKING:
    from burnqed.config.lean import LeanConfig

_METAVARIABLE = re.compile(r"\?m\.\d+")
CACHE_FORMAT = 1  # of a persisted entry (`CacheEntry`); an entry of another format is skipped
REPLAYS = 4  # proofs a lookup serves at most (`search.subgoal_cache_replays`'s default)
REFRESH_S = 60.0  # a lookup that finds nothing lists the cache again when its last listing is this old
STATS_KEY = "subgoal_cache"  # where `record_stats` puts the counters in an output's record
TOOLCHAIN_FILES = ("lean-toolchain", "lake-manifest.json")  # a Lake project's Lean version and its packages' revisions
_ENTRY = re.compile(r"(?P<key>[0-9a-f]{64})\.(?P<proof>[0-9a-f]{64})\.json")
_FOLDERS = re.compile(r"[^\s=:,]*[/\\]")  # the folders of a path in an argument (up to its last separator)


@dataclass(frozen=True, slots=True)
class SubgoalKey:
    """A subgoal as the cache keys it: `text` the normal-form context and target (one line per part), `digest` its
    SHA-256 (what a stored entry is named by)."""

    text: str
    digest: str


def normal_part(text: str) -> str:
    """One part of a key (a hypothesis' type or value, a target): whitespace collapsed, in statement normal form."""
    return statement_normal_form(" ".join(text.split()))


def subgoal_key(goal: Goal, header: str | None) -> SubgoalKey:
    """The cache key of `goal` (as Lean printed it) in a theorem whose header is `header` (see the module docstring)."""
    lines = [f"header {' '.join((header or '').split())}"]
    for variable in goal.variables:
        value = variable.value
        if value is not None and _METAVARIABLE.fullmatch(value.strip()):
            value = None
        shown = f"{variable.name} : {normal_part(variable.type)}"
        lines.append(shown if value is None else f"{shown} := {normal_part(value)}")
    lines.append(f"⊢ {normal_part(goal.target)}")
    text = "\n".join(lines)
    return SubgoalKey(text, key_digest(text))


def key_digest(text: str) -> str:
    """The SHA-256 of a key's text (`SubgoalKey.digest`)."""
    return hashlib.sha256(text.encode()).hexdigest()




def proof_digest(tactics: Iterable[str]) -> str:
    """The SHA-256 of a proof's tactics (their JSON list): the name of its persisted entry under its key."""
    return key_digest(json.dumps(list(tactics), ensure_ascii=False))


def proof_order(tactics: Sequence[str]) -> tuple[int, str]:
    """Where a proof comes in a lookup: by its length (the characters of its tactics, one line each), then its
    digest. Nothing an entry's writer states (its `written_at`, its file's age) decides which proofs are served."""
    return len("\n".join(tactics)), proof_digest(tactics)


# ------------------------------------------------------------------------------------------------- stats


@dataclass(slots=True)
class CacheStats:
    """What one job asked of the cache: lookups, hits (a stored proof re-checked and used), misses (nothing stored),
    rejected (stored proofs Lean refused on re-check), stored (proofs added), skipped (persisted entries that were
    corrupt or of another environment, never served) and listings (of the persisted cache)."""

    lookups: int = 0
    hits: int = 0
    misses: int = 0
    rejected: int = 0
    stored: int = 0
    skipped: int = 0
    listings: int = 0

    @property
    def hit_rate(self) -> float | None:
        """Hits per lookup; None before any lookup (not measured, never 0)."""
        return self.hits / self.lookups if self.lookups else None

    def __add__(self, other: CacheStats) -> CacheStats:
        return CacheStats(**{name: getattr(self, name) + getattr(other, name) for name in _COUNTERS})

    def as_dict(self) -> dict[str, int | float | None]:
        """The counters and the hit rate (None: not measured), as an output's record keeps them."""
        return {**asdict(self), "hit_rate": self.hit_rate}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> CacheStats:
        """Read back `as_dict` (a counter missing from an older record is 0; the hit rate is recomputed)."""
        values: dict[str, int] = {}
        for name in _COUNTERS:
            value = data.get(name, 0)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise InputError(f"subgoal cache stats: {name} is {value!r}, not a count")
            values[name] = value
        return cls(**values)


_COUNTERS = tuple(CacheStats.__dataclass_fields__)


def record_stats(record: dict[str, Any], stats: CacheStats) -> None:
    """Add `stats` into `record[STATS_KEY]` (an output's record: a search shard's `_SUCCESS.json` extra, an eval's),
    summed with the counters already there (a resumed job's earlier run, another shard)."""
    before = record.get(STATS_KEY)
    total = stats if before is None else CacheStats.from_dict(before) + stats
    record[STATS_KEY] = total.as_dict()


def merged_stats(records: Iterable[Mapping[str, Any]]) -> CacheStats | None:
    """The sum of the `STATS_KEY` counters of several outputs' records (the shards of one search); None when none
    of them has any (the cache was not used: nothing measured)."""
    found = [CacheStats.from_dict(record[STATS_KEY]) for record in records if record.get(STATS_KEY) is not None]
    return sum(found, CacheStats()) if found else None


def subgoals_from_cache(results: Iterable[TheoremResult]) -> int:
    """The subgoals the theorems' sketches took from the cache (`source = cache`): the cache's hits of the job that
    searched them, counted from its results."""
    return sum(subgoal.source is SubgoalSource.CACHE
               for result in results for sketch in result.sketches for subgoal in sketch.subgoals)


# ------------------------------------------------------------------------------------------ environment


class CacheEnvironment(BaseModel):
    """The facts a cached proof was checked under, beyond its key: the Lean settings that change what Lean answers
    (`lean.command` by its shape, never its folders), the Pantograph version the workers spoke, and the Lake
    project's Lean version, Mathlib revision and toolchain files. A persisted proof is served only to a cache opened
    with an equal environment (`cache_environment` builds it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    lean: dict[str, Any] = Field(description="`lean.*` settings whose mark enters some stage's identity, by value; "
                                 "`command` by its shape (`command_shape`: each path's folders left out).")
    pantograph_version: str | None = Field(description="The version the pool speaks (`X.Y.Z` or `X.Y.Z/vLEAN`).")
    lean_version: str | None = Field(default=None, description="lean.cwd's lean-toolchain (e.g. "
                                     "`leanprover/lean4:v4.19.0`), else the Lean a Pantograph build names; None: "
                                     "neither names one.")
    mathlib: str | None = Field(default=None, description="The revision lean.cwd's lake-manifest.json pins "
                                "Mathlib at; None: no manifest, or no Mathlib in it.")
    toolchain: str | None = Field(description="SHA-256 of lean.cwd's lean-toolchain and lake-manifest.json; None "
                                  "when lean.cwd holds neither (no Lake project: minilean, the replay server).")

    @property
    def digest(self) -> str:
        """SHA-256 of the facts (keys sorted): the environment's folder is named by its first 16 digits."""
        return key_digest(json.dumps(self.model_dump(mode="json"), sort_keys=True, ensure_ascii=False))


def command_shape(command: Sequence[str]) -> list[str]:
    """`lean.command` as the cache's environment keeps it: every argument with the folders of the paths in it left
    out (`/opt/venv/bin/python` → `python`, `--root=/srv/lean/project` → `--root=project`), so a venv or a project
    moved elsewhere keeps its cache while another program or another argument does not."""
    return [_FOLDERS.sub("", part) for part in command]


def toolchain_digest(cwd: str | None) -> str | None:
    """SHA-256 over the `TOOLCHAIN_FILES` that the Lake project `cwd` holds (their names and contents), None when it
    holds none of them or there is no `cwd`."""
    if cwd is None:
        return None
    parts = [(name, (Path(cwd) / name).read_bytes()) for name in TOOLCHAIN_FILES if (Path(cwd) / name).is_file()]
    if not parts:
        return None
    digest = hashlib.sha256()
    for name, data in parts:
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return digest.hexdigest()


def lean_version(cwd: str | None, pantograph_version: str | None) -> str | None:
    """The Lean the workers run, as far as it is written down: the Lake project's `lean-toolchain`, else the `vLEAN`
    of a Pantograph build's `X.Y.Z/vLEAN`; None when neither names it."""
    toolchain = Path(cwd) / "lean-toolchain" if cwd is not None else None
    if toolchain is not None and toolchain.is_file():
        return toolchain.read_text(encoding="utf-8", errors="replace").strip() or None
    if pantograph_version is not None and "/" in pantograph_version:
        return pantograph_version.split("/", 1)[1].strip() or None
    return None


def mathlib_revision(cwd: str | None) -> str | None:
    """The revision `cwd`'s lake-manifest.json pins the package `mathlib` at; None without a manifest, with one that
    does not parse (its digest still enters the environment) or without Mathlib in it."""
    manifest = Path(cwd) / "lake-manifest.json" if cwd is not None else None
    if manifest is None or not manifest.is_file():
        return None
    try:
        packages = json.loads(manifest.read_bytes()).get("packages", [])
    except (ValueError, AttributeError):
        return None
    for package in packages if isinstance(packages, list) else []:
        if isinstance(package, dict) and str(package.get("name", "")).lower() == "mathlib":
            rev = package.get("rev")
            return rev if isinstance(rev, str) else None
    return None


def cache_environment(lean: LeanConfig, pantograph_version: str | None) -> CacheEnvironment:
    """The environment of a job whose Lean is `lean` (the `[lean]` section) speaking `pantograph_version` (the
    pool's, once started). The settings taken are the `lean.*` fields whose identity mark (config/identity.py)
    enters some stage's identity (what Lean runs, its timeouts and automatic mode, the tactic guard), `command` by
    its shape; a field marked result-neutral (worker counts, recycling, where the project is) is left out. The Lean
    version, Mathlib's revision and the toolchain files' digest come from the Lake project `lean.cwd`."""
    values = lean.model_dump(mode="json")
    chosen = {name: values[name] for name, info in type(lean).model_fields.items()
              if (mark := mark_of(info)) is not None and mark.enters}
    if "command" in chosen:
        chosen["command"] = command_shape(chosen["command"])
    return CacheEnvironment(lean=chosen, pantograph_version=pantograph_version,
                            lean_version=lean_version(lean.cwd, pantograph_version),
                            mathlib=mathlib_revision(lean.cwd), toolchain=toolchain_digest(lean.cwd))


class CacheEntry(BaseModel):
    """One persisted proof of a subgoal (`{environment}/{key digest}.{proof digest}.json`)."""

    model_config = ConfigDict(extra="forbid")

    format: int = Field(default=CACHE_FORMAT, description="Version of this entry format.")
    key: str = Field(min_length=1, description="The subgoal's key text (`SubgoalKey.text`).")
    tactics: list[str] = Field(min_length=1, description="The proof's tactics, in order.")
    theorem: str = Field(description="The theorem whose search found the proof.")
    environment: CacheEnvironment = Field(description="What the proof was checked under.")
    burnqed_version: str = Field(description="The burnqed that wrote the entry.")
    written_at: AwareDatetime = Field(description="When the entry was written, UTC (as its writer says: shown, "
                                      "never used to order proofs).")


# ------------------------------------------------------------------------------------------------ cache


@dataclass(slots=True)
class _Persisted:
    """Where a cache's proofs are kept: the environment's folder under the cache's URI, what its listings held
    (entry names by key digest) and which entries were read, refused or written already. Its I/O runs outside the
    cache's lock; its bookkeeping under it."""

    store: Store
    folder: str
    environment: CacheEnvironment
    refresh_s: float
    listed: dict[str, set[str]] = field(default_factory=dict)  # key digest → entry names (`K.P.json`) listed
    seen: set[str] = field(default_factory=set)  # entry names read (served or skipped), or written by this job
    listed_at: float = float("-inf")
    listing: bool = False  # a listing is under way (in another thread)

    def due(self) -> bool:
        """A listing is due: none under way, and the last one is `refresh_s` old."""
        return not self.listing and time.monotonic() - self.listed_at >= self.refresh_s

    def take(self, names: Iterable[str], stats: CacheStats) -> None:
        """Keep what a listing found; a file there that is not an entry is counted skipped, once."""
        stats.listings += 1
        self.listed_at = time.monotonic()
        for name in names:
            if name.startswith("."):
                continue  # a local write in flight (its temporary file)
            found = _ENTRY.fullmatch(name)
            if found is None:
                if name not in self.seen:
                    self.seen.add(name)
                    stats.skipped += 1
                continue
            self.listed.setdefault(found["key"], set()).add(name)

    def names(self) -> list[str]:
        """The names in the environment's folder: on S3 one listing of its prefix; locally the folder's entries by
        name alone (another job's write renames its temporary file into place meanwhile)."""
        if is_remote(self.folder):
            return list(self.store.output_files(self.folder))
        try:
            with os.scandir(local_path(self.folder)) as found:
                return [entry.name for entry in found]
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise storage_error(f"cannot list {self.folder}", exc) from None

    def unread(self, key: SubgoalKey) -> list[str]:
        return sorted(self.listed.get(key.digest, set()) - self.seen)

    def read(self, key: SubgoalKey, name: str) -> CacheEntry | None:
        """The entry `name` of `key`, or None when it is corrupt or foreign (not this key, proof or environment);
        `InputError` when it is not there (deleted since the listing)."""
        data = self.store.read_bytes(join(self.folder, name))
        try:
            entry = CacheEntry.model_validate_json(data)
        except ValidationError:
            return None
        if (entry.format != CACHE_FORMAT or entry.key != key.text or key_digest(entry.key) != key.digest
                or name != entry_name(key, entry.tactics) or entry.environment != self.environment):
            return None
        return entry

    def write(self, key: SubgoalKey, tactics: list[str], theorem: str) -> None:
        entry = CacheEntry(key=key.text, tactics=tactics, theorem=theorem, environment=self.environment,
                           burnqed_version=__version__, written_at=datetime.now(UTC))
        self.store.write_bytes(join(self.folder, entry_name(key, tactics)), entry.model_dump_json(indent=1).encode())


def entry_name(key: SubgoalKey, tactics: Iterable[str]) -> str:
    """The file name of a proof's entry in its environment's folder: `{key digest}.{proof digest}.json`."""
    return f"{key.digest}.{proof_digest(tactics)}.json"


@dataclass(slots=True)
class SubgoalCache:
    """Proofs of subgoals by key, in memory, and persisted when opened on a URI (see the module docstring). Safe to
    call from several threads (e.g. `asyncio.to_thread`): the storage I/O runs outside its lock."""

    entries: dict[str, list[list[str]]] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)  # digest → key text: a digest names one key, never two
    stats: CacheStats = field(default_factory=CacheStats)
    persisted: _Persisted | None = None
    rejected: set[str] = field(default_factory=set)  # entry names (`K.P.json`) Lean rejected on re-check: never served
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @classmethod
    def open(cls, store: Store, uri: str, environment: CacheEnvironment, *, refresh_s: float = REFRESH_S
             ) -> SubgoalCache:
        """The cache persisted at `uri` (a folder: `Layout.subgoal_cache()` for a run's searches) for jobs whose
        Lean is `environment`: lists what is stored there for it (nothing is read before a lookup). A lookup that
        finds nothing lists again when the last listing is `refresh_s` seconds old or more (0: every such lookup),
        so proofs other jobs stored since are found."""
        persisted = _Persisted(store, join(uri, environment.digest[:16]), environment, refresh_s)
        cache = cls(persisted=persisted)
        persisted.take(persisted.names(), cache.stats)
        return cache

    def lookup(self, key: SubgoalKey, limit: int = REPLAYS) -> list[list[str]]:
        """At most `limit` proofs stored under `key` (copies), shortest first (`proof_order`), none of them one this
        cache was told Lean rejected under `key` (`record_rejected`); counts a lookup, and a miss when it serves
        none."""
        if limit < 1:
            raise ValueError(f"a lookup serves at least one proof, not {limit}")
        persisted = self.persisted
        if persisted is not None and self._same_locked(key):
            self._load(key, persisted)
        with self.lock:
            self.stats.lookups += 1
            stored = self.entries.get(key.digest, []) if self._same(key) else []
            fresh = [tactics for tactics in stored if entry_name(key, tactics) not in self.rejected]
            found = [list(tactics) for tactics in sorted(fresh, key=proof_order)[:limit]]
            if not found:
                self.stats.misses += 1
            return found

    def record_hit(self) -> None:
        """A proof `lookup` gave passed its re-check in the new context."""
        with self.lock:
            self.stats.hits += 1

    def record_rejected(self, key: SubgoalKey, tactics: Sequence[str]) -> None:
        """The proof `tactics` that `lookup(key)` gave failed its re-check in the new context: no later lookup of
        `key` in this cache serves it again."""
        with self.lock:
            self.stats.rejected += 1
            self.rejected.add(entry_name(key, tactics))

    def store(self, key: SubgoalKey, tactics: list[str], theorem: str) -> None:
        """Add a proof of `key`'s subgoal that Lean accepted (found in `theorem`'s search); a proof already stored
        under the key is not stored twice. Persisted, it is written at once as an entry of its own, unless another
        job's entry of the same proof was listed (that one stands)."""
        if not tactics:
            raise ValueError(f"an empty proof of a subgoal of {theorem} cannot be cached")
        with self.lock:
            if not self._same(key):
                raise ValueError(f"digest {key.digest[:12]} names two keys; refusing to mix them")
            self.keys[key.digest] = key.text
            proofs = self.entries.setdefault(key.digest, [])
            if list(tactics) in proofs:
                return
            proofs.append(list(tactics))
            self.stats.stored += 1
            persisted = self.persisted
            name = entry_name(key, tactics)
            if persisted is None or name in persisted.seen or name in persisted.listed.get(key.digest, set()):
                return
            persisted.seen.add(name)
        persisted.write(key, list(tactics), theorem)

    def _load(self, key: SubgoalKey, persisted: _Persisted) -> None:
        """Read `key`'s persisted entries not read yet, listing again first when nothing is known of the key and a
        listing is due; each entry read is served or counted skipped. Storage I/O runs outside the lock."""
        with self.lock:
            relist = key.digest not in self.entries and not persisted.unread(key) and persisted.due()
            persisted.listing = persisted.listing or relist
        if relist:
            try:
                names = persisted.names()
            finally:
                with self.lock:
                    persisted.listing = False
            with self.lock:
                persisted.take(names, self.stats)
        with self.lock:
            unread = persisted.unread(key)
            persisted.seen.update(unread)
        entries: list[CacheEntry | None] = []
        gone: list[str] = []
        for name in unread:
            try:
                entries.append(persisted.read(key, name))
            except InputError:
                gone.append(name)
        read = [entry for entry in entries if entry is not None]  # served in `proof_order`, never by `written_at`
        with self.lock:
            for name in gone:  # deleted since the listing: neither served nor skipped; a later listing may find it
                persisted.seen.discard(name)
                persisted.listed.get(key.digest, set()).discard(name)
            self.stats.skipped += sum(entry is None for entry in entries)
            if read:
                self.keys[key.digest] = key.text
                proofs = self.entries.setdefault(key.digest, [])
                for entry in read:
                    if entry.tactics not in proofs:
                        proofs.append(list(entry.tactics))

    def _same_locked(self, key: SubgoalKey) -> bool:
        with self.lock:
            return self._same(key)

    def _same(self, key: SubgoalKey) -> bool:
        known = self.keys.get(key.digest)
        return known is None or known == key.text


def clear_cache(store: Store, uri: str) -> int:
    """Delete every file of the cache at `uri` (every environment's); the number deleted. For a measurement that
    must start from an empty cache (an eval that is not resumed); a run's searches keep theirs."""
    names = store.output_files(uri)
    for name in names:
        store.remove(join(uri, name))
    return len(names)
