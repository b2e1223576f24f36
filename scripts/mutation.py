"""Mutation testing of what decides whether a proof counts: the soundness rules, the tactic guard and the engines'
verify paths; and of what repair shows of Lean's messages (search/repair.py). Each mutant is one small change to
the source; the tests that guard that code run against it, and a mutant they do not fail "survives" (a hole in the
tests, unless the change is equivalent).

    python scripts/mutation.py                      # every target; a table of survivors, JSON in mutation.json
    python scripts/mutation.py --list               # the mutants, not run
    python scripts/mutation.py --only guard --timeout 60 --report /tmp/m.json
    python scripts/mutation.py --only config/lean   # the deny list's rules, each deleted in turn

Targets (file, the functions mutated) and their tests are in TARGETS below. Operators, applied one at a time with
Python's `ast` (the mutated module is written back with `ast.unparse`, in place, and restored afterwards):
- comparisons: == ↔ !=, < ↔ <=, > ↔ >=, in ↔ not in, is ↔ is not;
- boolean operators: and ↔ or; `not x` → `not not x`; an `if` test negated;
- constants: True ↔ False, an integer n → n + 1;
- a statement (return, raise, assignment, call, if, for, break, continue) replaced by `pass`;
- one rule deleted from the guard's deny list, `DEFAULT_DENY` (in burnqed/config/lean.py: the setting's default).
Each mutant runs its target's tests with `pytest -x` (stopping at the first failure), cheapest first (`tiers`):
the first test file's fast tests, the other files' fast tests, then the slow ones, each only if all before
passed, in a fresh interpreter with bytecode caching off, so the mutated source is what runs, in subprocesses
(the Lean double) too; with `--fork` (the faster way) in a fork of one prepared interpreter instead. It edits
tracked files while it runs, so it refuses a dirty tree: run it in a clone to keep working meanwhile
(`git clone . /tmp/m && cd /tmp/m && PYTHONPATH=$PWD python scripts/mutation.py --fork`); two clones with
`--only soundness` and `--only search/` run in parallel.
"""

from __future__ import annotations

import argparse
import ast
import copy
import inspect
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# file -> (functions to mutate, or None for every function of the module; "DEFAULT_DENY" names the deny list), tests.
# The first test file is the fast one most mutants die in; the others run only for mutants it misses.
GUARD_TESTS = [
    "tests/lean/test_guard_soundness.py",
    "tests/lean/test_kernel_net.py::test_the_replay_server_emulates_the_route_and_the_recheck",
]
SOUNDNESS_TESTS = [
    "tests/lean/test_guard_soundness.py",
    "tests/search/test_verify_after_loss.py",
    "tests/search/test_unverified.py",
    "tests/lean/test_strict_soundness.py",
    "tests/lean/test_kernel_net.py",
    "tests/search/test_repair.py",  # soundness.body_line: where a compile's messages fall in a repair prompt
    "tests/search/test_answers.py",  # soundness.check_answer: an answer's own rule
    "tests/lean/test_shape_pin.py",  # the compiled file's pinned shape, with hand-written offsets
    "tests/lean/test_adversarial.py",  # smuggled commands in every place, run to the verdict
    "tests/lean/test_file_lemmas.py",  # a file's lemmas: read before Lean, pinned, read back from a stored file
]
ANSWER_TESTS = [
    "tests/search/test_answers.py",
    "tests/search/test_answer_prompts.py",
    "tests/search/test_hybrid_answers.py",
    "tests/leankit/test_answer_slots.py",  # an answer is one term; a restated file read by its own slot
]
# the verdicts; the rows and prompt check; smuggled commands in RL completions
REWARD_TESTS = ["tests/rl/test_reward.py", "tests/rl/test_repair_rows.py", "tests/lean/test_adversarial.py"]
ANSWER_CHECK_TESTS = ["tests/search/test_answer_check.py", "tests/eval/test_answers.py", "tests/rl/test_reward.py"]
COMMANDS_TESTS = ["tests/leankit/test_lean_commands.py", "tests/lean/test_guard_soundness.py",
                  "tests/lean/test_shape_pin.py", "tests/leankit/test_answer_slots.py",
                  "tests/lean/test_adversarial.py"]
