"""Pantograph versions: which ones burnqed speaks, how their protocols differ, and how the version of the
configured Lean command is found.

    version = await detect_version(["lake", "env", "repl", "Mathlib"], cwd="/opt/proj", env=sealed, timeout_s=60)
    version.goal_id_required        # True up to 0.3.2: `goal.tactic` without goalId is refused
    supported_version("0.3.7/v4.21.0")   # the 0.3.7 protocol (a backport build's Lean kept for messages)
    version_probe_argv(["lake", "env", "repl", "Mathlib"])   # ["lake", "env", "repl", "--version"]

Every difference was read from Pantograph's own source at each tag; docs/lean.md ("Versions") has the table, the
probe's rule (`repl --version` answers only alone) and what a pool does with the version. An unsupported version
is `BadInput`, a probe that cannot run or prints none `LeanStartFailure` (`leankit.failures`).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from leankit.failures import BadInput, LeanStartFailure

_VERSION = re.compile(r"v?(\d+)\.(\d+)\.(\d+)(?:/(v?\d+\.\d+\.\d+[\w.+-]*))?")
# A Lean module name as `repl` takes it: dotted identifiers, the first capitalised (Init, Mathlib.Tactic).
_MODULE_ARG = re.compile(r"[A-Z][\w']*(?:\.[\w']+)*")


@dataclass(frozen=True, order=True, slots=True)
class PantographVersion:
    """A Pantograph release; the properties say how its protocol differs from the others."""

    major: int
    minor: int
    patch: int
    # The Lean toolchain of a backport build (`0.3.7/v4.21.0`); not part of the protocol, so not compared.
    lean: str | None = field(default=None, compare=False)

    @classmethod
    def parse(cls, text: str) -> PantographVersion:
        """`0.3.4`, `v0.3.4` or `0.3.7/v4.21.0`; ValueError for anything else."""
        match = _VERSION.fullmatch(text.strip())
        if match is None:
            raise ValueError(f"{text!r} is not a version (expected e.g. 0.3.4 or 0.3.7/v4.21.0)")
        return cls(int(match.group(1)), int(match.group(2)), int(match.group(3)), match.group(4))

    @property
    def protocol(self) -> str:
        """`X.Y.Z` without the Lean part: what decides the requests."""
        return f"{self.major}.{self.minor}.{self.patch}"

    def __str__(self) -> str:
        return self.protocol if self.lean is None else f"{self.protocol}/{self.lean}"

    @property
    def goal_id_required(self) -> bool:
        """`goal.tactic`'s `goalId` is a required Nat up to 0.3.2 (an optional one from 0.3.3)."""
        return self < V0_3_3

    @property
    def header_flags(self) -> bool:
        """`frontend.process` has the required Bools `readHeader` and `inheritEnv` (from 0.3.0)."""
        return self >= V0_3_0

    @property
    def invocations_is_path(self) -> bool:
        """`frontend.process`'s `invocations` is an optional output path (from 0.3.2); before, a required Bool."""
        return self >= V0_3_2

    @property
    def tactic_errors(self) -> bool:
        """A failed `goal.tactic` answers `{tacticErrors: [str]}` (up to 0.3.0); later `{messages, hasSorry, …}`."""
        return self < V0_3_1

    @property
    def sorry_flags(self) -> bool:
        """`goal.tactic` reports `hasSorry`/`hasUnsafe` and `goal.print` `rootHasSorry`/`rootHasUnsafe`/
        `rootHasMVar` (from 0.3.1). Without them only the compile can show a proof is free of sorry."""
        return self >= V0_3_1

    @property
    def message_objects(self) -> bool:
        """Messages are Lean `SerialMessage` objects (from 0.3.4); before, strings (`file:L:C: error: …`)."""
        return self >= V0_3_4

    @property
    def goal_fragment(self) -> bool:
        """Goal objects carry `fragment` (from 0.3.3); before, `isConversion`."""
        return self >= V0_3_3

    @property
    def parent_exprs_key(self) -> str:
        """`goal.print`'s flag for the parent expressions: `parentExprs` from 0.3.3, `parentExpr` before."""
        return "parentExprs" if self >= V0_3_3 else "parentExpr"

    @property
    def timeout_option(self) -> bool:
        """`options.set` knows `timeout` (from 0.3.0); 0.2.x ignores it: only the client watchdog applies."""
        return self >= V0_3_0

    @property
    def mode_field(self) -> bool:
        """`goal.tactic` switches fragments with `mode` (from 0.3.3); before, with `calc`/`conv` fields."""
        return self >= V0_3_3

    @property
    def repl_scope(self) -> bool:
        """The REPL keeps a command scope (opens, namespace, options) that `goal.start`/`goal.tactic`/
        `goal.print` run in, set only by `frontend.process` with `inheritEnv: true` (`Repl.lean` from 0.3.0:
        `State.scope`, `runCoreM`). 0.2.25 has none: a header's opens cannot hold for its tactics there."""
        return self >= V0_3_0

    @property
    def process_sorrys(self) -> bool:
        """`frontend.process` has the required Bools `sorrys` and `typeErrorsAsGoals`, and its units carry
        `goalStateId`/`goals` (up to 0.3.6; from 0.3.7 they are gone and `frontend.distil` is the only way to
        turn a sorry into a goal)."""
        return self < V0_3_7

    @property
    def distil(self) -> bool:
        """`frontend.distil {file, ignoreValues, binderName?}` exists (from 0.3.6)."""
        return self >= V0_3_6

    @property
    def lean_names(self) -> bool:
        """Goal, hypothesis and binder names are Lean `Name`s (from 0.3.15, `Protocol.lean`): written `toString`
        (`ToJson Name`), a case without its macro scopes, and read as names in requests (`copyFrom`,
        `binderName`, `extraMVars`, `levels`). Before, strings: an escaped name wrapped in `"` quotes
        (`serializeName`), a case with its macro scopes (leankit.names)."""
        return self >= V0_3_15

    @property
    def interrupt_kind(self) -> str:
        """The `error` kind of the in-REPL timeout reply (`desc` is `interrupt` in every version): `internal`
        up to 0.3.4, `io` later (the cancel token became an IO error). Parsers match the desc only."""
        return "internal" if self <= V0_3_4 else "io"


