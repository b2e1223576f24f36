"""The tokens that open a Lean command, read from the sources of the peers that declare commands (core Lean 4,
Batteries, Mathlib and Mathlib's dependencies), compared with `leankit.commands.COMMAND_KEYWORDS`, which the tactic
guard refuses at any column (docs/lean.md, "The tactic guard").

    M=/work/.mirror    # where the `fetch` tool puts bare git dirs
    python scripts/command_keywords.py lean4=/src/lean4 mathlib=/src/mathlib4 \
        batteries=$M/leanprover-community+batteries/repo aesop=$M/leanprover-community+aesop/repo
    python scripts/command_keywords.py --rev v4.20.0 lean4=/src/lean4.git   # a git dir, at a tag
    python scripts/command_keywords.py --all ...        # every head found, then the comparison
    python scripts/command_keywords.py --json heads.json ...

    missing from COMMAND_KEYWORDS (found in the sources):
      brand_new_cmd      mathlib    Mathlib/Tactic/New.lean:40  syntax
    in COMMAND_KEYWORDS, not found in these sources:
      abbrev add_decl_doc ...
    heads per source: batteries 15 tokens in 27 declarations (at 45f65c8b8292), ...

Each argument is NAME=PATH (or PATH, named by its folder): a work tree, or a git directory (bare, such as the
`fetch` tool's /work/.mirror/OWNER+NAME/repo), read at `--rev` (HEAD) with `git ls-tree` and `git cat-file`.
Every `.lean` file is read, except tests, demos, examples and the libraries `import Mathlib` does not bring
(Archive, Counterexamples, scripts; `--skip`, a regular expression on the path). A PATH ending in `.md` is a
`#help command` listing instead (what `import Mathlib` then `#help command` prints, as Markdown: a `## head` line and
`Defined in: …`; Seasawher/mathlib4-help keeps one, docs/commands.md): each head it names is read as found there.

What counts as declaring a command: `syntax … : command`, `macro … : command =>`, `elab … : command =>` (after
`@[…]`, modifiers, `(name := …)`, `(priority := …)`), whose head is the first string atom of the pattern (`"#help "`
inside `withPosition(…)`, `"alias "` after `mods:declModifiers`; `&"…"` is a non-reserved atom, marked `&`); and a
def marked `@[builtin_command_parser]` or `@[command_parser]`, whose head is the first string atom after
`leading_parser` past `declModifiers`, `docComment`, `optional(…)` and the like, a parser named there and defined in
the same file read through (so core's `declaration` gives `def`, `theorem`, `structure`, …, one level of `<|>`).
`macro_rules`/`elab_rules` declare nothing. A `local` declaration exists only in its own file: listed, never
missing. A head is covered when it is in COMMAND_KEYWORDS or the guard's reader takes it for a command keyword
(`leankit.commands.command_tokens`: every `#name`). Comments are blanked first; strings are kept.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from leankit.commands import COMMAND_KEYWORDS, command_tokens

SKIP = (r"(^|/)(tests?|[A-Za-z]*Test|Demos?|examples?|Examples?|doc|benchmarks?|stage0|Archive|Counterexamples"
        r"|scripts)(/|$)")
MODIFIER_WORDS = {"private", "protected", "noncomputable", "unsafe", "partial", "nonrec", "local", "scoped",
                  "public", "meta"}
# Parsers that stand before a command's keyword and hold no atom that leads it (skipped when reading a head).
PREFIX_PARSERS = {"declModifiers", "docComment", "Command.docComment", "Parser.Command.docComment", "attrKind",
                  "Term.attrKind", "Parser.Term.attrKind", "optional", "many", "ppIndent", "ppGroup", "ppDedent",
                  "withPosition", "group", "atomic", "leading_parser", "ppSpace", "ppLine", "checkColGt", "colGt",
                  "false", "true", "ppAllowUngrouped", "ppRealGroup", "ppRealFill", "withAntiquot", "leadPrec",
                  "maxPrec", "declModifiersF", "declModifiersT", "nodeWithAntiquot", "withCache", "incQuotDepth",
                  "Command.declModifiers", "Parser.Command.declModifiers", "Lean.Parser.Command.declModifiers",
                  "mods", "attrs", "tk", "doc", "visibility", "Term.attributes", "attributes", "optional'", "symbol",
                  "nonReservedSymbol", "unicodeSymbol", "ppDedentIfGrouped", "ppHardSpace"}
_TOKEN = re.compile(r'(&?"(?:[^"\\]|\\.)*")|([A-Za-z_«][\w.'  r"'!?»]*)|(<\|>|>>|[()\[\]:]|:=)|\S", re.S)
_STARTS = re.compile(r"\s+(@\[[^\]]*\]\s*)?((local|scoped|private|public|meta)\s+)*(syntax|macro|elab)\s"
                     r"|\s*@\[[^\]]*\]\s*$|\s+@\[[^\]]*command_parser")


@dataclass
class Head:
    """One command head: its token, where it is declared and how."""

    token: str
    source: str
    path: str
    line: int
    how: str  # syntax, macro, elab, command_parser, builtin_command_parser; `local `/`scoped ` before it
    reserved: bool = True  # False for `&"tok"`: a non-reserved atom


def blank_comments(text: str) -> str:
    """`text` with its comments blanked (newlines kept, so line numbers stay), its strings and chars kept."""
    out: list[str] = []
    index, depth = 0, 0
    while index < len(text):
        two = text[index : index + 2]
        if depth:
            depth += 1 if two == "/-" else -1 if two == "-/" else 0
            step = 2 if two in ("/-", "-/") else 1
            out.append("".join(c if c == "\n" else " " for c in text[index : index + step]))
            index += step
        elif two == "/-":
            depth, index = 1, index + 2
            out.append("  ")
        elif two == "--":
            end = text.find("\n", index)
            end = len(text) if end < 0 else end
            out.append(" " * (end - index))
            index = end
        else:
            step = _literal_length(text, index)
            out.append(text[index : index + step])
            index += step
    return "".join(out)


def _literal_length(text: str, index: int) -> int:
    """The length of the string or char literal at text[index], or 1."""
    if text[index] == '"':
        found = re.compile(r'"(?:[^"\\]|\\.)*"', re.S).match(text, index)
        return len(found.group()) if found else 1
    if text[index] == "'" and (index == 0 or not re.match(r"[\w'!?.]", text[index - 1])):
        found = re.compile(r"'(?:[^'\\\n]|\\.[^']*)'").match(text, index)
        return len(found.group()) if found else 1
    return 1


def chunks(text: str) -> Iterator[tuple[int, str]]:
    """The declarations of `text` (comments blanked): each starts on a line that starts at column 0, or with a
    declaration keyword at any column (`_STARTS`), and runs to the next such line; a line holding only `@[…]` joins
    the next. Yields (first line number, text)."""
    lines = text.split("\n")
    start, held = 0, False
    for number, line in enumerate(lines):
        begins = bool(line[:1].strip()) or bool(_STARTS.match(line))
        if number and begins and not held:
            yield start + 1, "\n".join(lines[start:number])
            start = number
        if begins:
            held = bool(re.fullmatch(r"\s*@\[[^\]]*\]\s*", line))
    yield start + 1, "\n".join(lines[start:])


def _lex(text: str) -> list[str]:
    return [found.group() for found in _TOKEN.finditer(text)]


def _strip_prefix(words: list[str]) -> tuple[list[str], str]:
    """The tokens after `@[…]` and modifiers, and the attribute text."""
    attributes, index = "", 0
    while index < len(words):
        if words[index] == "@" and index + 1 < len(words) and words[index + 1] == "[":
            end = _close(words, index + 1)
            attributes += " ".join(words[index:end])
            index = end
        elif words[index] in MODIFIER_WORDS:
            index += 1
        elif words[index] in ("open", "set_option") and "in" in words[index:]:  # `open Foo in`, before it
            index = words.index("in", index) + 1
        else:
            break
    return words[index:], attributes


def _close(words: list[str], at: int) -> int:
    """The index past the bracket group opening at words[at]."""
    depth = 0
    for index in range(at, len(words)):
        depth += 1 if words[index] in ("(", "[") else -1 if words[index] in (")", "]") else 0
        if depth == 0:
            return index + 1
    return len(words)


def _category(words: list[str], keyword: str) -> tuple[str, int]:
    """The syntax category a `syntax`/`macro`/`elab` declares (the word after its depth-0 `:`) and where that `:`
    stands: the last such colon for `syntax`, the one before `=>` otherwise."""
    depth, found = 0, ("", -1)
    for index, word in enumerate(words):
        depth += 1 if word in ("(", "[") else -1 if word in (")", "]") else 0
        if depth:
            continue
        if word == "=" and keyword != "syntax" and index + 1 < len(words) and words[index + 1] == ">":
            return found
        if word == ":" and index + 1 < len(words) and re.fullmatch(r"[\w.]+", words[index + 1]) and index > 0:
            found = (words[index + 1], index)
    return found


def _first_atom(words: list[str]) -> tuple[str, bool] | None:
    """The first string atom of a syntax pattern: (token, reserved)."""
    for word in words:
        if word.startswith(('"', '&"')):
            return word.lstrip("&")[1:-1].strip(), not word.startswith("&")
    return None


def syntax_head(words: list[str], keyword: str) -> tuple[str, bool] | None:
    """The head of a `syntax`/`macro`/`elab` declaration (tokens after the keyword) when it declares a command."""
    category, at = _category(words, keyword)
    if category not in ("command", "Lean.Parser.Category.command") or at < 0:
        return None
    index = 0
    while index < at and words[index] in ("(", ":"):
        index = _close(words, index) if words[index] == "(" else index + 2  # (name := …), :prec
    return _first_atom(words[index:at])


def parser_bodies(text: str) -> dict[str, str]:
    """Each `def NAME … := BODY` of the file (comments blanked), by name, with its last component too."""
    bodies: dict[str, str] = {}
    for _, chunk in chunks(text):
        words, _ = _strip_prefix(_lex(chunk))
        if len(words) > 2 and words[0] in ("def", "abbrev") and ":=" in chunk:
            body = chunk.split(":=", 1)[1]
            bodies[words[1]] = body
            bodies.setdefault(words[1].split(".")[-1], body)
    return bodies


def parser_atoms(body: str, bodies: dict[str, str], depth: int = 0) -> list[str]:
    """The atoms that can lead the parser `body`: its first string atom past the prefix parsers, or those of the
    parsers it names first (one `<|>` group, read through definitions in `bodies`, three levels deep)."""
    words = _lex(body)
    index = 0
    while index < len(words):
        word = words[index]
        if word.startswith('"'):  # and the strings that `<|>` puts beside it (core's `initializeKeyword`)
            found = [word]
            while index + 2 < len(words) and words[index + 1] == "<|>" and words[index + 2].startswith('"'):
                found.append(words[index + 2])
                index += 2
            return [atom[1:-1].strip() for atom in found]
        if word in ("optional", "many", "optional'") and index + 1 < len(words) and words[index + 1] == "(":
            index = _close(words, index + 1)
            continue
        if word == "(" and "<|>" in words[index : _close(words, index)] and depth < 3:
            group = words[index + 1 : _close(words, index) - 1]
            return [atom for name in group if name in bodies for atom in parser_atoms(bodies[name], bodies, depth + 1)]
        if word in bodies and word not in PREFIX_PARSERS and depth < 3:
            atoms = parser_atoms(bodies[word], bodies, depth + 1)
            if atoms:  # else a prefix of optional parts (core's `sectionHeader`): read on
                return atoms
        index += 1 if word in PREFIX_PARSERS or word in bodies or not re.match(r"[\w«]", word) else len(words)
    return []


def heads_of_file(text: str, source: str, path: str) -> Iterator[Head]:
    """The command heads declared in one file."""
    clean = blank_comments(text)
    bodies: dict[str, str] | None = None
    for line, chunk in chunks(clean):
        words = _lex(chunk)
        rest, attributes = _strip_prefix(words)
        scope = next((w + " " for w in words[: len(words) - len(rest)] if w in ("local", "scoped")), "")
        if rest and rest[0] in ("syntax", "macro", "elab"):
            found = syntax_head(rest[1:], rest[0])
            if found is not None:
                yield Head(found[0], source, path, line, scope + rest[0], found[1])
        elif "command_parser" in attributes and rest[:1] in (["def"], ["abbrev"]) and ":=" in chunk:
            bodies = parser_bodies(clean) if bodies is None else bodies
            how = "builtin_command_parser" if "builtin_command_parser" in attributes else "command_parser"
            for token in dict.fromkeys(parser_atoms(chunk.split(":=", 1)[1], bodies)):
                yield Head(token, source, path, line, scope + how)


def lean_files(root: Path, rev: str, skip: re.Pattern[str]) -> Iterator[tuple[str, str]]:
    """(path, text) of each `.lean` file under `root`: a work tree, or a git directory read at `rev`."""
    if (root / "HEAD").is_file() and (root / "objects").is_dir():
        listed = subprocess.run(["git", "-C", str(root), "ls-tree", "-r", "--name-only", "-z", rev],
                                capture_output=True, check=True).stdout.decode().split("\0")
        for path in sorted(p for p in listed if p.endswith(".lean") and not skip.search(p)):
            blob = subprocess.run(["git", "-C", str(root), "cat-file", "blob", f"{rev}:{path}"],
                                  capture_output=True, check=True).stdout
            yield path, blob.decode("utf-8", "replace")
        return
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "build")
        for name in sorted(files):
            path = os.path.relpath(os.path.join(folder, name), root)
            if name.endswith(".lean") and not skip.search(path):
                yield path, Path(folder, name).read_text("utf-8", "replace")


def listing_heads(text: str, source: str, path: str) -> Iterator[Head]:
    """The heads in a `#help command` listing written as Markdown (a `## head` line, then `Defined in: …`, as
    Seasawher/mathlib4-help's docs/commands.md has it): the environment's own command parsers. A head that is no
    word is skipped: the listing names a parser by a token it may start with, `/--` for `add_decl_doc` (a doc
    comment first) and `?` where none is fixed (`binder_predicate`), and the word after it is what the guard reads."""
    lines = text.split("\n")
    fenced = False  # inside a ``` block of a docstring, whose `## …` lines are no heads
    for number, line in enumerate(lines[:-1]):
        fenced ^= line.startswith("```")
        head = line[3:].replace("\\", "").split()[0] if line.startswith("## ") and line[3:].strip() else ""
        if not fenced and re.match(r"#?\w", head) and lines[number + 1].startswith("Defined in:"):
            yield Head(head, source, path, number + 1, "#help command")


def commit_of(root: Path, rev: str) -> str:
    """The commit `rev` names in the git directory or work tree `root`, or "" where it is none."""
    found = subprocess.run(["git", "-C", str(root), "rev-parse", rev], capture_output=True, text=True,
                           check=False)
    return found.stdout.strip() if found.returncode == 0 else ""


def covered(token: str) -> bool:
    """Whether the guard refuses text that holds `token` as a command keyword (its reader may take a prefix of it:
    `gen_injective_theorems%` is refused for `gen_injective_theorems`)."""
    return token in COMMAND_KEYWORDS or any(t.start == 0 for t in command_tokens(token))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sources", nargs="+", help="NAME=PATH or PATH: a work tree or a git directory")
    parser.add_argument("--rev", default="HEAD", help="the revision read in a git directory")
    parser.add_argument("--skip", default=SKIP, help="paths not read (a regular expression)")
    parser.add_argument("--all", action="store_true", help="print every head found")
    parser.add_argument("--json", help="write the heads and the comparison here")
    options = parser.parse_args(argv)
    skip = re.compile(options.skip)
    heads: list[Head] = []
    commits: dict[str, str] = {}
    for source in options.sources:
        name, _, path = source.rpartition("=") if "=" in source else (Path(source).name, "", source)
        commits[name] = commit_of(Path(path).parent if path.endswith(".md") else Path(path), options.rev)
        if path.endswith(".md"):
            heads.extend(listing_heads(Path(path).read_text("utf-8"), name, path))
            continue
        for file, text in lean_files(Path(path), options.rev, skip):
            heads.extend(heads_of_file(text, name, file))
    report(heads, commits, options.all)
    if options.json:
        missing = sorted({h.token for h in heads if not covered(h.token) and not h.how.startswith("local")})
        Path(options.json).write_text(json.dumps({"commits": commits, "missing": missing,
                                                  "heads": [asdict(h) for h in heads]}, indent=1))
    return 0


def report(heads: list[Head], commits: dict[str, str], every: bool) -> None:
    """Print the comparison (and with `every`, each head)."""
    if every:
        for head in heads:
            mark = "" if head.reserved else "&"
            print(f"{mark}{head.token!s:32} {head.source:10} {head.path}:{head.line}  {head.how}")
    print("missing from COMMAND_KEYWORDS (found in the sources):")
    for head in sorted(heads, key=lambda h: (h.token, h.source, h.path)):
        if not covered(head.token):
            local = "  (local: its file only)" if head.how.startswith("local") else ""
            mark = "" if head.reserved else "  (non-reserved &atom)"
            print(f"  {head.token:32} {head.source:10} {head.path}:{head.line}  {head.how}{local}{mark}")
    found = {head.token for head in heads}
    print("in COMMAND_KEYWORDS, not found in these sources:")
    print("  " + " ".join(sorted(COMMAND_KEYWORDS - found)))
    print("heads per source: " + ", ".join(
        f"{name} {len({h.token for h in heads if h.source == name})} tokens in "
        f"{sum(h.source == name for h in heads)} declarations (at {commit[:12] or '?'})"
        for name, commit in commits.items()))


if __name__ == "__main__":
    sys.exit(main())