VERIFY_TESTS = [
    "tests/search/test_verify_after_loss.py",
    "tests/search/test_unverified.py",
    "tests/lean/test_strict_soundness.py",
    "tests/lean/test_kernel_net.py",
    "tests/search/test_whole.py",
    "tests/search/test_step.py",
    "tests/search/test_hybrid.py",
    "tests/search/test_repair.py",  # the repair rounds: a revision is checked like any proof
    "tests/search/test_sketch_search.py",  # step and hybrid from a sketch's subgoal (`search.root.Root`)
]
REPAIR_TESTS = [
    "tests/search/test_repair_messages.py",  # each rule with exact values: most mutants die here
    "tests/search/test_repair.py",
    "tests/cluster/test_repair_context.py",  # the longest repair prompt, checked before work
    "tests/sft/test_prompt_identity.py",  # a repair example is the repair prompt the search sent
]
TARGETS: dict[str, tuple[tuple[str, ...] | None, list[str]]] = {
    "burnqed/lean/guard.py": (None, GUARD_TESTS),
    "burnqed/config/lean.py": (("DEFAULT_DENY",), GUARD_TESTS),
    "burnqed/lean/soundness.py": (None, SOUNDNESS_TESTS),
    "burnqed/lean/stored_proof.py": (None, SOUNDNESS_TESTS),
    "burnqed/lean/declared_lemmas.py": (None, SOUNDNESS_TESTS),
    "burnqed/search/step.py": (("StepSearch._verify",), VERIFY_TESTS),
    "burnqed/search/hybrid.py": (("HybridSearch._verify", "HybridSearch._started_by", "HybridSearch._mark_dead"),
                                 [*VERIFY_TESTS, "tests/search/test_hybrid_answers.py",
                                  "tests/search/test_shared_workers.py"]),
    # a node's state after a worker replacement: rebuilt by replaying its path, or dead (never counted from)
    "burnqed/search/rebuild.py": (None, ["tests/search/test_rebuild.py", "tests/search/test_shared_workers.py",
                                         *VERIFY_TESTS]),
    "burnqed/search/whole.py": (("WholeSearch._check", "read_whole", "check_whole"), VERIFY_TESTS),
    "burnqed/search/answer.py": (None, ANSWER_TESTS),
    "burnqed/rl/reward.py": (None, REWARD_TESTS),
    "burnqed/search/answer_check.py": (None, ANSWER_CHECK_TESTS),
    "leankit/commands.py": (None, COMMANDS_TESTS),
    "leankit/text.py": (  # the reader the guard's rules stand on: where Lean starts a token, what it breaks off in
        ("_block_end", "glues_to_name", "_Names.name_start", "_Names.token_start", "_Names.glued_name", "regions",
         "read_two_ways", "literal_problem", "_broken_quote", "_resumes_in_a_name", "_escape_problem", "read_as_lean"),
        ["tests/leankit/test_lean_text.py", "tests/leankit/test_linear_scans.py", *COMMANDS_TESTS],
    ),
    "burnqed/lean/client.py": (("LeanWorker._roundtrip", "LeanWorker._fence"), ["tests/lean/test_client.py"]),
    "burnqed/search/skeleton.py": (
        ("run_search", "verify_closing", "Proofs.found", "Proofs.ending", "Proofs.limit", "Proofs.count",
         "Proofs.accept", "refused_ending", "final_result", "EngineCore.of", "Spent.of"),
        ["tests/search/test_skeleton.py", *VERIFY_TESTS],
    ),
    "burnqed/search/repair.py": (None, REPAIR_TESTS),
    "burnqed/search/root.py": (("accept_subgoal", "own_goals"), ["tests/search/test_sketch_search.py"]),
    "burnqed/search/sketching.py": (("SketchSearch._count",), [
        "tests/search/test_sketch_search.py", "tests/search/test_sketch_file_lemmas.py",
        "tests/search/test_sketch_graph.py", "tests/search/test_lemma_poison.py"]),
    # what the judge (comparator) decides: its verdict read, a refused proof un-counting its theorem, never training
    "burnqed/lean/comparator.py": (("ComparatorReport.kernels", "transcript_kernels", "read_verdicts", "_uncaught"),
                                   ["tests/lean/test_comparator_verdicts.py", "tests/lean/test_comparator.py",
                                    "tests/eval/test_judge.py"]),
    "burnqed/search/judge.py": (("without_holes", "check_definition_holes", "judge_case", "judge_passes", "_refused",
                                 "_record"), ["tests/eval/test_judge_holes.py", "tests/eval/test_judge_passes.py",
                                              "tests/eval/test_judge.py", "tests/eval/test_judge_step.py"]),
    "burnqed/eval/judge_step.py": (("pending", "counted_proof", "uncounted", "_refused_row", "_at", "_task_at",
                                    "_less"), ["tests/eval/test_judge_uncounts.py", "tests/eval/test_judge_step.py",
                                               "tests/cluster/test_judge_step.py"]),
    "burnqed/stages/judge_merge.py": (("ShardVerdicts.refused_in", "relabel"),
                                      ["tests/trajectory/test_judge_relabel.py", "tests/trajectory/test_judge_merge.py",
                                       "tests/cluster/test_judge_step.py"]),
    "burnqed/trajectory/labels.py": (("unproved_label",),
                                     ["tests/trajectory/test_labels.py", "tests/trajectory/test_judge_merge.py"]),
    # the lemma library's refusals before Lean, the closed keys it and the lemma graph match by, the graph's cycles
    "burnqed/search/lemmas.py": (("statement_refusal", "refusal", "LibrarySource.lemma_candidates",
                                  "LibrarySource._candidate", "training_held"),
                                 ["tests/search/test_lemma_refusals.py", "tests/search/test_lemma_poison.py",
                                  "tests/search/test_lemma_library.py"]),
    "burnqed/search/goal_keys.py": (("rename", "closed_key_of", "closed_key", "translate", "_restore"),
                                    ["tests/search/test_lemma_refusals.py", "tests/search/test_lemma_poison.py",
                                     "tests/search/test_sketch_graph.py",
                                     "tests/search/test_lemma_library.py"]),
    "burnqed/search/lemma_graph.py": (("GoalGraph.alike", "GoalGraph.restated", "GoalGraph.restates",
                                       "GoalGraph._repeat"), ["tests/search/test_lemma_refusals.py",
                                                              "tests/search/test_sketch_graph.py"]),
    "burnqed/search/recursion.py": (("lemma_of",), ["tests/search/test_lemma_refusals.py",
                                                    "tests/search/test_sketch_graph.py"]),
}
# The kernel-net table at two versions (with and without sorry flags) keeps a mutant's run short; the full table
# runs in the suite.
# In this process (-n 0: no xdist workers, which the suite's addopts start): one mutant's few tests, stopping early.
PYTEST_ARGS = ["-n", "0", "-x", "-q", "-p", "no:cacheprovider", "-k", "not (0.3.0 or 0.3.1 or 0.3.2 or 0.3.3)"]