V0_3_0 = PantographVersion(0, 3, 0)
V0_3_1 = PantographVersion(0, 3, 1)
V0_3_2 = PantographVersion(0, 3, 2)
V0_3_3 = PantographVersion(0, 3, 3)
V0_3_4 = PantographVersion(0, 3, 4)
V0_3_6 = PantographVersion(0, 3, 6)
V0_3_7 = PantographVersion(0, 3, 7)
V0_3_15 = PantographVersion(0, 3, 15)
# Every release from 0.2.25 to the newest whose source was read (docs/lean.md lists the tags and commits).
SUPPORTED: tuple[PantographVersion, ...] = (
    PantographVersion(0, 2, 25), *(PantographVersion(0, 3, patch) for patch in range(17))
)
LATEST = SUPPORTED[-1]
# What the replay server and the test double emulate unless told otherwise (the suite's reference version).
DEFAULT_EMULATED = V0_3_4
SUPPORTED_TEXT = "0.2.25, 0.3.0-0.3.16"


def supported_version(text: str, source: str = "") -> PantographVersion:
    """The supported version `text` names; BadInput (one line, naming `source` if given) otherwise."""
    where = f"{source}: " if source else ""
    try:
        version = PantographVersion.parse(text)
    except ValueError as exc:
        raise BadInput(f"{where}{exc}; supported Pantograph versions: {SUPPORTED_TEXT}") from None
    if version not in SUPPORTED:
        raise BadInput(
            f"{where}unsupported Pantograph {version} (supported: {SUPPORTED_TEXT}; each version parses "
            "requests differently, see docs/lean.md). Install a supported Pantograph."
        )
    return version


def version_probe_argv(argv: Sequence[str]) -> list[str]:
    """The command that asks the configured REPL for its version (see the module docstring)."""
    args = list(argv)
    while len(args) > 1 and (_MODULE_ARG.fullmatch(args[-1]) or (args[-1].startswith("--") and "=" in args[-1])):
        args.pop()
    return [*args, "--version"]


async def _probe(argv: Sequence[str], *, cwd: str | None, env: Mapping[str, str], timeout_s: float,
                 spawn: Mapping[str, Any] | None, purpose: str, advice: str, hint: str) -> tuple[int, str, str]:
    """Run a version probe as a worker runs (same cwd, sealed environment, user): (exit code, stdout, stderr tail).
    LeanStartFailure when it cannot start (`cannot run … {purpose}: … {advice}`) or outlives `timeout_s` (its process
    group is killed; the message ends with `hint`)."""
    import asyncio  # here: the servers that only read a version (minilean, the tests' doubles) start without it

    shown = " ".join(argv)
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=cwd,
            env=dict(env),
            start_new_session=True,
            **dict(spawn or {}),  # the user Lean runs as (burnqed.base.sandbox.spawn_options)
        )
    except OSError as exc:
        raise LeanStartFailure(f"cannot run `{shown}` {purpose}: {exc}. {advice}") from None
    try:
        async with asyncio.timeout(timeout_s):
            out, err = await proc.communicate()
    except (TimeoutError, asyncio.CancelledError) as exc:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
        if isinstance(exc, asyncio.CancelledError):
            raise
        raise LeanStartFailure(f"`{shown}` printed no version within {timeout_s:g}s; {hint}") from None
    tail = err.decode("utf-8", errors="replace").strip()[-500:]
    return proc.returncode or 0, out.decode("utf-8", errors="replace"), tail


