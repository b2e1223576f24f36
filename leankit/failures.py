"""The failures leankit raises on purpose; each message is one line that says what to do.

    try:
        corpus = load_corpus(path)
    except BadInput as exc:              # a malformed corpus, an unsupported Pantograph version: exit 2
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None

`LeanStartFailure` is a Lean command that could not run or printed no version (a configuration problem that a
retry does not cure: exit 1). burnqed reads both as its own errors (`burnqed.errors.from_leankit`, docs/errors.md).
"""

from __future__ import annotations


class LeankitFailure(Exception):
    """Base of every failure leankit raises on purpose."""


class BadInput(LeankitFailure):
    """An input leankit was given (a corpus file, a Pantograph version) is malformed or unsupported."""


class LeanStartFailure(LeankitFailure):
    """The configured Lean command could not run, failed, or printed no version."""