def tiers(tests: list[str]) -> list[list[str]]:
    """pytest argument lists, cheapest first: the first file's fast tests, the other files' fast tests (where there
    are others: an argument list naming no file would run the whole suite), then every slow test."""
    others = [["-m", "not slow", *tests[1:]]] if tests[1:] else []
    return [["-m", "not slow", tests[0]], *others, ["-m", "slow", *tests]]


_SWAP: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
    ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}
_STATEMENTS = (ast.Return, ast.Raise, ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr, ast.If, ast.For,
               ast.Break, ast.Continue)


@dataclass(frozen=True)
class Mutant:
    file: str
    index: int  # the n-th mutation point of the file, in walk order
    where: str  # function (or DEFAULT_DENY)
    line: int
    change: str


@dataclass
class Outcome:
    mutant: Mutant
    killed: bool
    seconds: float
    detail: str


def _is_inert(node: ast.stmt) -> bool:
    """A docstring, or the `...` body of a Protocol's member: no code to mutate."""
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and (
        isinstance(node.value.value, str) or node.value.value is Ellipsis)


def _scopes(tree: ast.Module, wanted: tuple[str, ...] | None) -> Iterator[tuple[str, ast.AST]]:
    """The function nodes to mutate (qualified names), and DEFAULT_DENY's tuple when it is wanted."""
    for node in tree.body:
        if wanted is not None and "DEFAULT_DENY" in wanted and isinstance(node, ast.AnnAssign | ast.Assign):
            target = node.target if isinstance(node, ast.AnnAssign) else node.targets[0]
            if isinstance(target, ast.Name) and target.id == "DEFAULT_DENY" and node.value is not None:
                yield "DEFAULT_DENY", node.value
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and (wanted is None or node.name in wanted):
            yield node.name, node
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    name = f"{node.name}.{item.name}"
                    if wanted is None or name in wanted:
                        yield name, item


