"""The embedded iteration the end-to-end tests share: `burnqed iterate` as a user runs it (real subprocesses, the
replay Lean server, the tiny model) on a small generated world in place of the default one (the default takes
minutes: benchmarks/learning.py runs it), with its BURNQED_HOME.

Iteration 0 is run once per test run (tests/conftest.py `iteration_0`, shared by every worker) the way a shared
cluster treats it: stopped by SIGTERM mid-search, resumed and SIGKILLed mid-search, resumed again to the end. What
happened at each stop is recorded (`Interruptions`) and the tests assert on it (tests/pipeline/test_iterate.py);
iteration 1 (tests/pipeline/test_iterate.py), a joint iteration 1 (tests/sft/test_joint_iterate.py), the SFT and RL
stops (tests/pipeline/test_resume.py) and its --force redo on S3 (tests/pipeline/test_iterate_s3.py) start from it.
Where the stop of a process as a user starts it is the subject, `iterate` is a process of its own (`start_iterate`);
where what a stop leaves and a resume makes of it is, a fork of the test's process with its stages forks of it
(`fork_iterate`); where what the stages make is, it runs in the test's process with each stage a fork of it
(`iterate_forked`, tests/processes.py `forked_stages`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from leankit.world import generate_world, world_json
from leankit.world.algebra import dvd_omega, nat_lin
from leankit.world.catalog import Family
from minilean.replay.replay_server import LATENCY_VARIABLE
from tests.processes import ForkedStage

# Small but complete: one noise pass, 2 shards, checkpoints every 2 theorems; the bundled corpus and a small world
# (a taught and a search-only family). Budgets half the embedded ones: what a search process costs beyond its ~4
# CPU-s of start is the tiny model's generation, and at 16 expansions it proves 14 of the 24 theorems of a shard that
# 32 proves 15 of (measured on this world; 8.3 CPU-s a shard against 11.4). The evals (eval-base and eval here, each
# later iteration's and redo's) at budgets 5 and 10: what the tests read of an eval is its budgets, theorems, groups
# and model, never how many it proves, and every eval's search is a budget of expansions over the 20 theorems.
WORLD = (Family("nat_lin", nat_lin, train=6, pool=3, test=3), Family("dvd_omega", dvd_omega, train=0, pool=4, test=2))
SETS = {
    "BURNQED_SEARCH__CHECKPOINT_EVERY": "2",
    "BURNQED_SEARCH__MAX_NODES": "16",
    "BURNQED_PIPELINE__EVAL_BUDGETS": "[5, 10]",
    "BURNQED_SFT__MAX_STEPS": "40",
}
NO_ORPHAN_S = 15.0  # how long a stopped iterate and its processes may take to go: signals.STOP_GRACE_S (6 s), then
# SIGKILL and reaping, with room for a loaded 2-core machine (a process left alive is caught at any bound)
# Lean slowed down a little while a stop must land mid-search, through `lean.env` (minilean.replay's latency
# variable): the command stays the one the stages record, so the resume to the end runs at full speed.
SLOWED = {"BURNQED_LEAN__ENV": json.dumps({LATENCY_VARIABLE: "15"})}


def build_home(folder: Path) -> None:
    """A BURNQED_HOME with the default tiny model built as a first `iterate` would build it (the shorter test model
    finds too few multi-step proofs to train an EBM on), and the small world's corpus and test index."""
    from burnqed.data.index import index_json, theorem_index
    from burnqed.policy.tiny import TINY_NAME, build_tiny_model
    from leankit.corpus import bundled_corpus_path, load_corpus

    build_tiny_model(folder / "models" / TINY_NAME)
    corpus = folder / "corpus"
    corpus.mkdir()
    shutil.copy(bundled_corpus_path(), corpus / "competition.json")
    world = generate_world(families=WORLD, reserved=[t.statement for t in load_corpus().theorems])
    (corpus / "world.json").write_text(world_json(world), encoding="utf-8")
    (folder / "test.json").write_text(index_json(theorem_index(load_corpus(corpus), "test")), encoding="utf-8")


