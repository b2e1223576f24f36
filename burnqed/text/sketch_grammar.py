"""The sketch format (`burnqed.text.sketch`) as a grammar: the completions a planner may write, in the EBNF dialect of
xgrammar (the grammar engine of SGLang's `ebnf` sampling parameter and of the local decoder), so that constrained
sampling cannot write a sketch `read_sketch` refuses (docs/search.md, "Constrained sketches").

    grammar = sketch_grammar()           # a SketchGrammar: its rules, caps and the text both decoders are sent
    grammar.ebnf                         # "root ::= …": SGLang's sampling_params.ebnf, `Sampling.ebnf`
    grammar.sample(random.Random(0))     # a completion drawn from the rules (tests: every one is a sketch)
    grammar.longest                      # the most characters a completion can have (≤ lean.max_text_chars)

A completion is the proof body as the sketch prompts prime it (`text.prompt.build_sketch_prompt`), each line indented
two columns, then the closing fence: up to `max_lines` skeleton lines, then holes `have hX : P := by sorry` each
followed by up to `max_lines` skeleton lines, at least one hole and at most `max_holes`. What keeps every such text a
sketch the reader accepts:
- a hole's name is `h`, a character of `NAME_CHARS`, then up to `NAME_REST` more (of those, `'` and `_`); the names'
  first characters strictly increase or strictly decrease through the sketch in that order (a context-free grammar
  cannot compare two free names; a monotone first character keeps them apart: `hx, hy`, `hn, hm`, `hab, hbc`): no two
  holes share a name (the reader refuses a name written twice); never `this` or `_…`, and no `sorry` (it starts `h`);
- every line is on one line at the body's column, non-blank: no continuation line turns a hole into a skeleton line;
- free text (a statement, a skeleton line) holds no `rr` and no `dm` (so no `sorry`, `sorryAx` or `admit`), no `--`
  or `/-` (no comment hides a hole), no `"`, backtick, `«`/`»`, control character or line break but the line's own,
  no blank but the space, at most `max_atoms` atoms (a character, or two or three when a character above must be
  followed by an allowed one); a statement is non-blank and holds no `:=` (the hole's own ends it);
- with `balanced`, brackets in free text come in pairs one level deep (Lean's parser meets no unclosed one).
The same rules give the EBNF and `sample`'s draws, so a test of one tests the other. Pure: no I/O.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

# The characters a hole's name may end in, in the order hole names must follow (`h₁`, `h₂`; `ha`, `hb`; `hx`, `hy`).
NAME_CHARS = "0123456789₀₁₂₃₄₅₆₇₈₉abcdefghijklmnopqrstuvwxyz"
NAME_REST = 7  # the characters a hole's name may have after its first (of NAME_CHARS, `'` and `_`)
# What free text never holds: line breaks and every other blank but the space (Python's `str.split` and `\s` blanks,
# which the reader collapses or splits lines at), control characters, a string's quote, the fence's backtick and
# `«»` (an escaped name is read without them).
_EXCLUDED = ("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
             "\u2009\u200a\u2028\u2029\u202f\u205f\u3000\"`«»")
_PRINTABLE = ((0x20, 0x7E), (0xA0, 0xD7FF), (0xE000, 0x10FFFF))  # no control character and no surrogate
# A character that must not be followed by certain characters (`sorry`, `admit`, a comment, a statement's `:=`).
_FOLLOWERS = {"r": "r", "d": "m", "-": "-", "/": "-"}
_STATEMENT_FOLLOWERS = {**_FOLLOWERS, ":": "="}
BRACKETS = {"(": ")", "[": "]", "{": "}", "⟨": "⟩"}
FENCE = "```"
INDENT = "  "
HOLE_END = " := by sorry"
# The atoms `sample` draws plain characters from (any character the class admits may be sampled by a model).
_SAMPLE_POOL = ("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 +*^<>=≤≥≠()[]⟨⟩{},.;'!?|&∀∃→↔¬∧∨ℝℕℤ"
                "₀₁₂·%$#@~")


@dataclass(frozen=True, slots=True)
class Chars:
    """One character: of `allowed` (`negated` False) or of none of `allowed` and no control character (True)."""

    allowed: str
    negated: bool = False


@dataclass(frozen=True, slots=True)
class Ref:
    rule: str


@dataclass(frozen=True, slots=True)
class Repeat:
    """`rule` between `low` and `high` times."""

    rule: str
    low: int
    high: int


Item = str | Chars | Ref | Repeat  # a str is a literal
Rules = dict[str, list[list[Item]]]  # a rule's alternatives, each a sequence


@dataclass(frozen=True)
class SketchGrammar:
    """The sketch format's grammar with its caps (`sketch_grammar`)."""

    max_holes: int
    max_lines: int
    max_atoms: int
    balanced: bool
    rules: Rules = field(repr=False)

    @cached_property
    def ebnf(self) -> str:
        """The grammar in xgrammar's EBNF (`root ::= …`), one rule a line."""
        return "\n".join(f"{name} ::= {' | '.join(_sequence(alt) for alt in alts)}"
                         for name, alts in self.rules.items()) + "\n"

    @cached_property
    def longest(self) -> int:
        """The most characters a completion can have (the rules hold no cycle: each is measured once)."""
        lengths: dict[str, int] = {}

        def measure(name: str) -> int:
            if name not in lengths:
                lengths[name] = max(sum(_length(item, measure) for item in alt) for alt in self.rules[name])
            return lengths[name]

        return measure("root")

    def sample(self, rng: random.Random, rule: str = "root") -> str:
        """A text the grammar derives from `rule`, each choice drawn with `rng` (repeats short, mostly)."""
        out: list[str] = []
        self._draw(rule, rng, out)
        return "".join(out)

    def _draw(self, rule: str, rng: random.Random, out: list[str]) -> None:
        alts = self.rules[rule]
        passing = [alt for alt in alts if len(alt) == 1 and isinstance(alt[0], Ref)]  # a chain's "not this name"
        chosen = passing[0] if passing and rng.random() < 0.9 else rng.choice(alts)
        for item in chosen:
            if isinstance(item, str):
                out.append(item)
            elif isinstance(item, Chars):
                out.append(_draw_char(item, rng))
            elif isinstance(item, Ref):
                self._draw(item.rule, rng, out)
            else:
                count = min(item.high, item.low + int(rng.expovariate(0.5)))
                for _ in range(count):
                    self._draw(item.rule, rng, out)


