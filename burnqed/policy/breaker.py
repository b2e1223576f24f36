"""The SGLang client's circuit breaker: after `failures` consecutive failed requests it opens and calls fail
fast; after `reset_s` one trial request goes through (half-open), and its answer closes or re-opens it.

    breaker = CircuitBreaker(failures=5, reset_s=30.0)
    trial = breaker.admit()          # None: fail fast; False: send; True: send, as the half-open trial

The states and what each means to a caller are documented on `burnqed.policy.sglang.SGLangClient`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from enum import Enum


class BreakerState(Enum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half-open"


class CircuitBreaker:
    """Counts consecutive failed requests; see `SGLangClient` for the states. `clock` is injectable for tests."""

    def __init__(self, failures: int, reset_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.threshold = failures
        self.reset_s = reset_s
        self.clock = clock
        self.failures = 0
        self.opened_at: float | None = None
        self.trial_in_flight = False

    def state(self) -> BreakerState:
        if self.opened_at is None:
            return BreakerState.CLOSED
        if self.clock() - self.opened_at < self.reset_s:
            return BreakerState.OPEN
        return BreakerState.HALF_OPEN

    def retry_in_s(self) -> float:
        """Seconds until the open breaker lets a trial through (0 when not open)."""
        return 0.0 if self.opened_at is None else max(0.0, self.opened_at + self.reset_s - self.clock())

    def admit(self) -> bool | None:
        """May a request go? None = no (fail fast); False = yes; True = yes, as the half-open trial."""
        state = self.state()
        if state is BreakerState.CLOSED:
            return False
        if state is BreakerState.HALF_OPEN and not self.trial_in_flight:
            self.trial_in_flight = True
            return True
        return None

    def success(self, trial: bool) -> None:
        # Any answer proves the server is back, even one from a request sent before the breaker opened.
        self.failures, self.opened_at, self.trial_in_flight = 0, None, False

    def failure(self, trial: bool) -> bool:
        """Record a failed request; True when this opened (or re-opened) the breaker."""
        if trial:
            self.opened_at, self.trial_in_flight = self.clock(), False
            return True
        self.failures += 1
        if self.opened_at is None and self.failures >= self.threshold:
            self.opened_at = self.clock()
            return True
        return False

    def abandon(self, trial: bool) -> None:
        """The request ended without a verdict (cancelled): let the next call be the trial."""
        if trial:
            self.trial_in_flight = False
