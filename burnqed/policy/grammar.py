"""Grammar-constrained decoding for the local decoder, with xgrammar (the grammar engine of SGLang's `ebnf` sampling
parameter): each step, the tokens a row's grammar cannot continue with get logit -inf (docs/search.md, "Constrained
sketches").

    grammars = Grammars(tokenizer, folder, vocab_size)   # one per loaded model: its tokenizer's vocabulary
    rows = grammars.rows(ebnf, count)                     # a matcher per decoded row (GrammarError: no grammar)
    rows.mask(logits, live)                               # before sampling: -inf where row live[i] cannot go
    rows.accept(index, token)                             # after: the row's matcher takes its token

xgrammar is imported inside the functions (the `model` extra installs it): a server or decoder never asked for a
grammar never loads it.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

COMPILED_KEPT = 8  # compiled grammars kept per model (one per distinct ebnf text; a run sends one or two)


class GrammarError(ValueError):
    """A grammar that does not compile; the message is SGLang's ("Failed to compile ebnf grammar: …")."""


class Grammars:
    """The compiled grammars of one model's vocabulary (`TokenizerInfo` built once, on the first grammar)."""

    def __init__(self, tokenizer: Any, folder: Path, vocab_size: int) -> None:
        self._tokenizer = tokenizer
        self._folder = folder
        self._vocab_size = vocab_size
        self._compiler: Any = None
        self._compiled: OrderedDict[str, Any] = OrderedDict()

    def _info(self) -> Any:
        """xgrammar's view of the vocabulary: from the transformers tokenizer when the model has one, else from the
        folder's tokenizer.json read by transformers' fast tokenizer (the tokenizers-only reader of a CPU start has
        no `get_vocab`); the stop token is the tokenizer's EOS, as SGLang's."""
        import xgrammar

        tokenizer = self._tokenizer
        if not hasattr(tokenizer, "backend_tokenizer"):
            from transformers import PreTrainedTokenizerFast

            tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(self._folder / "tokenizer.json"))  # type: ignore[no-untyped-call]
        eos = self._tokenizer.eos_token_id
        return xgrammar.TokenizerInfo.from_huggingface(tokenizer, vocab_size=self._vocab_size,
                                                       stop_token_ids=None if eos is None else [eos])

    def compiled(self, ebnf: str) -> Any:
        """`ebnf` compiled against this vocabulary (kept for the next request); `GrammarError` when it does not
        compile (SGLang's words: a 400 for the request)."""
        import xgrammar

        if ebnf in self._compiled:
            self._compiled.move_to_end(ebnf)
            return self._compiled[ebnf]
        if "\0" in ebnf:  # SGLang refuses a grammar holding a NUL byte before compiling it
            raise GrammarError("Failed to compile ebnf grammar: the grammar contains a NUL byte")
        if self._compiler is None:
            self._compiler = xgrammar.GrammarCompiler(self._info())
        try:
            compiled = self._compiler.compile_grammar(ebnf)
        except RuntimeError as exc:  # xgrammar's parser and compiler errors
            raise GrammarError(f"Failed to compile ebnf grammar: {exc}") from None
        self._compiled[ebnf] = compiled
        while len(self._compiled) > COMPILED_KEPT:
            self._compiled.popitem(last=False)
        return compiled

    def rows(self, ebnf: str, count: int) -> GrammarRows:
        """A fresh matcher for each of `count` rows."""
        import xgrammar

        compiled = self.compiled(ebnf)
        return GrammarRows([xgrammar.GrammarMatcher(compiled) for _ in range(count)], self._vocab_size)


class GrammarRows:
    """One matcher per decoded row, by the row's index (rows leave the batch; their index stays)."""

    def __init__(self, matchers: list[Any], vocab_size: int) -> None:
        import xgrammar

        self.matchers = matchers
        self._bitmask = xgrammar.allocate_token_bitmask(len(matchers), vocab_size)

    def mask(self, logits: torch.Tensor, live: list[int]) -> None:
        """Set to -inf, in place, the logits of the tokens row `live[i]`'s grammar does not allow next (logits row i):
        every token but the stop token once the grammar is complete."""
        import xgrammar

        bitmask = self._bitmask[: len(live)]
        for row, index in enumerate(live):
            self.matchers[index].fill_next_token_bitmask(bitmask, row)
        xgrammar.apply_token_bitmask_inplace(logits, bitmask.to(logits.device), vocab_size=logits.shape[-1])

    def accept(self, index: int, token: int) -> None:
        """Row `index`'s matcher takes `token` (one `mask` allowed; a row whose matcher has terminated is done)."""
        if not self.matchers[index].is_terminated() and not self.matchers[index].accept_token(token):
            raise RuntimeError(f"the grammar refused token {token} that its own mask allowed")