How = tuple[str, object]  # (operator, where in the node)


def _points(scope: ast.AST, where: str) -> Iterator[tuple[ast.AST, str, How]]:
    """(node, description, how) for every mutation point under `scope`, in a fixed order."""
    if where == "DEFAULT_DENY":
        assert isinstance(scope, ast.Tuple)
        for position, element in enumerate(scope.elts):
            shown = element.value if isinstance(element, ast.Constant) else ast.unparse(element)
            yield scope, f"delete deny rule {shown!r}", ("delete", position)
        return
    for node in ast.walk(scope):
        yield from _expression_points(node)
        yield from _statement_points(node)


def _expression_points(node: ast.AST) -> Iterator[tuple[ast.AST, str, How]]:
    """The operator and constant mutations of one node."""
    if isinstance(node, ast.Compare):
        for position, op in enumerate(node.ops):
            swapped = _SWAP.get(type(op))
            if swapped is not None:
                yield node, f"{type(op).__name__} -> {swapped.__name__}", ("cmp", position)
    elif isinstance(node, ast.BoolOp):
        other = "Or" if isinstance(node.op, ast.And) else "And"
        yield node, f"{type(node.op).__name__} -> {other}", ("boolop", None)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield node, "not x -> x", ("unnot", None)
    elif isinstance(node, ast.Constant) and isinstance(node.value, bool):
        yield node, f"{node.value} -> {not node.value}", ("bool", None)
    elif isinstance(node, ast.Constant) and type(node.value) is int:
        yield node, f"{node.value} -> {node.value + 1}", ("int", None)


def _statement_points(node: ast.AST) -> Iterator[tuple[ast.AST, str, How]]:
    """An `if`'s negated test, then the deletion of each statement in the node's bodies."""
    if isinstance(node, ast.If):
        yield node, "if test negated", ("negate", None)
    for field in ("body", "orelse", "finalbody"):
        statements = getattr(node, field, None)
        if not isinstance(statements, list):
            continue
        for position, statement in enumerate(statements):
            if isinstance(statement, _STATEMENTS) and not _is_inert(statement):
                first = ast.unparse(statement).splitlines()[0][:60]
                yield node, f"delete `{first}`", ("delete-stmt", (field, position))


def mutants(file: str) -> list[Mutant]:
    wanted, _ = TARGETS[file]
    tree = ast.parse((ROOT / file).read_text(encoding="utf-8"))
    found: list[Mutant] = []
    for where, scope in _scopes(tree, wanted):
        for node, change, _how in _points(scope, where):
            found.append(Mutant(file, len(found), where, getattr(node, "lineno", 0), change))
    return found


def mutated_source(mutant: Mutant) -> str:
    wanted, _ = TARGETS[mutant.file]
    tree = ast.parse((ROOT / mutant.file).read_text(encoding="utf-8"))
    index = 0
    for where, scope in _scopes(tree, wanted):
        for node, _change, how in _points(scope, where):
            if index == mutant.index:
                _apply(node, how)
                return ast.unparse(ast.fix_missing_locations(tree)) + "\n"
            index += 1
    raise IndexError(f"{mutant.file} has no mutation point {mutant.index}")