def _length(item: Item, measure: Callable[[str], int]) -> int:
    if isinstance(item, str):
        return len(item)
    if isinstance(item, Chars):
        return 1
    return measure(item.rule) * (1 if isinstance(item, Ref) else item.high)


def _draw_char(chars: Chars, rng: random.Random) -> str:
    pool = [c for c in _SAMPLE_POOL if c not in chars.allowed] if chars.negated else list(chars.allowed)
    return rng.choice(pool)


def sketch_grammar(max_holes: int = 6, max_lines: int = 6, max_atoms: int = 120, *, balanced: bool = False,
                   max_text_chars: int = 100_000) -> SketchGrammar:
    """The sketch format's grammar: at most `max_holes` holes (1 to len(NAME_CHARS)), `max_lines` skeleton lines
    before the first hole and after each, and `max_atoms` atoms a line (or statement), fewer where the longest
    completion would be over `max_text_chars` (lean.max_text_chars: no text the grammar admits is refused for its
    length); ValueError when not even one atom a line fits. `balanced`: brackets `()`, `[]`, `{}`, `⟨⟩` in free text
    come in pairs, one level deep, a pair counting as one atom of its line and holding up to a third as many atoms."""
    if not 1 <= max_holes <= len(NAME_CHARS) or max_lines < 0 or max_atoms < 1:
        raise ValueError(f"caps out of range: max_holes {max_holes} (1 to {len(NAME_CHARS)}), max_lines {max_lines}, "
                         f"max_atoms {max_atoms}")
    low, high = 0, max_atoms  # the most atoms that fit: a grammar's longest grows with its atoms
    while low < high:
        middle = (low + high + 1) // 2
        if _grammar(max_holes, max_lines, middle, balanced).longest <= max_text_chars:
            low = middle
        else:
            high = middle - 1
    if low >= 1:
        return _grammar(max_holes, max_lines, low, balanced)
    raise ValueError(f"lean.max_text_chars ({max_text_chars}) is too small for a sketch grammar of {max_holes} "
                     f"hole(s) (planner.max_holes) and {max_lines} skeleton lines a gap")


