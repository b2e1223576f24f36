"""A corpus oracle: proposes the replay corpus' recorded tactics for a state, as a trained model would propose
tactics. For benchmarks and tests that study scheduling and search mechanics, not learning; it never stands in
for a model in a stage's results.

    script = corpus_oracle(load_corpus())
    script(state_of(prompt))      # [(tactic, log-prob), ...]: the failing tactics first, then the working ones

The state is read back from a prompt's `/- tactic state: … -/` comment (`state_of`); answers are keyed by the
state's first goal, whitespace-normalised. Failing tactics get the HIGHER log-prob, so a search has to get past
them (every expansion costs real Lean work, as with a model).
"""

from __future__ import annotations

from collections.abc import Callable

from burnqed.text.prompt import STATE_COMMENT_CLOSE, STATE_COMMENT_OPEN
from leankit.corpus import Corpus, goal_pp

Answer = list[tuple[str, float]]  # (completion text, log-prob), most preferred first


def state_of(prompt: str) -> str:
    """The tactic state inside a prompt's `/- tactic state: … -/` comment, dedented."""
    body = prompt.split(STATE_COMMENT_OPEN, 1)[1].rsplit(STATE_COMMENT_CLOSE, 1)[0]
    lines = [line[4:] if line.startswith("    ") else line.strip() for line in body.strip("\n").split("\n")]
    return "\n".join(lines).strip()


def first_goal(state: str) -> str:
    """The first goal of a pretty-printed state, whitespace-normalised (the oracle's key)."""
    return " ".join(state.split("\n\n", 1)[0].split())


def corpus_oracle(corpus: Corpus, error_logprob: float = -0.1, ok_logprob: float = -0.5) -> Callable[[str], Answer]:
    """A script proposing every recorded tactic of the state's first goal; failing ones look MORE likely."""
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
