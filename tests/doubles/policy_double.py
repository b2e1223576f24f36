"""Policy doubles for search tests: scripted answers keyed by the state in the prompt, and a corpus
oracle that proposes the replay corpus' recorded tactics (good and bad) for the state's first goal."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from burnqed.lean.corpus import Corpus, goal_pp
from burnqed.policy.base import AsyncClosing, Completion, Sampling
from burnqed.prompt import STATE_COMMENT_CLOSE, STATE_COMMENT_OPEN

Answer = list[tuple[str, float]]  # (completion text, log-prob), most preferred first


def state_of(prompt: str) -> str:
    """The tactic state inside a prompt's `/- tactic state: … -/` comment, dedented."""
    body = prompt.split(STATE_COMMENT_OPEN, 1)[1].rsplit(STATE_COMMENT_CLOSE, 1)[0]
    lines = [line[4:] if line.startswith("    ") else line.strip() for line in body.strip("\n").split("\n")]
    return "\n".join(lines).strip()


def declaration_of(prompt: str) -> str:
    """The `theorem NAME : STATEMENT` a whole-proof prompt shows (its last line before `:= by`)."""
    head = prompt.rsplit(" := by", 1)[0]
    return head.rsplit("\n", 1)[-1]


def first_goal(state: str) -> str:
    return " ".join(state.split("\n\n", 1)[0].split())


class ScriptedPolicy(AsyncClosing):
    """Answers each prompt with `script(key(prompt))` (cut to `sampling.n`; the key is the state in the prompt, or
    for whole-proof prompts `declaration_of`); records every call and its sampling. Each answer is 3 tokens, or
    `tokens(text)` when given."""

    name = "scripted"

    def __init__(self, script: Callable[[str], Answer], delay_s: float = 0.0, key: Callable[[str], str] = state_of,
                 tokens: Callable[[str], int] | None = None) -> None:
        self.script = script
        self.delay_s = delay_s
        self.key = key
        self.tokens = tokens
        self.calls: list[list[str]] = []
        self.samplings: list[Sampling] = []
        self.closed = False

    async def generate(self, prompts: Sequence[str], sampling: Sampling) -> list[list[Completion]]:
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


def corpus_oracle(corpus: Corpus, error_logprob: float = -0.1, ok_logprob: float = -0.5) -> Callable[[str], Answer]:
    """A script proposing every recorded tactic of the state's first goal; failing ones look MORE likely,
    so the search has to get past them."""
    table: dict[str, Answer] = {}
    for theorem in corpus.theorems:
        for transition in theorem.transitions:
            key = " ".join(goal_pp(theorem.goals[transition.goal]).split())
            lp = error_logprob if transition.error is not None else ok_logprob
            table.setdefault(key, []).append((transition.tactic, lp))
    for answers in table.values():
        answers.sort(key=lambda a: -a[1])

    def script(state: str) -> Answer:
        return table.get(first_goal(state), [])

    return script
