"""Where a tactic starts, read from the parsers of Lean sources (core Lean 4, Batteries, Mathlib, Aesop, …): every
syntax declaration whose pattern takes a tactic (`tactic`, `tacticSeq`, `convSeq`, `conv`, …) and what stands right
before that argument, compared with what the tactic guard's configuration rule knows
(`burnqed.lean.tactic_starts`, docs/lean.md "The tactic guard").

    M=/work/.mirror    # where the `fetch` tool puts bare git dirs
    python scripts/tactic_combinators.py lean4=/tmp/lean4-core mathlib=$M/Vierkantor+mathlib4/repo \
        batteries=$M/leanprover-community+batteries/repo aesop=$M/leanprover-community+aesop/repo
    python scripts/tactic_combinators.py --all ...        # every declaration found, then the comparison

    before a tactic in the sources, unknown to the guard:
      brand_new_combinator   mathlib    Mathlib/Tactic/New.lean:40  syntax : tactic
    known to the guard, not found in these sources:
      ...
    declarations per source: mathlib 61 (at fd003e0d8c36), ...

Each argument is NAME=PATH (or PATH): a work tree or a git directory read at `--rev`, as `command_keywords.py`
reads them (its file walk, comment blanking and declaration splitting are reused; tests and demos skipped).

What is read: `syntax`/`macro`/`elab … : CATEGORY` (any category: `by` is a term), `syntax NAME := …` (a named
piece such as Mathlib's `(norm := tac)`), and a def whose body is a `leading_parser` (`>>` a sequence, `<|>` a
choice, `optional`/`many`/`sepBy…` as in the syntax DSL, a parser defined in the same file read through). A pattern
is read as Lean's syntax DSL: string atoms (`&"…"` too), parsers (`x:p`, `p:prec`), `(…)`, `?`, `*`, `+`, `,*`,
`<|>`, the calls `sepBy1(p, "sep")`, `optional(…)`, `many(…)`, and the wrappers that consume nothing or pass through
(`withPosition`, `ppDedent`, `colGe`, `ppSpace`, `notFollowedBy(…)`, …). For each tactic argument the script lists
what may stand right before it: an atom (`try`, `<|>`, `=>`, `| `, `(`), another parser (`num` in `iterate 2 tac`,
`term` in `success_if_fail_with_msg "m" tac`: the declaration's first atom is then what the guard must know), or
nothing (the argument opens the pattern: `x:tactic " <;> " y:tactic`, where it starts where the whole does).
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from command_keywords import SKIP, _category, _strip_prefix, blank_comments, chunks, commit_of, lean_files

from burnqed.lean.tactic_starts import AFTER_AN_ARGUMENT, BEFORE_A_TACTIC, TACTIC_VALUED
from leankit.commands import command_tokens

# The parsers that are a tactic or a tactic sequence (conv tactics take configurations too).
TACTIC_PARSERS = frozenset({"tactic", "tacticSeq", "tacticSeqBracketed", "tacticSeq1Indented", "tacticSeqIndentGt",
                            "tacticParser", "convSeq", "conv", "convSeq1Indented", "convSeqBracketed",
                            "matchRhsTacticSeq", "nestedTactic", "matchRhs"})
PASS_THROUGH = frozenset({"withPosition", "withoutPosition", "ppDedent", "ppIndent", "atomic", "group", "ppGroup",
                          "ppRealGroup", "ppRealFill", "ppAllowUngrouped", "withAnonymousAntiquot", "incQuotDepth",
                          "ppDedentIfGrouped", "withoutForbidden", "withForbidden", "patternIgnore", "ppHardLine",
                          "withPositionAfterLinebreak", "leading_parser", "trailing_parser", "node", "leadingNode",
                          "withAntiquot", "suppressInsideQuot"})
CONSUME_NOTHING = frozenset({"notFollowedBy", "lookahead", "ppSpace", "ppLine", "colGt", "colGe", "colEq",
                             "checkColGt", "checkColGe", "checkColEq", "lineEq", "noWs", "ppHardSpace",
                             "errorAtSavedPos", "checkNoWsBefore", "checkWsBefore", "checkLineEq",
                             "ppHardLineUnlessUngrouped", "checkPrec", "setExpected", "skip", "mkAntiquot"})
OPTIONAL = frozenset({"optional", "many", "manyIndent", "optional'"})
REPEATED = frozenset({"many1", "many1Indent"})
SEPARATED = frozenset({"sepBy", "sepBy1", "sepByIndent", "sepBy1Indent", "sepByIndentSemicolon",
                       "sepBy1IndentSemicolon", "sepByT", "sepBy1T"})
PRECEDENCES = frozenset({"max", "arg", "lead", "min", "min1", "maxPrec", "argPrec", "leadPrec", "minPrec"})
_LEX = re.compile(r'(?P<str>&?"(?:[^"\\]|\\.)*")|(?P<id>[A-Za-z_«][\w.\'»]*)|(?P<num>\d+)|(?P<sym><\|>|>>|:=|,\*,\?'
                  r"|,[*+]|\S)", re.S)
START = "(start)"
# A parser handed to one defined in another file, and the atom that file's parser puts right before it: core's
# `match`/`intro` pass `(rhsParser := matchRhs)` to `Term.matchAlts`, whose `matchAlt` reads `darrow` (" => ") first.
THROUGH = {"{rhsParser}": "=>"}


@dataclass
class Before:
    """What may stand right before one tactic argument of one declaration."""

    before: str        # an atom (`try`, `<|>`), `{parser}` (`{num}`, `{term}`), or START
    head: str          # the declaration's first atom (its word, or its symbol for a trailing one)
    category: str      # what the declaration declares: `tactic`, `conv`, `term`, `syntax normStx`, `parser`
    source: str
    path: str
    line: int
    pair: str = ""     # the atom before `before` when that is an atom too (`disch` for `(disch := tac)`)


Node = tuple  # ("atom", text) | ("parser", name) | ("seq", [..]) | ("alt", [..]) | ("opt", n) | ("many", n)
#               | ("sep", item, separator, at_least_one)


def lex(text: str) -> list[tuple[str, str, bool]]:
    """(kind, text, glued to the token before) for each token of a pattern."""
    out: list[tuple[str, str, bool]] = []
    end = -1
    for found in _LEX.finditer(text):
        kind = found.lastgroup or "sym"
        out.append((kind, found.group(), found.start() == end))
        end = found.end()
    return out


class PatternReader:
    """Lean's syntax DSL (and `leading_parser` bodies) as a tree of `Node`s."""

    def __init__(self, words: list[tuple[str, str, bool]], bodies: dict[str, str] | None = None, depth: int = 0):
        self.words, self.at, self.bodies, self.depth = words, 0, bodies or {}, depth

    def peek(self, offset: int = 0) -> tuple[str, str, bool]:
        index = self.at + offset
        return self.words[index] if index < len(self.words) else ("end", "", False)

    def choice(self, stops: tuple[str, ...] = ()) -> Node:
        options = [self.sequence(stops)]
        while self.peek()[1] == "<|>":
            self.at += 1
            options.append(self.sequence(stops))
        return options[0] if len(options) == 1 else ("alt", options)

    def sequence(self, stops: tuple[str, ...]) -> Node:
        items: list[Node] = []
        while self.peek()[0] != "end" and self.peek()[1] not in (*stops, "<|>"):
            if self.peek()[1] in (">>", "$", "<|"):
                self.at += 1
                continue
            before = self.at
            item = self.item(stops)
            items.append(self.postfix(item))
            if self.at == before:
                self.at += 1
        return ("seq", items)

    def postfix(self, item: Node) -> Node:
        _kind, text, glued = self.peek()
        if glued and text == "?":
            self.at += 1
            return ("opt", item)
        if glued and text in ("*", "+"):
            self.at += 1
            return ("opt", ("many", item)) if text == "*" else ("many", item)
        if glued and text in (",*", ",+", ",*,?"):
            self.at += 1
            return ("sep", item, ("atom", ","), text == ",+")
        return item

    def item(self, stops: tuple[str, ...]) -> Node:
        kind, text, _ = self.peek()
        self.at += 1
        if kind == "str":
            return ("atom", text.lstrip("&")[1:-1].strip())
        if text == "(":
            inner = self.choice((")",))
            self.at += 1
            return inner
        if kind != "id":
            return ("seq", [])
        if (self.peek()[1] == ":" and self.peek()[2] and self.peek(1)[0] in ("num",)) or (
                self.peek()[1] == ":" and self.peek(1)[1] in PRECEDENCES):
            self.at += 2  # `term:max`, `tactic:2`: a precedence
        elif self.peek()[1] == ":" and self.peek()[2]:
            self.at += 1  # `x:tactic`: a binding, the parser follows
            return self.item(stops)
        if self.peek()[1] == "(" and self.peek()[2]:
            return self.call(text)
        return self.applied(text, stops)

    def arguments(self) -> list[Node]:
        self.at += 1  # the `(`
        found = [self.choice((",", ")"))]
        while self.peek()[1] == ",":
            self.at += 1
            found.append(self.choice((",", ")")))
        self.at += 1
        return found

    def call(self, name: str) -> Node:
        """`name(args)`, the DSL's call form."""
        args = self.arguments()
        return self.wrap(name, args)

    def wrap(self, name: str, args: list[Node]) -> Node:
        short = name.rsplit(".", maxsplit=1)[-1]
        if short in CONSUME_NOTHING:
            return ("seq", [])
        if short in PASS_THROUGH:
            return ("seq", args)
        if short in OPTIONAL:
            return ("opt", ("seq", args[:1]))
        if short in REPEATED:
            return ("many", ("seq", args[:1]))
        if short in SEPARATED:
            separator = args[1] if len(args) > 1 else ("atom", ";")
            return ("sep", args[0], separator, "1" in short)
        return self.parser(name)

    def applied(self, name: str, stops: tuple[str, ...]) -> Node:
        """A name in a `leading_parser` body applied to what follows it (`optional ident`, `sepBy1 p ", "`)."""
        short = name.rsplit(".", maxsplit=1)[-1]
        takes = (1 if short in CONSUME_NOTHING | PASS_THROUGH | OPTIONAL | REPEATED else 2 if short in SEPARATED
                 else 0)
        if short in CONSUME_NOTHING and short not in ("notFollowedBy", "lookahead", "errorAtSavedPos"):
            takes = 0
        if not takes:
            return self.parser(name)
        args = [self.postfix(self.item(stops)) for _ in range(takes)
                if self.peek()[0] != "end" and self.peek()[1] not in (*stops, ">>", "<|>")]
        return self.wrap(name, args) if args else self.parser(name)

    def parser(self, name: str) -> Node:
        short = name.rsplit(".", maxsplit=1)[-1]
        if short in CONSUME_NOTHING:
            return ("seq", [])
        if short not in TACTIC_PARSERS and self.depth < 3 and short in self.bodies:
            return PatternReader(lex(self.bodies[short]), self.bodies, self.depth + 1).choice()
        return ("parser", short)


