"""Policy doubles for search tests: scripted answers keyed by the state in the prompt. The corpus oracle (the
replay corpus' recorded tactics, good and bad, for the state's first goal) lives in `burnqed.policy.oracle`,
where the benchmarks can use it too; it is re-exported here.

More lenient than a real policy (SGLang or the local model), and why: no prompt is too long (no context length,
no 400), `sampling.temperature`, `stop` and the other sampling fields change nothing (they are checked as SGLang
checks them, `sampling_problem`, and recorded) and a script's answer is returned whole whatever `max_new_tokens` is
(the search tests choose the tactics, not a sampler), seeds are checked and recorded but do not change the answer,
and it never fails unless the script raises or the sampling is one SGLang refuses. The HTTP client's handling of
those limits is tested against tests/doubles/fault_server.py, which honours them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from burnqed.policy.base import AsyncClosing, Completion, Sampling, Seeds, check_seeds, sampling_problem
from burnqed.policy.oracle import Answer, corpus_oracle, first_goal, state_of

__all__ = ["Answer", "ScriptedPolicy", "corpus_oracle", "declaration_of", "first_goal", "state_of"]


def declaration_of(prompt: str) -> str:
    """The `theorem NAME : STATEMENT` a whole-proof prompt shows (its last line before `:= by`)."""
    head = prompt.rsplit(" := by", 1)[0]
    return head.rsplit("\n", 1)[-1]


class ScriptedPolicy(AsyncClosing):
    """Answers each prompt with `script(key(prompt))` (cut to `sampling.n`; the key is the state in the prompt, or
    for whole-proof prompts `declaration_of`); records every call and its sampling. Each answer is 3 tokens, or
    `tokens(text)` when given. Seeds are checked (`check_seeds`) and recorded (`seeds`), not used: a script is
    deterministic."""

    name = "scripted"

    def __init__(self, script: Callable[[str], Answer], delay_s: float = 0.0, key: Callable[[str], str] = state_of,
                 tokens: Callable[[str], int] | None = None) -> None:
        self.script = script
        self.delay_s = delay_s
        self.key = key
        self.tokens = tokens
        self.calls: list[list[str]] = []
        self.samplings: list[Sampling] = []
        self.seeds: list[Seeds | None] = []
        self.closed = False

    async def generate(self, prompts: Sequence[str], sampling: Sampling,
                       seeds: Seeds | None = None) -> list[list[Completion]]:
        check_seeds(prompts, sampling.n, seeds)
        problem = sampling_problem(sampling, seeded=seeds is not None)
        if problem is not None:
            raise ValueError(f"invalid sampling parameters: {problem}")
        self.seeds.append(seeds)
        self.calls.append([self.key(p) for p in prompts])
        self.samplings.append(sampling)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        out = []
        for prompt in prompts:
            answers = self.script(self.key(prompt))[: sampling.n]
            count = self.tokens or (lambda _: 3)
            out.append([Completion(f"{text}\n```", lp, count(text)) for text, lp in answers])
        return out

    async def close(self) -> None:
        self.closed = True