async def detect_version(
    argv: Sequence[str], *, cwd: str | None, env: Mapping[str, str], timeout_s: float,
    spawn: Mapping[str, Any] | None = None,
) -> PantographVersion:
    """Run the version probe of `argv` (same cwd and environment as a worker) and read its answer.

    LeanStartFailure when the probe cannot run, fails or prints no version; BadInput for an unsupported one.
    `repl --version` answers at once (no imports); `timeout_s` only bounds a wrapper such as `lake env`.
    """
    probe = version_probe_argv(argv)
    shown = " ".join(probe)
    hint = f"set lean.pantograph_version (one of {SUPPORTED_TEXT}) to skip the detection"
    code, text, tail = await _probe(probe, cwd=cwd, env=env, timeout_s=timeout_s, spawn=spawn, hint=hint,
                                    purpose="to learn the Pantograph version",
                                    advice="Check lean.command and lean.cwd.")
    lines = [line.strip() for line in text.splitlines() if _VERSION.fullmatch(line.strip())]
    if code != 0 or not lines:
        raise LeanStartFailure(
            f"`{shown}` did not print a Pantograph version (exit {code}, stdout {text.strip()[:200]!r}"
            f"{', stderr ' + repr(tail) if tail else ''}); {hint}"
        )
    return supported_version(lines[-1], f"`{shown}`")


# `lean --version`: `Lean (version 4.29.1, x86_64-unknown-linux-gnu, commit 5e93…, Release)`.
_LEAN_VERSION = re.compile(r"Lean \(version (\d+\.\d+\.\d+(?:-[0-9A-Za-z.]+)?)[,)]")
LEAN_VERSION_ARGV = ("lean", "--version")


async def detect_lean_version(
    *, cwd: str | None, env: Mapping[str, str], timeout_s: float, spawn: Mapping[str, Any] | None = None,
) -> str:
    """The Lean version (`4.29.1`) that `lean --version` prints where and as the workers run: elan's `lean` in the
    workers' cwd resolves the toolchain that folder's `lean-toolchain` names (a Mathlib project's: the Lean whose
    oleans the REPL imports). LeanStartFailure when `lean` cannot run or prints no version."""
    hint = "put Lean's `lean` (or elan's) on the workers' PATH (lean.env) to have its version read"
    code, text, tail = await _probe(LEAN_VERSION_ARGV, cwd=cwd, env=env, timeout_s=timeout_s, spawn=spawn, hint=hint,
                                    purpose="to learn the Lean version", advice=hint[0].upper() + hint[1:] + ".")
    found = _LEAN_VERSION.search(text)
    if code != 0 or found is None:
        raise LeanStartFailure(f"`lean --version` printed no Lean version (exit {code}, stdout {text.strip()[:200]!r}"
                             f"{', stderr ' + repr(tail) if tail else ''}); {hint}")
    return found.group(1)


# The first Lean whose toolchain ships comparator as `lake comparator` (its release notes; the standalone
# leanprover/comparator, with lean4export and landrun, judges older pins).
COMPARATOR_LEAN = "4.35.0-rc2"
_TOOLCHAIN = re.compile(r"(?:leanprover/lean4:)?v?(\d+)\.(\d+)\.(\d+)(?:-rc(\d+))?")


def lean_release(text: str) -> tuple[int, int, int, float] | None:
    """A Lean version or toolchain (`4.35.0`, `v4.35.0-rc2`, `leanprover/lean4:v4.29.1`) as a comparable key (a
    release sorts after its release candidates); None for anything else (a nightly, a commit)."""
    found = _TOOLCHAIN.fullmatch(text.strip())
    if found is None:
        return None
    major, minor, patch, rc = found.groups()
    return int(major), int(minor), int(patch), float(rc) if rc is not None else float("inf")


# The first Lean with definition holes (`definition_names`) in the standalone comparator: its commit 71b52ec, on
# v4.30.0-rc2; the builds pinned for older Leans ignore them.
DEFINITION_HOLES_LEAN, DEFINITION_HOLES_COMMIT = "4.30.0-rc2", "71b52ec"
DEFINITION_HOLES_SAID = (f"predates definition holes (leanprover/comparator {DEFINITION_HOLES_COMMIT}, Lean "
                         f"v{DEFINITION_HOLES_LEAN})")  # what a standalone comparator on an older Lean lacks


def lacks_definition_holes(text: str | None) -> bool:
    """True when the Lean `text` names (`lean_release`) is older than DEFINITION_HOLES_LEAN: the comparator that
    judges it is a standalone build without definition holes. False for a newer Lean or one not known."""
    found, first = lean_release(text or ""), lean_release(DEFINITION_HOLES_LEAN)
    return found is not None and first is not None and found < first


def ships_comparator(text: str) -> bool:
    """True when the Lean `text` names (`lean_release`) ships `lake comparator` (COMPARATOR_LEAN or later)."""
    found, first = lean_release(text), lean_release(COMPARATOR_LEAN)
    return found is not None and first is not None and found >= first