Seen = frozenset[tuple[str, str]]  # (what was read last, the atom read before it or "")


def walk(node: Node, incoming: Seen, found: list[tuple[str, str]]) -> Seen:
    """What may be the last thing read after `node` (an atom or `{parser}`, each with the atom before it; what came
    before when `node` may read nothing), given what may come before it; for each tactic argument, what may come
    before it is appended to `found`."""
    kind = node[0]
    if kind == "atom":
        if not node[1]:
            return incoming
        return frozenset((node[1], "" if is_parser(last) or last == START else last) for last, _ in incoming)
    if kind == "parser":
        if node[1] in TACTIC_PARSERS:
            found.extend(sorted(incoming))
        return frozenset({("{" + node[1] + "}", "")})
    if kind == "seq":
        out = incoming
        for item in node[1]:
            out = walk(item, out, found)
        return out
    if kind == "alt":
        return frozenset().union(*(walk(option, incoming, found) for option in node[1]))
    if kind == "opt":
        return incoming | walk(node[1], incoming, found)
    if kind == "many":
        once = walk(node[1], incoming, [])
        return once | walk(node[1], incoming | once, found)
    item_out = walk(node[1], incoming, [])  # ("sep", item, separator, at_least_one)
    again = walk(node[1], incoming | walk(node[2], item_out, found), found)
    return item_out | again | (frozenset() if node[3] else incoming)