def _apply(node: ast.AST, how: How) -> None:
    kind, arg = how
    if kind == "delete":
        assert isinstance(node, ast.Tuple) and isinstance(arg, int)
        del node.elts[arg]
    elif kind == "cmp":
        assert isinstance(node, ast.Compare) and isinstance(arg, int)
        node.ops[arg] = _SWAP[type(node.ops[arg])]()
    elif kind == "boolop":
        assert isinstance(node, ast.BoolOp)
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif kind == "unnot":
        # `not x` -> `not not x`: the truth value of x itself.
        assert isinstance(node, ast.UnaryOp)
        node.operand = ast.UnaryOp(ast.Not(), node.operand)
    elif kind == "bool":
        assert isinstance(node, ast.Constant)
        node.value = not node.value
    elif kind == "int":
        assert isinstance(node, ast.Constant) and type(node.value) is int
        node.value = int(node.value) + 1
    elif kind == "negate":
        assert isinstance(node, ast.If)
        node.test = ast.UnaryOp(ast.Not(), copy.deepcopy(node.test))
    elif kind == "delete-stmt":
        assert isinstance(arg, tuple)
        field, position = arg
        getattr(node, field)[position] = ast.Pass()
    else:
        raise ValueError(kind)


def run_one(mutant: Mutant, timeout_s: float) -> Outcome:
    path = ROOT / mutant.file
    original = path.read_text(encoding="utf-8")
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(ROOT)}
    _, tests = TARGETS[mutant.file]
    started = time.perf_counter()
    try:
        path.write_text(mutated_source(mutant), encoding="utf-8")
        for cached in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
            cached.unlink()
        killed, detail = False, ""
        for tier in tiers(tests):  # the fast tests first: most mutants die there
            try:
                done = subprocess.run([sys.executable, "-m", "pytest", *PYTEST_ARGS, *tier], cwd=ROOT,
                                      env=env, capture_output=True, text=True, timeout=timeout_s, check=False)
            except subprocess.TimeoutExpired:
                killed, detail = True, f"timed out after {timeout_s:g}s"
                break
            # 0: all passed; 5: the tier selected no test. Anything else is a failure (1) or a broken run (2-4).
            if done.returncode not in (0, 5):
                tail = [line for line in done.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
                killed = True
                detail = tail[0] if tail else (done.stdout.strip().splitlines() or [f"exit {done.returncode}"])[-1]
                break
    finally:
        path.write_text(original, encoding="utf-8")
    return Outcome(mutant, killed, round(time.perf_counter() - started, 1), detail)


def run_forked(mutant: Mutant, timeout_s: float) -> Outcome:
    """Run the mutant in a fork of this process, whose imports are done already: the mutated module's functions
    get the mutated code (`__code__` swapped in place, so every name bound to them sees it), then pytest runs in
    the child. Much faster than a fresh interpreter per mutant. Subprocesses the tests start (the Lean double)
    import the unmutated source: they are the peers, not the code under test. Module-level data (DEFAULT_DENY)
    cannot be swapped this way: those mutants go through `run_one`."""
    import importlib

    module = importlib.import_module(mutant.file.removesuffix(".py").replace("/", "."))
    fresh: dict[str, object] = {"__name__": module.__name__, "__file__": str(ROOT / mutant.file)}
    _, tests = TARGETS[mutant.file]
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # the child: patch, test, exit with pytest's code
        code = 3
        quiet = os.open(os.devnull, os.O_WRONLY)
        os.dup2(quiet, 1)
        os.dup2(quiet, 2)
        try:
            exec(compile(mutated_source(mutant), str(ROOT / mutant.file), "exec"), fresh)
            _swap_code(module.__dict__, fresh)
            import pytest

            code = 0
            for tier in tiers(tests):
                code = int(pytest.main([*PYTEST_ARGS, *tier]))
                if code not in (0, 5):
                    break
        finally:
            os._exit(code if code in (0, 5) else 1)
    deadline = time.monotonic() + timeout_s
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            return Outcome(mutant, True, round(time.perf_counter() - started, 1), f"timed out after {timeout_s:g}s")
        time.sleep(0.05)
    code = os.waitstatus_to_exitcode(status)
    return Outcome(mutant, code not in (0, 5), round(time.perf_counter() - started, 1), f"exit {code}")


def _swap_code(old: dict[str, object], new: dict[str, object]) -> None:
    """Give every function (method, class or static method, property getter) of the module in `old` the code and
    the default arguments of its namesake in `new`; a decorated one's (`contextmanager`, `functools.cache`: what its
    `__wrapped__` chain ends at), not the decorator's wrapper, whose code is the decorator's own."""
    def plain(member: object) -> object:
        if isinstance(member, property):
            member = member.fget
        elif isinstance(member, classmethod | staticmethod):
            member = member.__func__
        return inspect.unwrap(member) if callable(member) and hasattr(member, "__wrapped__") else member

    def functions(namespace: dict[str, object]) -> Iterator[tuple[str, object]]:
        for name, value in namespace.items():
            if isinstance(value, type):
                for attr, member in vars(value).items():
                    yield f"{name}.{attr}", plain(member)
            else:
                yield name, plain(value)

    replacements = dict(functions(new))
    for name, value in functions(old):
        other = replacements.get(name)
        if hasattr(value, "__code__") and other is not None and hasattr(other, "__code__"):
            for attribute in ("__code__", "__defaults__", "__kwdefaults__"):
                setattr(value, attribute, getattr(other, attribute))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="", help="run only targets whose path contains this")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--report", default="mutation.json", help="where the JSON report goes")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds one mutant's tests may take")
    parser.add_argument("--index", type=int, nargs="*", default=None,
                        help="run only the mutants with these indices (with --only: the indices are per file)")
    parser.add_argument("--fork", action="store_true",
                        help="run each code mutant in a fork of one prepared interpreter (run_forked), not afresh")
    args = parser.parse_args()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.strip()
    if dirty and not args.list:
        print("the tree has uncommitted changes: commit them first (mutants are written in place)", file=sys.stderr)
        return 2
    chosen = [m for file in TARGETS if args.only in file for m in mutants(file)]
    if args.index is not None:
        chosen = [m for m in chosen if m.index in args.index]
    if args.list:
        for m in chosen:
            print(f"{m.file}:{m.line} #{m.index} [{m.where}] {m.change}")
        print(f"{len(chosen)} mutants")
        return 0
    outcomes: list[Outcome] = []
    if args.fork:
        _prepare_fork(args.only)
    for number, mutant in enumerate(chosen, start=1):
        data = mutant.where == "DEFAULT_DENY"
        outcome = run_forked(mutant, args.timeout) if args.fork and not data else run_one(mutant, args.timeout)
        outcomes.append(outcome)
        state = "killed" if outcome.killed else "SURVIVED"
        print(f"[{number}/{len(chosen)}] {state} {mutant.file}:{mutant.line} #{mutant.index} [{mutant.where}] "
              f"{mutant.change} ({outcome.seconds}s) {outcome.detail[:100]}", flush=True)
        Path(args.report).write_text(json.dumps([{**asdict(o.mutant), "killed": o.killed, "seconds": o.seconds,
                                                  "detail": o.detail} for o in outcomes], indent=1))
    return _summarise(outcomes)