def _grammar(max_holes: int, max_lines: int, max_atoms: int, balanced: bool) -> SketchGrammar:
    rules: Rules = {"root": [[Repeat("line", 0, max_lines), Ref("up_0_0"), FENCE],
                             [Repeat("line", 0, max_lines), Ref(f"down_0_{len(NAME_CHARS) - 1}"), FENCE]]}
    for k in range(max_holes):
        rules.update(_chain(k, max_holes, max_lines, up=True))
        rules.update(_chain(k, max_holes, max_lines, up=False))
    rules["done"] = [[""]]
    for i, char in enumerate(NAME_CHARS):
        rules[f"hole_{i}"] = [[f"{INDENT}have h{char}", Repeat("name_rest", 0, NAME_REST), " : ", Ref("statement"),
                               f"{HOLE_END}\n"]]
    rules["name_rest"] = [[Chars(NAME_CHARS + "'_")]]
    rules["line"] = [[INDENT, Ref("line_first"), Repeat("line_piece", 0, max_atoms - 1), "\n"]]
    rules["statement"] = [[Ref("statement_first"), Repeat("statement_piece", 0, max_atoms - 1)]]
    group = max(1, max_atoms // 3) if balanced else 0
    for name, followers in (("line", _FOLLOWERS), ("statement", _STATEMENT_FOLLOWERS)):
        rules.update(_text_rules(name, followers, group))
    return SketchGrammar(max_holes, max_lines, max_atoms, balanced, _reachable(rules))


def _chain(k: int, max_holes: int, max_lines: int, *, up: bool) -> Rules:
    """`up_K_I` (`down_K_I`): K holes written, the next one's name at NAME_CHARS[I] or later (or earlier), each hole
    followed by its skeleton lines; `…_K_end` past the last name char: the end (once a hole is written)."""
    prefix, step = ("up", 1) if up else ("down", -1)

    def name(holes: int, index: int) -> str:
        return f"{prefix}_{holes}_{index}" if 0 <= index < len(NAME_CHARS) else f"{prefix}_{holes}_end"

    rules: Rules = {}
    for i in range(len(NAME_CHARS)):
        after = name(k + 1, i + step) if k + 1 < max_holes else "done"
        alts: list[list[Item]] = [[Ref(f"hole_{i}"), Repeat("line", 0, max_lines), Ref(after)]]
        if k > 0 or 0 <= i + step < len(NAME_CHARS):  # no hole yet: the last name char must be a hole's
            alts.append([Ref(name(k, i + step))])
        rules[name(k, i)] = alts
    if k > 0:
        rules[name(k, -1)] = [[""]]
    return rules


def _text_rules(name: str, followers: dict[str, str], group: int) -> Rules:
    """`NAME_piece` (an atom of free text, or with `group` > 0 a bracket pair around up to `group` atoms) and
    `NAME_first` (a line's or statement's first piece: no space), where a character of `followers` is followed by one
    not among its forbidden followers, the atom ending in a character that constrains nothing; each character class
    a rule of its own (`NAME_plain`, `NAME_after_I`), written once. Without groups a bracket is a plain character."""
    special = "".join(followers)
    excluded = _EXCLUDED + special + ("".join(BRACKETS) + "".join(BRACKETS.values()) if group else "")
    rules: Rules = {f"{name}_plain": [[Chars(excluded, negated=True)]]}
    for index, char in enumerate(special):
        rules[f"{name}_after_{index}"] = [[Chars(excluded + followers[char], negated=True)]]
    atoms: list[list[Item]] = [[Ref(f"{name}_plain")]]
    for index, first in enumerate(special):
        atoms.append([first, Ref(f"{name}_after_{index}")])
        atoms += [[first, second, Ref(f"{name}_after_{later}")] for later, second in enumerate(special)
                  if second not in followers[first]]
    rules[f"{name}_atom"] = atoms
    pairs: list[list[Item]] = [[opening, Repeat(f"{name}_atom", 0, group), closing]
                               for opening, closing in BRACKETS.items()] if group else []
    rules[f"{name}_piece"] = [[Ref(f"{name}_atom")], *pairs]
    rules[f"{name}_first"] = [[Chars(excluded + " ", negated=True)], *atoms[1:], *pairs]
    return rules


def _reachable(rules: Rules) -> Rules:
    """The rules reachable from root, in the order first reached (xgrammar refuses no unused rule, but the text
    sent on every request stays short)."""
    order = ["root"]
    for name in order:
        for alt in rules[name]:
            for item in alt:
                target = item.rule if isinstance(item, Ref | Repeat) else None
                if target is not None and target not in order:
                    order.append(target)
    return {name: rules[name] for name in order}


def _sequence(items: list[Item]) -> str:
    return " ".join(_item(item) for item in items) if items else '""'


def _item(item: Item) -> str:
    if isinstance(item, str):
        return _literal(item)
    if isinstance(item, Chars):
        return _char_class(item)
    if isinstance(item, Ref):
        return item.rule
    return f"{item.rule}{{{item.low},{item.high}}}"


def _escape(char: str, special: str = '\\"[]^-') -> str:
    code = ord(char)
    if char in special:
        return "\\" + char
    if code > 0xFFFF:
        return f"\\U{code:08x}"
    if code < 0x20 or 0x7F <= code <= 0xA0 or char in "\u1680\u2028\u2029\u202f\u205f\u3000" or (
            0x2000 <= code <= 0x200A):
        return f"\\u{code:04x}"
    return char


def _literal(text: str) -> str:
    return '"' + "".join(_escape(c, '\\"') for c in text) + '"' if text else '""'


def _char_class(chars: Chars) -> str:
    """A character class; a negated one written as the ranges it allows (printable ASCII, then everything past the
    C1 controls but the surrogates), as xgrammar 0.2.7 (SGLang 0.5.23's) misreads some negated classes holding
    characters past ASCII."""
    if not chars.negated:
        return "[" + "".join(_escape(c) for c in dict.fromkeys(chars.allowed)) + "]"
    ranges = list(_PRINTABLE)
    for code in sorted({ord(c) for c in chars.allowed}):
        split: list[tuple[int, int]] = []
        for low, high in ranges:
            if low <= code <= high:
                split += [(a, b) for a, b in ((low, code - 1), (code + 1, high)) if a <= b]
            else:
                split.append((low, high))
        ranges = split
    return "[" + "".join(_range(low, high) for low, high in sorted(ranges)) + "]"


def _range(low: int, high: int) -> str:
    return _escape(chr(low)) if low == high else f"{_escape(chr(low))}-{_escape(chr(high))}"