def first_atom(node: Node) -> str:
    """The first atom a pattern holds, or ""."""
    if node[0] == "atom":
        return str(node[1])
    children = node[1] if node[0] in ("seq", "alt") else [node[1]] if node[0] in ("opt", "many") else (
        [node[1], node[2]] if node[0] == "sep" else [])
    return next((atom for child in children if (atom := first_atom(child))), "")


def pattern_of(chunk: str) -> tuple[str, str] | None:
    """(category, pattern text) of a declaration chunk, or None: `syntax`/`macro`/`elab … : cat`, `syntax NAME :=
    …`, `def NAME … := leading_parser …`."""
    words = [w for _, w, _ in lex(chunk)]
    rest, _ = _strip_prefix(words)
    if not rest:
        return None
    keyword = rest[0]
    if keyword in ("syntax", "macro", "elab"):
        named = re.match(r"\s*(?:@\[[^\]]*\]\s*)?(?:(?:local|scoped|private|public|meta)\s+)*syntax\s+([\w.]+)\s*:=",
                         chunk)
        if keyword == "syntax" and named:
            return "syntax " + named.group(1), chunk[named.end():]
        category, _ = _category(rest[1:], keyword)
        if not category:
            return None
        head = re.search(rf"\b{keyword}\b", chunk)
        body = chunk[head.end():] if head else chunk
        cut = _category_colon(body, keyword)
        return (category.split(".")[-1], body[:cut]) if cut >= 0 else None
    if keyword in ("def", "abbrev") and ":=" in chunk and "leading_parser" in chunk.split(":=", 1)[1][:200]:
        return "parser", chunk.split(":=", 1)[1]
    return None


