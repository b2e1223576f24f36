"""A strict stand-in for Lean's comparator (`lake comparator --config FILE`, or the standalone `comparator FILE`),
run as a process in the judge's Lake project (docs/lean.md, "Lean's comparator").

    python tests/doubles/comparator_double.py --config comparator.json [--paranoid] [--inadvisably-no-sandbox]
    python tests/doubles/comparator_double.py comparator.json

It reads the same config (`challenge_module`, `solution_module`, `theorem_names`, `definition_names`,
`permitted_axioms`, `json_output_path`, `enable_nanoda`, `external_kernels`; any other key is refused) and the
modules' files (`A.B` is `A/B.lean`), compiles both on minilean (in this process) and checks, in comparator's order:

- a module that does not compile (an error message) fails as a build: exit 1, `uncaught exception: Child exited
  with 1` on stderr, no report (as comparator stops before its report);
- every command of Solution that is not a target's declaration is one of Challenge's (its text, blanks
  normalised), and every one of Challenge's is in Solution: a local notation, an `axiom`, an `instance` or a helper
  added to Solution is refused for every target (`global_precheck`: stricter than comparator, which compares the
  constants the statements reach and allows helpers);
- each theorem is a `theorem` in both, its signature the same text up to blanks (`comparison`: comparator compares
  the elaborated types, so a statement written otherwise but elaborated the same is refused here, accepted there);
- each definition hole is a `def`/`abbrev` of the same name and type text in both (its value is not compared);
- the axioms `#print axioms` lists for each target in Solution are among `permitted_axioms` (`axioms`); `sorryAx`
  is never permitted.

It writes comparator's report shape (`outcomes` with `target`, `targetKind`, `accepted`, `failureCategory`,
`failureMessage`, `unpermittedAxioms`, `transitiveAxioms`; `kernelAccepted`) at `json_output_path`, exit 0 and
`Your solution is okay!` when every target holds, else exit 1 and `uncaught exception: MESSAGE` with comparator's
messages. `--log FILE` appends one JSON line per run (the argv and the config) for tests.

Where it is more lenient than comparator: no kernel replay (minilean's compile stands in for it; `kernelAccepted`
is minilean's verdict), no nanoda or other external kernel (`nanodaAccepted` absent; `--paranoid` adds none), no
sandbox (no landrun/bubblewrap: the files are read, never built; `--inadvisably-no-sandbox` changes nothing), no
`.olean` export (it judges minilean's fragment only: what minilean cannot elaborate fails as a build), and the
constants a statement reaches are compared as the commands' text, not as elaborated declarations.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from leankit.commands import commands
from minilean.server import Server

KEYS = {"challenge_module", "solution_module", "theorem_names", "definition_names", "permitted_axioms",
        "json_output_path", "enable_nanoda", "external_kernels"}
REQUIRED = {"challenge_module", "solution_module", "theorem_names", "permitted_axioms"}
_DECL = re.compile(r"(?:/--.*?-/\s*)?(?:@\[[^\]]*\]\s*)?(?:(?:private|protected|noncomputable)\s+)*"
                   r"(theorem|lemma|def|abbrev|axiom)\s+([^\s:({\[]+)", re.DOTALL)
_AXIOMS = re.compile(r"'(?P<name>[^']+)' (?:depends on axioms: \[(?P<axioms>[^\]]*)\]|does not depend on any axioms)")


class Refused(Exception):
    """comparator's `main` threw: exit 1 with this message."""


@dataclass
class Module:
    """A module's commands (text, blanks normalised) and its declarations: name → (keyword, signature)."""

    others: list[str] = field(default_factory=list)
    declarations: dict[str, tuple[str, str]] = field(default_factory=dict)
    axioms: dict[str, list[str]] = field(default_factory=dict)


def _blanks(text: str) -> str:
    return " ".join(text.split())


def _signature(text: str) -> str:
    """The declaration's text before its top-level `:=` (or the whole, for an axiom), from its keyword on (its doc
    comment and attributes are compared as text elsewhere: not here), blanks normalised."""
    found = _DECL.match(text.lstrip())
    head = text.lstrip()[found.start(1):] if found else text
    return _blanks(head.split(":=", 1)[0])


def compile_module(path: Path, targets: list[str]) -> Module:
    """`path` compiled on minilean with `#print axioms` of each target declared in it; Refused as a failed build."""
    if not path.is_file():
        raise Refused(f"no such file: {path}")
    text = path.read_text(encoding="utf-8")
    module = Module()
    for command in commands(text):
        piece = text[command.start:command.end]
        found = _DECL.match(piece.lstrip())
        if found is not None:
            module.declarations[found.group(2)] = (found.group(1), _signature(piece))
        if found is None or found.group(2) not in targets:
            module.others.append(_blanks(piece))
    asked = [name for name in targets if name in module.declarations]
    printed = text.rstrip("\n") + "\n\n" + "".join(f"#print axioms {name}\n\n" for name in asked)
    reply = Server().frontend_process({"file": printed, "readHeader": False, "inheritEnv": False})
    messages = [m for unit in reply.get("units", []) for m in unit.get("messages", [])]
    if "error" in reply or any(m.get("severity") == "error" for m in messages):
        print(f"error: {path}: {reply.get('desc') or [m['data'] for m in messages if m['severity'] == 'error']}",
              file=sys.stderr)
        raise Refused("Child exited with 1")
    for message in messages:
        said = _AXIOMS.fullmatch(str(message.get("data", "")).strip())
        if said is not None:
            listed = said.group("axioms")
            module.axioms[said.group("name")] = [a.strip() for a in (listed or "").split(",") if a.strip()]
    return module


