"""Typed infrastructure failures.

Domain failures (a tactic Lean rejects, a theorem that does not start) are values in `records`;
what is here is raised when the machinery itself cannot go on. Every message says what to do.
The CLI turns a `ConfigError`/`InputError` into one line on stderr and exit code 2, a `StoppedError` into exit
code 128 + the signal number, a `TransientStorageError` into `TRANSIENT_EXIT_CODE` (75), any other `BurnqedError`
into exit code 1. leankit's failures read as these (`from_leankit`).
"""

from __future__ import annotations

from leankit.failures import LeankitFailure, LeanStartFailure


class BurnqedError(Exception):
    """Base of every error burnqed raises on purpose."""


# EX_TEMPFAIL (sysexits.h): the workflows' retry expression retries this code a bounded number of times
# (burnqed.cluster.retry); every other failure exit is deterministic and is not retried.
TRANSIENT_EXIT_CODE = 75


class StoppedError(BurnqedError):
    """A signal stopped the work after what had finished was saved (SIGTERM: the pod was deleted, preempted or its
    node drained). The CLI exits with 128 + the signal number, like a process the signal killed, so a workflow's
    retry rule can tell an interruption (retried) from a failure (not retried): see docs/cluster.md."""

    def __init__(self, signum: int, message: str) -> None:
        super().__init__(message)
        self.signum = signum


class ConfigError(BurnqedError):
    """The configuration (file, env vars, --set) is invalid or names something that does not exist."""


class InputError(BurnqedError):
    """A user-supplied input file (theorem index, corpus, ...) is malformed."""


class LeanError(BurnqedError):
    """Base of the Lean edge's infrastructure failures."""


class LeanStartError(LeanError):
    """The Lean process could not be started or never printed `ready.`: a configuration problem.

    Retrying does not help; the pool does not respawn in a loop after this.
    """


class LeanCrashError(LeanError):
    """The Lean process died, closed its stdout, or wrote something that is not a protocol reply."""


class LeanTimeoutError(LeanError):
    """The client watchdog fired: Lean did not answer within the deadline; the worker was killed."""


class LeanStatesLostError(LeanError):
    """A request named goal states of a Lean process that has been replaced since (a crash or a watchdog kill,
    often caused by another theorem sharing the worker): it was not sent. The caller rebuilds its states on the
    new process (search replays the tactic paths) and asks again."""


class LeanProtocolError(LeanError):
    """Lean answered a command with `{"error": kind, "desc": ...}` where the command must succeed."""

    def __init__(self, kind: str, desc: str, command: str) -> None:
        super().__init__(f"Lean rejected `{command}`: {kind}: {desc}")
        self.kind = kind
        self.desc = desc
        self.command = command


class PoolClosedError(LeanError):
    """A worker was requested from a pool that is closed."""


class PolicyError(BurnqedError):
    """The policy (SGLang server, `burnqed serve`, in-process model) failed or answered garbage.

    Raised only after the client's retries are spent; the message names the URL/model and the last error.
    """


class PolicyUnavailableError(PolicyError):
    """The policy server never became ready, or the circuit breaker is open after repeated failures."""


class ModelError(BurnqedError):
    """A model folder is missing, incomplete or cannot be loaded."""


class ModelInputError(ModelError, InputError):
    """The model folder the user named (policy.model, sft.base_model, `--model`) does not exist or is not a model
    folder: bad input (exit 2), like any other path that names nothing."""


class StorageError(BurnqedError):
    """An artifact store cannot be reached, read or written (S3 credentials, endpoint, disk)."""


class TransientStorageError(StorageError):
    """A storage error a retry can cure: a timeout, a dropped connection, a 5xx or throttling answer (not a refused
    credential, a missing object or a missing package). The CLI exits with `TRANSIENT_EXIT_CODE`, which the
    workflows retry a bounded number of times (cluster.storage_retries)."""


class TrainingError(BurnqedError):
    """Training cannot go on: diverged, a monitored quantity left its bounds, or no data to train on."""


class ClusterError(BurnqedError):
    """The Argo Server (or Kubernetes) refused or could not be reached."""


def from_leankit(failure: LeankitFailure) -> BurnqedError:
    """burnqed's error for a failure leankit raised, with its message: a Lean command that did not start is a
    `LeanStartError` (exit 1), a bad input (a malformed corpus, an unsupported Pantograph version) an `InputError`
    (exit 2)."""
    if isinstance(failure, LeanStartFailure):
        return LeanStartError(str(failure))
    return InputError(str(failure))