def _category_colon(body: str, keyword: str) -> int:
    """The offset in `body` of the depth-0 `:` before the category (the last one for `syntax`, the one before `=>`
    otherwise), with the declaration's `(name := …)`, `(priority := …)` and `:prec` dropped by blanking them."""
    depth, found, index = 0, -1, 0
    in_string = False
    while index < len(body):
        char = body[index]
        if char == '"' and (index == 0 or body[index - 1] != "\\"):
            in_string = not in_string
        elif not in_string:
            depth += 1 if char in "([" else -1 if char in ")]" else 0
            if depth == 0 and body.startswith("=>", index) and keyword != "syntax":
                return found
            if depth == 0 and char == ":" and body[index + 1 : index + 2] not in ("=",) and re.match(
                    r"\s*[A-Za-z_][\w.]*\s*(=>|$|\n)", body[index + 1 :]):
                found = index
        index += 1
    return found


def declarations(text: str, source: str, path: str) -> Iterator[Before]:
    """What stands before each tactic argument in one file's declarations."""
    clean = blank_comments(text)
    bodies: dict[str, str] = {}
    for _, chunk in chunks(clean):
        words, _ = _strip_prefix([w for _, w, _ in lex(chunk)])
        if len(words) > 2 and words[0] in ("def", "abbrev", "syntax") and ":=" in chunk:
            bodies.setdefault(words[1].split(".")[-1], chunk.split(":=", 1)[1])  # `syntax cdotTk := …` too
    for line, chunk in chunks(clean):
        read = pattern_of(chunk)
        if read is None:
            continue
        category, pattern = read
        words = lex(pattern)
        words = _drop_options(lex(pattern), category)
        tree = PatternReader(words, bodies).choice()
        found: list[tuple[str, str]] = []
        walk(tree, frozenset({(START, "")}), found)
        head = first_atom(tree)
        for before, last in dict.fromkeys(found):
            yield Before(before, head, category, source, path, line + _line_of(chunk, pattern), last)