def outcome(target: str, kind: str, solution: Module, permitted: list[str], category: str | None,
            message: str | None) -> dict[str, object]:
    transitive = solution.axioms.get(target, [])
    return {"target": target, "targetKind": kind, "accepted": category is None, "failureCategory": category,
            "failureMessage": message, "unpermittedAxioms": [a for a in transitive if a not in permitted],
            "transitiveAxioms": transitive}


def precheck(challenge: Module, solution: Module) -> str | None:
    """Stricter than comparator: Solution's other commands are exactly Challenge's."""
    for command in solution.others:
        if command not in challenge.others:
            return f"Solution command not in the challenge: '{command[:120]}'"
    for command in challenge.others:
        if command not in solution.others:
            return f"Challenge command missing from the solution: '{command[:120]}'"
    return None


def compare(name: str, kind: str, challenge: Module, solution: Module) -> str | None:
    keywords = ("theorem", "lemma") if kind == "theorem" else ("def", "abbrev")
    if name not in challenge.declarations:
        return f"Const not found in challenge: '{name}'"
    if name not in solution.declarations:
        return f"Const not found in solution: '{name}'"
    (asked, asked_sig), (given, given_sig) = challenge.declarations[name], solution.declarations[name]
    if given not in keywords or asked not in keywords:
        return (f"Challenge and solution constant kind don't match: '{name}'" if kind == "theorem"
                else f"Solution constant is not a definition: '{name}'")
    if asked_sig.split(None, 1)[1:] != given_sig.split(None, 1)[1:]:
        return (f"Challenge and solution theorem statement do not match: '{name}'" if kind == "theorem"
                else f"Const does not match between challenge and target '{name}'")
    return None


def verify(config: dict[str, object]) -> dict[str, object]:
    theorems = [str(n) for n in config["theorem_names"]]  # type: ignore[attr-defined]
    holes = [str(n) for n in config.get("definition_names") or []]  # type: ignore[attr-defined]
    permitted = [str(a) for a in config["permitted_axioms"] if a != "sorryAx"]  # type: ignore[attr-defined]
    targets = theorems + holes
    challenge = compile_module(_module_path(str(config["challenge_module"])), targets)
    solution = compile_module(_module_path(str(config["solution_module"])), targets)
    kinds = [(name, "theorem") for name in theorems] + [(name, "definition") for name in holes]
    problem = precheck(challenge, solution)
    if problem is not None:
        return {"outcomes": [outcome(n, k, solution, permitted, "global_precheck", problem) for n, k in kinds]}
    outcomes = []
    for name, kind in kinds:
        message = compare(name, kind, challenge, solution)
        category = "comparison" if message else None
        illegal = [a for a in solution.axioms.get(name, []) if a not in permitted]
        if message is None and illegal:
            category, message = "axioms", f"Illegal axiom detected: '{illegal[0]}'"
        outcomes.append(outcome(name, kind, solution, permitted, category, message))
    accepted = all(o["accepted"] for o in outcomes)
    return {"outcomes": outcomes, **({"kernelAccepted": True} if accepted else {})}


def _module_path(module: str) -> Path:
    return Path(*module.split(".")).with_suffix(".lean")


def read_config(path: str) -> dict[str, object]:
    config = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(config, dict):
        raise Refused("config is not a JSON object")
    unknown, missing = sorted(set(config) - KEYS), sorted(REQUIRED - set(config))
    if unknown or missing:
        raise Refused(f"config: unknown keys {unknown}, missing keys {missing}")
    if config.get("enable_nanoda") and config.get("external_kernels"):
        raise Refused("Cannot use enable_nanoda and an external kernel list at the same time, register nanoda in "
                      "the list instead.")
    return config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="comparator_double")
    parser.add_argument("config_path", nargs="?")
    parser.add_argument("--config", dest="config_flag")
    parser.add_argument("--paranoid", action="store_true")
    parser.add_argument("--inadvisably-no-sandbox", action="store_true")
    parser.add_argument("--log")
    args = parser.parse_args(argv)
    path = args.config_flag or args.config_path
    if path is None:
        print("uncaught exception: Expected config file path as first argument.", file=sys.stderr)
        return 1
    try:
        config = read_config(path)
        if args.log:
            with open(args.log, "a", encoding="utf-8") as log:
                log.write(json.dumps({"argv": sys.argv[1:], "config": config}) + "\n")
        report = verify(config)
    except Refused as exc:
        print(f"uncaught exception: {exc}", file=sys.stderr)
        return 1
    if config.get("json_output_path"):
        Path(str(config["json_output_path"])).write_text(json.dumps(report), encoding="utf-8")
    failed = [o for o in report["outcomes"] if not o["accepted"]]  # type: ignore[attr-defined]
    if failed:
        lines = "".join(f"- {o['target']}: {o['failureMessage']}\n" for o in failed)
        print(f"uncaught exception: {failed[0]['failureMessage']}\n{lines}", file=sys.stderr)
        return 1
    print("Running Lean default kernel on solution.")  # the real transcript's kernel lines (Main.lean)
    print("Lean default kernel accepts the solution")
    print("Your solution is okay!")
    return 0


if __name__ == "__main__":
    sys.exit(main())