def iterate_env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of an `iterate` on the small world of `home`, with `extra` variables on top."""
    corpus = home / "corpus"
    world = {
        "BURNQED_LEAN__COMMAND": json.dumps(["{python}", "-m", "minilean.replay", "--corpus", str(corpus)]),
        "BURNQED_DATA__SOURCES": json.dumps([{"kind": "bundled"},
                                             {"kind": "world", "path": str(corpus / "world.json")}]),
        "BURNQED_PIPELINE__BENCHMARK": str(home / "test.json"),
    }
    env = {**os.environ, "BURNQED_HOME": str(home), **SETS, **world, **(extra or {})}
    env.pop("BURNQED_CONFIG", None)
    return env


def iterate_in_process(root: str, iteration: int, env: dict[str, str],
                       *extra: str) -> subprocess.CompletedProcess[str]:
    """`burnqed iterate --iter ITERATION --root ROOT` in this process (tests/processes.py `cli`), for a run that
    starts no stage (all done already, or refused before any): its exit code, stdout and stderr as `iterate` gives."""
    from tests.processes import cli

    return cli("iterate", "--iter", str(iteration), "--root", root, *extra, env={**env, "BURNQED_CONFIG": None})


def iterate_forked(root: str, iteration: int, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    """`burnqed iterate --iter ITERATION --root ROOT` to the end in this process, each stage a fork of it
    (tests/processes.py `forked_stages`) whose Lean, the replay server, answers in the stage's process
    (tests/doubles/line_servers.py `lean_in_process`): for a test of what the stages make and decide, not of their
    processes."""
    from tests.doubles.line_servers import lean_in_process
    from tests.processes import cli, forked_stages

    with forked_stages(), lean_in_process():
        return cli("iterate", "--iter", str(iteration), "--root", root, *extra, env={**env, "BURNQED_CONFIG": None})


def start_iterate(root: Path, env: dict[str, str], *extra: str) -> subprocess.Popen[str]:
    """`burnqed iterate --iter 0` in a session of its own, stderr captured."""
    return subprocess.Popen([sys.executable, "-m", "burnqed.cli", "iterate", "--iter", "0", "--root", str(root),
                             *extra], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def fork_iterate(root: Path, env: dict[str, str], *extra: str) -> ForkedStage:
    """`start_iterate`'s command as a fork of this process (tests/processes.py `ForkedStage`: a process of its own in
    a group of its own, set up as a fresh one; stdout to /dev/null, stderr to a pipe of bytes) whose stages are forks
    of it (`forked_stages`; their Lean workers processes, as configured): for a test whose subject is what a stop of
    `iterate` leaves and what its resume makes, not a process start (~8 CPU-s of imports each for iterate and its
    stage). The fork is `python -m burnqed.cli` to itself (`sys.argv[0]` that module's file, `sys.orig_argv` its
    command line), so the command a stop prints is the one a real process prints. Real processes are stopped in
    `interrupted_iteration_0` (SIGTERM) and tests/pipeline/test_iterate_signals.py (SIGKILL)."""
    import burnqed.cli
    from burnqed.runner.requests import OtherRequest
    from tests import counting
    from tests.processes import _run_forked_stage, _stage_imports, forked_stages

    _stage_imports()  # once in this process: the stage forks of the fork start with them
    words = ("iterate", "--iter", "0", "--root", str(root), *extra)
    counting.count("fork burnqed.cli")
    read, write = os.pipe()
    null = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    argv0, orig_argv = sys.argv[0], sys.orig_argv
    with forked_stages():
        sys.argv[0], sys.orig_argv = str(burnqed.cli.__file__), [sys.executable, "-m", "burnqed.cli", *words]
        try:
            pid = os.fork()
            if pid == 0:
                os.close(read)
                _run_forked_stage(OtherRequest(words=words), env, [null, write])
        finally:
            sys.argv[0], sys.orig_argv = argv0, orig_argv
    os.close(write)
    os.close(null)
    return ForkedStage(pid, None, os.fdopen(read, "rb"))


def files_under(root: Path) -> set[str]:
    """The files under `root`, relative, without download caches."""
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and "-cache" not in str(p)}


def search_parts(root: Path) -> set[str]:
    """The committed search parts of iteration 0 (main and noise searches, every shard)."""
    return {name for name in files_under(root / "iter_0")
            if "search/shard-" in name and Path(name).name.startswith("part-") and name.endswith(".json")}


def wait_until(condition: object, proc: subprocess.Popen[str] | ForkedStage, what: str, timeout_s: float = 600) -> None:
    """Poll `condition()` until it holds; fails naming `what` if `proc` exits or the time runs out first."""
    assert callable(condition)
    deadline = time.monotonic() + timeout_s
    while not condition() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert condition(), f"{what} never happened (iterate exited {proc.poll()})"


def alive_after(processes: list[psutil.Process], seconds: float) -> list[str]:
    """The command lines of `processes` still running after `seconds` (killed then)."""
    _, alive = psutil.wait_procs(processes, timeout=max(0.0, seconds))
    left = []
    for proc in alive:
        try:
            left.append(" ".join(proc.cmdline()[:6]))
            proc.kill()
        except psutil.NoSuchProcess:
            continue
    return left


@dataclass
class Interruptions:
    """What happened to iteration 0 on its way to the end (tests/pipeline/test_iterate.py asserts on it)."""

    sigterm_children: list[str]  # the command lines under iterate when SIGTERM came
    sigterm_code: int
    sigterm_stderr: str
    sigterm_orphans: list[str]  # processes still alive NO_ORPHAN_S after the signal
    lease_left: list[str]  # lease files left behind by the stopped run
    kept_after_sigterm: list[str]  # search parts committed when SIGTERM ended the run
    sigterm_shard0_done: bool  # whether the search's shard 0 was published as finished after the SIGTERM
    killed_part: str  # the search part, new since the SIGTERM, whose appearance triggered the SIGKILL
    killed_shard_done: bool  # whether that part's shard was published as finished when the SIGKILL came
    sigkill_orphans: list[str]  # stages (and Lean workers) still alive NO_ORPHAN_S after their iterate was SIGKILLed
    parts_after_sigkill: list[str]
    final_code: int
    final_stderr: str

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=1), encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> Interruptions:
        return cls(**json.loads(path.read_text(encoding="utf-8")))


RECORD = "interruptions.json"  # beside the run root in the shared folder
BEFORE_SEARCH = ("prepare-data", "sft", "eval-base", "export", "eval")  # iteration 0's stages the search waits for


def interrupted_iteration_0(home: Path, folder: Path) -> None:
    """Iteration 0 into `folder/run`, stopped twice on the way: the stages before the search first (`BEFORE_SEARCH`,
    in this process: their processes are not what is stopped), then `burnqed iterate` stopped by SIGTERM once shard
    0 of the search committed its first part, then the same command as a fork of this process with its stages forks
    of it (`fork_iterate`; the kill, not the start, is the subject), SIGKILLed (its whole process group: the runner;
    its stages have groups of their own) once a new part appears, then the same command to the end, Lean at full
    speed (`SLOWED` until then). Writes `folder/interruptions.json`."""
    from tests.processes import command_lines

    folder.mkdir(parents=True)
    root = folder / "run"
    only = [arg for name in BEFORE_SEARCH for arg in ("--only", name)]  # `iterate --only` checks each name
    before = iterate_forked(str(root), 0, iterate_env(home), *only)
    assert before.returncode == 0, before.stderr[-3000:]
    env = iterate_env(home, SLOWED)

    proc = start_iterate(root, env)
    try:
        first = root / "iter_0" / "search" / "shard-0" / "part-000000.json"
        wait_until(first.exists, proc, "the first search part of shard 0")
        children = psutil.Process(proc.pid).children(recursive=True)  # the stages and their Lean workers
        child_lines = [line for _, _, line in command_lines(children)]
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        term_code = proc.wait(timeout=NO_ORPHAN_S)
        took = time.monotonic() - sent
        assert proc.stderr is not None
        term_stderr = proc.stderr.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    term_orphans = alive_after(children, NO_ORPHAN_S - took)
    leases = [str(p.relative_to(root)) for p in root.rglob("_LEASE.json")]
    kept = search_parts(root)
    shard0_done = (root / "iter_0" / "search" / "shard-0" / "_SUCCESS.json").exists()

    forked = fork_iterate(root, env)  # its stages forks: what the kill leaves is the subject
    try:
        wait_until(lambda: search_parts(root) - kept, forked, "a search part committed after the resume")
        new_part = sorted(search_parts(root) - kept)[0]
        stages = psutil.Process(forked.pid).children(recursive=True)
    finally:
        os.killpg(forked.pid, signal.SIGKILL)  # the runner; its stages have process groups of their own
        forked.wait()
        if forked.stderr is not None:
            forked.stderr.close()
    kill_orphans = alive_after(stages, NO_ORPHAN_S)  # the stages stop on their parent's death (PDEATHSIG)
    after_kill = search_parts(root)
    killed_shard_done = (root / "iter_0" / Path(new_part).parent / "_SUCCESS.json").exists()

    done = iterate_forked(str(root), 0, iterate_env(home))  # to the end: what the stages make is the subject now
    Interruptions(
        sigterm_children=child_lines, sigterm_code=term_code, sigterm_stderr=term_stderr,
        sigterm_orphans=term_orphans, lease_left=leases, kept_after_sigterm=sorted(kept),
        sigterm_shard0_done=shard0_done, killed_part=new_part, killed_shard_done=killed_shard_done,
        sigkill_orphans=kill_orphans, parts_after_sigkill=sorted(after_kill), final_code=done.returncode,
        final_stderr=done.stderr,
    ).save(folder / RECORD)