def _drop_options(words: list[tuple[str, str, bool]], category: str) -> list[tuple[str, str, bool]]:
    """A pattern without the declaration's `:prec` (`macro:1 …`), `(name := …)` and `(priority := …)`."""
    while words:
        if words[0][1] == ":" and category != "parser":
            words = words[2:]
        elif words[0][1] == "(" and len(words) > 2 and words[2][1] == ":=":
            depths = itertools.accumulate(1 if w[1] == "(" else -1 if w[1] == ")" else 0 for w in words)
            words = words[next((i for i, depth in enumerate(depths) if depth == 0), len(words)) + 1 :]
        else:
            return words
    return words


def _line_of(chunk: str, pattern: str) -> int:
    return chunk[: max(chunk.find(pattern[:40]), 0)].count("\n")


def is_parser(before: str) -> bool:
    """Whether what stands before a tactic is a parser (`{num}`), not an atom (`{`)."""
    return len(before) > 2 and before[0] == "{" and before[-1] == "}"


def covered(found: Before) -> bool:
    """Whether the guard's configuration rule takes the place after `found.before` for one where a tactic starts."""
    if found.category == "command" or any(t.start == 0 for t in command_tokens(found.head)):
        return True  # a command, or a `#…` tactic: refused whole
    if found.before in (START, "{num}"):
        return True  # where the whole starts; a numeral before a name is a tactic start to the guard
    if found.before in THROUGH:
        return THROUGH[found.before] in BEFORE_A_TACTIC
    if is_parser(found.before):
        return found.head in AFTER_AN_ARGUMENT
    if found.before == ":=":
        return found.pair in TACTIC_VALUED
    return found.before in BEFORE_A_TACTIC


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sources", nargs="+", help="NAME=PATH or PATH: a work tree or a git directory")
    parser.add_argument("--rev", default="HEAD", help="the revision read in a git directory")
    parser.add_argument("--skip", default=SKIP, help="paths not read (a regular expression)")
    parser.add_argument("--all", action="store_true", help="print every place found")
    parser.add_argument("--json", help="write the places and the comparison here")
    options = parser.parse_args(argv)
    skip = re.compile(options.skip)
    found: list[Before] = []
    commits: dict[str, str] = {}
    for source in options.sources:
        name, _, path = source.rpartition("=") if "=" in source else (Path(source).name, "", source)
        commits[name] = commit_of(Path(path), options.rev)
        for file, text in lean_files(Path(path), options.rev, skip):
            found.extend(declarations(text, name, file))
    report(found, commits, options.all)
    if options.json:
        missing = sorted({f.head if is_parser(f.before) else f.before for f in found if not covered(f)})
        Path(options.json).write_text(json.dumps({"commits": commits, "missing": missing,
                                                  "places": [asdict(f) for f in found]}, indent=1))
    return 0


def report(found: list[Before], commits: dict[str, str], every: bool) -> None:
    """Print the comparison (and with `every`, each place)."""
    def line(f: Before) -> str:
        pair = f" (after {f.pair!r})" if f.pair and f.before == ":=" else ""
        return f"  {f.before:28} {f.head:28} {f.source:10} {f.path}:{f.line}  {f.category}{pair}"

    if every:
        print("every place a tactic starts (what stands before, the declaration's first atom, where):")
        for f in found:
            print(line(f))
    print("before a tactic in the sources, unknown to the guard:")
    for f in sorted(found, key=lambda f: (f.before, f.head, f.source, f.path)):
        if not covered(f):
            print(line(f))
    atoms = {f.before for f in found if not is_parser(f.before) and f.before not in (START, ":=")}
    atoms |= {f.head for f in found if is_parser(f.before) and f.before != "{num}"}
    atoms |= {f.pair for f in found if f.before == ":="}
    print("known to the guard, not found in these sources:")
    print("  " + " ".join(sorted((BEFORE_A_TACTIC | AFTER_AN_ARGUMENT | TACTIC_VALUED) - atoms)))
    print("declarations per source: " + ", ".join(
        f"{name} {len({(f.path, f.line) for f in found if f.source == name})} (at {commit[:12] or '?'})"
        for name, commit in commits.items()))


if __name__ == "__main__":
    sys.exit(main())
