"""Policy doubles for search tests: scripted answers keyed by the state in the prompt. The corpus oracle (the
replay corpus' recorded tactics, good and bad, for the state's first goal) lives in `burnqed.policy.oracle`,
where the benchmarks can use it too; it is re-exported here."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from burnqed.policy.base import Completion, Sampling
from burnqed.policy.oracle import Answer, corpus_oracle, first_goal, state_of

__all__ = ["Answer", "ScriptedPolicy", "corpus_oracle", "first_goal", "state_of"]


class ScriptedPolicy:
    """Answers each prompt with `script(state)` (cut to `sampling.n`); records every call."""

    name = "scripted"

    def __init__(self, script: Callable[[str], Answer], delay_s: float = 0.0) -> None:
        self.script = script
        self.delay_s = delay_s
        self.calls: list[list[str]] = []
        self.closed = False

    async def generate(self, prompts: Sequence[str], sampling: Sampling) -> list[list[Completion]]:
        self.calls.append([state_of(p) for p in prompts])
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        out = []
        for prompt in prompts:
            answers = self.script(state_of(prompt))[: sampling.n]
            out.append([Completion(f"{text}\n```", lp, 3) for text, lp in answers])
        return out

    async def close(self) -> None:
        self.closed = True