def _prepare_fork(only: str) -> None:
    """Import once, before any fork: what every child shares (and what makes a child cheap)."""
    import importlib

    sys.path.insert(0, str(ROOT))
    for file in TARGETS:
        importlib.import_module(file.removesuffix(".py").replace("/", "."))
    # The test modules too (pytest finds them in sys.modules): a child then only collects and runs.
    for file, (_, tests) in TARGETS.items():
        if only in file:
            for test in tests:
                importlib.import_module(test.split("::")[0].removesuffix(".py").replace("/", "."))
    env_pythonpath = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = f"{ROOT}:{env_pythonpath}" if env_pythonpath else str(ROOT)
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    os.chdir(ROOT)


def _summarise(outcomes: list[Outcome]) -> int:
    """Print the killed share per file and in total; 0 when every mutant was killed, else 1."""
    by_file: dict[str, list[Outcome]] = {}
    for outcome in outcomes:
        by_file.setdefault(outcome.mutant.file, []).append(outcome)
    for file, results in by_file.items():
        killed = sum(o.killed for o in results)
        print(f"{file}: {killed}/{len(results)} killed ({100 * killed / len(results):.1f} %)")
    total = sum(o.killed for o in outcomes)
    print(f"total: {total}/{len(outcomes)} killed ({100 * total / max(len(outcomes), 1):.1f} %)")
    return 0 if total == len(outcomes) else 1

if __name__ == "__main__":
    sys.exit(main())
