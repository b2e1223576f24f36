"""The prover's commands end to end, as a user runs them: the `burnqed` CLI in this process (tests/processes.py
`cli`), as a process where a signal stops it or where it serves (`background`, or a fork of this process where it
is killed or interrupted: `forked`); replay Lean workers; the tiny model in-process or behind `burnqed serve`. Where
a command run by `cli` has the default Lean (`{python} -m minilean`), minilean answers in this process
(`minilean_in_process`): what the commands make of its replies is the subject; the replay Lean (`lean.command`
set), the commands started by `background` and the recheck keep their processes."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from burnqed.data.index import bundled_index_path, load_local_theorem_index
from burnqed.eval.result import PerTheorem, load_eval_result
from burnqed.lean.client import LeanWorker
from burnqed.lean.soundness import Verdict, check_proof_text
from burnqed.policy.base import Sampling
from burnqed.policy.sglang import SGLangClient
from burnqed.storage import Store
from burnqed.trajectory.reader import committed_parts, is_complete, read_edges, read_results
from leankit.corpus import load_corpus
from tests.processes import background, cli, forked, wait_for
from tests.search.helpers import REPLAY, as_forall_declaration, slowed

pytestmark = pytest.mark.usefixtures("minilean_in_process")
SLOWED = slowed(20)  # while a signal must land mid-run
ALL_NAMES = sorted(t.name for t in load_local_theorem_index(bundled_index_path()).theorems)


def _recheck(entries: Sequence[PerTheorem]) -> list[tuple[str, Verdict]]:
    """Each stored proof compiled again by the default Lean in a fresh process: minilean, with the recorded replay
    answering for the bundled theorems outside its fragment (e.g. `Nat.gcd`), as `lean.command`'s default does."""

    async def run() -> list[tuple[str, Verdict]]:
        async with LeanWorker([sys.executable, "-m", "minilean", "--fallback-module", "minilean.replay"]) as lean:
            headers = {t.name: t.header for t in load_local_theorem_index(bundled_index_path()).theorems}
            return [(entry.name, await check_proof_text(lean, entry.name, entry.proof,
                                                        index_header=headers[entry.name]))
                    for entry in entries if entry.proof is not None]

    return asyncio.run(run())


@pytest.mark.slow
@pytest.mark.timeout(600)  # 71 theorems on minilean (z3-decided tactics), then every found proof compiled again
def test_eval_on_the_embedded_defaults_writes_a_valid_result(tiny_model_dir: Path, tmp_path: Path,
                                                             store: Store) -> None:
    # The embedded benchmark and settings are the subject, not the budget: the largest budget is the search's
    # length (nearly every theorem spends it all, and the tiny model's generation is ~95 % of the run's time);
    # 6 keeps the two proofs the tiny model finds (at 1 and 6 expansions) for the recheck below.
    out = tmp_path / "r.json"
    done = cli("eval", "--output", str(out), "--budgets", "1,6", "--set", f"policy.model={tiny_model_dir}",
               "--set", "lean.workers=2")
    assert done.returncode == 0, done.stderr
    result = load_eval_result(out, store=store)
    # The embedded benchmark: the checked world's 56 test theorems (seed 0) and the 15 bundled ones, on minilean.
    assert (result.benchmark, result.total, result.pass_n, result.lean_backend) == ("embedded-test", 71, 1, "minilean")
    assert [row.budget for row in result.budgets] == [1, 6]
    assert len(result.per_theorem) == 71 and result.model == str(tiny_model_dir)
    assert {(g.group, g.total) for g in result.groups} == {("burnqed-world", 56), ("burnqed-bundled", 15)}
    # Concurrency: lean.workers × search.theorems_per_worker (default 4).
    assert result.seed == 0 and result.settings is not None and result.settings.concurrency == 2 * 4
    assert "budget" in done.stdout and f"wrote {out}" in done.stdout and "by source at budget 6" in done.stdout
    # Every counted proof is stored as text and re-checks through Lean's own frontend (axioms included).
    assert all(entry.proved == (entry.proof is not None) for entry in result.per_theorem)
    assert result.budgets[-1].solved >= 1  # the recheck below reads a proof (2 measured: at 1 and 6 expansions)
    for name, verdict in _recheck(result.per_theorem):
        assert verdict.ok and verdict.compiled, (name, verdict.reason)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["whole", "hybrid"])
def test_eval_in_the_whole_proof_modes_reports_tokens_and_lean_calls(tiny_model_dir: Path, tmp_path: Path,
                                                                     mode: str, store: Store) -> None:
    out = tmp_path / "r.json"
    done = cli("eval", "--output", str(out), "--set", f"search.mode={mode}", "--set", "search.max_proofs=16",
               "--set", "pipeline.eval_budgets=[16, 4, 8]", "--model", str(tiny_model_dir),
               "--set", "lean.workers=2", "--theorems", str(bundled_index_path("test")))
    assert done.returncode == 0, done.stderr
    result = load_eval_result(out, store=store)
    assert (result.mode, result.budget_unit, result.total) == (mode, "proofs", 15)
    assert [row.budget for row in result.budgets] == [4, 8, 16]  # eval's default: pipeline.eval_budgets, as iterate
    assert all(row.tokens and row.lean_calls and row.avg_tokens for row in result.budgets)
    assert [row.tokens for row in result.budgets] == sorted(row.tokens or 0 for row in result.budgets)
    assert sum(t.tokens or 0 for t in result.per_theorem) == result.budgets[-1].tokens
    assert "tokens/thm" in done.stdout and f"{mode} (budget in proofs)" in " ".join(done.stdout.split())
    for name, verdict in _recheck(result.per_theorem):
        assert verdict.verified, name


@pytest.mark.slow
def test_compare_and_summary_commands(tiny_model_dir: Path, tmp_path: Path, store: Store) -> None:
    model = f"policy.model={tiny_model_dir}"
    for name, verbose in (("a", ()), ("b", ("-v",))):  # budgets of 1 and 2: the commands are the subject, not search
        done = cli("eval", "--output", str(tmp_path / f"{name}.json"), "--budgets", "1,2", "--set", model,
                   "--set", "lean.workers=2", "--theorems", str(bundled_index_path("test")),
                   "--trajectories-out", str(tmp_path / f"traj-{name}"), *verbose)
        assert done.returncode == 0, done.stderr
        # The progress shows the science (theorems solved so far, the rate); the machinery only with -v.
        solved = load_eval_result(tmp_path / f"{name}.json", store=store).cumulative_solved
        last = [line for line in done.stderr.splitlines() if line.startswith("evaluating: ")][-1]
        machinery = r" · in flight 0/8 · .* · Lean w0:0.*" if verbose else ""
        assert re.fullmatch(rf"evaluating: 15/15 \(\d+\.\d/s, done\) · solved {solved}/15 "
                            rf"\({100 * solved / 15:.1f} %\){machinery}", last), last
        assert ("in flight" in done.stderr) == bool(verbose)
    compared = cli("compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    assert compared.returncode == 0, compared.stderr
    assert "Δ" in compared.stdout
    summary = cli("summary", str(tmp_path / "traj-a"), "--json")
    assert summary.returncode == 0, summary.stderr
    assert json.loads(summary.stdout)["theorems"] == 15
    missing = cli("summary", str(tmp_path / "nothing-here"))
    assert missing.returncode == 2 and "nothing-here" in missing.stderr


@pytest.mark.slow
def test_bad_arguments_are_one_line_errors(tmp_path: Path) -> None:
    for args, text in (
        (["eval", "--output", str(tmp_path / "r.json"), "--budgets", "10,x"], "--budgets"),
        (["search", "--output", str(tmp_path / "o"), "--shard", "4/4"], "shard"),
        (["compare", str(tmp_path / "only.json")], "at least two"),
    ):
        done = cli(*args)
        assert done.returncode == 2, done.stderr
        assert text in done.stderr and len(done.stderr.strip().splitlines()) == 1


def search_args(out: Path, model: Path, *extra: str) -> list[str]:
    # The bundled index (51 theorems), not the embedded default (the world's 333 more): these tests kill and resume.
    # No revisits: on the slowed Lean a failing theorem would spend its whole budget, and what is tested here is the
    # checkpointing, not the search's breadth.
    return ["search", "--output", str(out), "--theorems", str(bundled_index_path()), "--set", f"policy.model={model}",
            "--set", f"lean.command={REPLAY}", "--set", "lean.workers=2", "--set", "search.revisits=0", *extra]


@pytest.mark.slow
def test_sigkill_then_resume_ends_with_exactly_the_theorem_set(tiny_model_dir: Path, tmp_path: Path,
                                                               store: Store) -> None:
    out = tmp_path / "traj"
    args = search_args(out, tiny_model_dir, "--set", "search.checkpoint_every=3")
    with forked(*args, *SLOWED) as proc:  # a fork of this process, killed as a process is (tests/processes.py)
        wait_for(lambda: len(committed_parts(str(out), store=store)) >= 2 or proc.poll() is not None)
        assert proc.poll() is None, "the search finished before it could be killed; slow it down"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    first = {r.name for r in read_results(str(out), store=store)}
    assert 0 < len(first) < len(ALL_NAMES) and not is_complete(str(out), store=store)
    refused = cli(*args)
    assert refused.returncode == 2 and "--resume" in refused.stderr
    resumed = cli(*args, "--resume", "-v")
    assert resumed.returncode == 0, resumed.stderr
    assert f"({len(first)} already done)" in resumed.stdout
    # The progress counts this run's theorems; with -v the machinery follows, and the throughput report at the end.
    last = [line for line in resumed.stderr.splitlines() if line.startswith("searching: ")][-1]
    rest = len(ALL_NAMES) - len(first)
    assert re.fullmatch(rf"searching: {rest}/{rest} \(\d+\.\d/s, done\) · solved \d+/{rest} \(\d+\.\d %\) · in flight "
                        r"0/8 · .*", last), last
    assert "\nthroughput: " in resumed.stdout and "\nLean workers: w0 ≤" in resumed.stdout
    names = [r.name for r in read_results(str(out), store=store)]  # the reader refuses a theorem recorded twice
    assert sorted(names) == ALL_NAMES and is_complete(str(out), store=store)
    per_theorem = read_edges(str(out), columns=["theorem"], store=store).column("theorem").to_pylist()
    assert set(per_theorem) <= set(ALL_NAMES)
    again = cli(*args, "--resume")
    assert again.returncode == 0 and re.fullmatch(  # a finished search is reused, nothing searched again
        rf"reusing {re.escape(str(out))} \(finished [-0-9: ]+ UTC, same inputs\); --force redoes it\n", again.stdout)
    assert "throughput" not in again.stdout and "in flight" not in again.stderr  # no -v: no machinery


@pytest.mark.slow
def test_sigterm_flushes_finished_theorems(tiny_model_dir: Path, tmp_path: Path, store: Store) -> None:
    out = tmp_path / "traj"
    args = search_args(out, tiny_model_dir, "--set", "search.checkpoint_every=1000", *SLOWED)
    with background(*args, env={"BURNQED_LOG_LEVEL": "INFO"}) as proc:
        assert proc.stderr is not None
        finished = 0
        for line in proc.stderr:
            if "burnqed.search.runner" in line and " after " in line:
                finished += 1
                if finished == 2:
                    break
        assert not committed_parts(str(out), store=store)  # nothing checkpointed yet: all in the buffer
        os.kill(proc.pid, signal.SIGTERM)
        code = proc.wait(timeout=60)
        rest = proc.stderr.read()
    assert code == 128 + signal.SIGTERM and "SIGTERM" in rest and "--resume" in rest  # 143: retried in a cluster
    saved = read_results(str(out), store=store)
    assert len(saved) >= 2 and not is_complete(str(out), store=store)


@contextmanager
def served(model: Path) -> Iterator[str]:
    """`burnqed serve` in a fork of this process (`forked`: its HTTP API and its SIGTERM are the subject, not its
    start), at the address it reports."""
    with forked("serve", "--model", str(model), "--port", "0", capture=True) as proc:
        assert proc.stderr is not None
        for line in map(bytes.decode, proc.stderr):
            if "http://" in line:
                yield line.strip().split()[-1].rstrip("/")
                break
        else:
            raise AssertionError("burnqed serve did not report its address")
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=30) == 0


@pytest.mark.slow
def test_the_sglang_client_drives_burnqed_serve_and_a_search(tiny_model_dir: Path, tmp_path: Path,
                                                             store: Store) -> None:
    with served(tiny_model_dir) as url:
        async def ask() -> tuple[list[list[object]], list[list[float]]]:
            async with SGLangClient(url, ready_timeout_s=60) as client:
                await client.wait_ready()
                generated = await client.generate(["⊢ 1 + 1 = 2\n", "⊢ True\n"], Sampling(n=3, max_new_tokens=16))
                embedded = await client.encode(["⊢ True"])
                return generated, embedded  # type: ignore[return-value]

        generated, embedded = asyncio.run(ask())
        assert [len(g) for g in generated] == [3, 3]
        assert all(c.logprob < 0 and 0 < c.n_tokens <= 16 for g in generated for c in g)  # type: ignore[attr-defined]
        assert len(embedded) == 1 and len(embedded[0]) == 64
        done = cli("search", "--output", str(tmp_path / "t"), "--theorems", str(bundled_index_path("test")),
                   "--set", "policy.backend=sglang", "--set", f"policy.url={url}", "--set", "lean.workers=2",
                   "--set", "search.max_nodes=4")
        assert done.returncode == 0, done.stderr
        assert len(read_results(str(tmp_path / "t"), store=store)) == 15


def oversized_corpus(folder: Path) -> tuple[Path, Path, str]:
    """A replay corpus of three small theorems that the probe `linarith` closes and one whose goal is far too
    long for the tiny model's 2048-token context (closed only by `simp`, which nothing proposes); its index."""
    def spec(name: str, statement: str, tactic: str) -> dict[str, object]:
        return {"name": name, "split": "test", "topic": "algebra", "source": "test", "header": "import Mathlib",
                "statement": statement, "root": "g0", "goals": {"g0": {"hyps": [], "target": statement}},
                "transitions": [{"goal": "g0", "tactic": tactic, "result": []}], "proofs": [[tactic]]}

    huge = "∀ (a : ℕ), " + " + ".join(["a"] * 1200) + " = 1200 * a"
    theorems = [spec(f"small_{k}", f"∀ (x : ℕ), x + {k} = {k} + x", "linarith") for k in range(3)]
    theorems.insert(1, spec("oversized", huge, "simp"))
    corpus = folder / "corpus.json"
    corpus.write_text(json.dumps({"name": "oversized-test", "theorems": theorems}), encoding="utf-8")
    index = folder / "index.json"
    # Written as one ∀ statement (no binders before the colon): they start at the recorded root.
    specs = load_corpus(corpus).theorems
    index.write_text(json.dumps({"name": "oversized-test", "theorems": [
        as_forall_declaration(spec).model_dump(mode="json", exclude_none=True) for spec in specs]}), encoding="utf-8")
    return corpus, index, huge


@pytest.mark.slow
def test_one_oversized_goal_fails_alone_with_its_reason_and_the_run_succeeds(tiny_model_dir: Path,
                                                                           tmp_path: Path, store: Store) -> None:
    corpus, index, huge = oversized_corpus(tmp_path)
    common = ["--theorems", str(index), "--set", "lean.command=" + json.dumps(
        [sys.executable, "-m", "minilean.replay", "--corpus", str(corpus)]), "--set", "lean.workers=2",
        "--set", "search.concurrency=4", "--set", "search.max_nodes=3", "--set", 'search.probe_tactics=["linarith"]']
    from burnqed.policy.localmodel import LocalModel
    from burnqed.text.prompt import PromptFormat, build_prompt

    model = LocalModel.load(tiny_model_dir, device="cpu")
    prompt = build_prompt(PromptFormat.PLAIN_TACTIC, "⊢ " + huge, f"theorem oversized : {huge}")  # as search asks
    tokens = model.count_tokens([prompt])[0]
    model.close()
    assert tokens > 2048
    with served(tiny_model_dir) as url:  # SGLang's API: the client caps the prompt before sending it
        remote = cli("search", "--output", str(tmp_path / "remote"), *common, "--set", "policy.backend=sglang",
                     "--set", f"policy.url={url}")
    local = cli("search", "--output", str(tmp_path / "local"), *common,  # in-process: the model refuses it
                "--set", f"policy.model={tiny_model_dir}")
    for run, done, reason in (
        ("remote", remote, f"prompt not sent: its {tokens} tokens plus max_new_tokens 128 reach the model's context "
                           "length of 2048 tokens"),
        ("local", local, f"The input ({tokens} tokens) is longer than the model's context length (2048 tokens)."),
    ):
        assert done.returncode == 0, (run, done.stderr)
        results = {r.name: r for r in read_results(str(tmp_path / run), store=store)}
        assert sorted(results) == ["oversized", "small_0", "small_1", "small_2"]
        assert all(results[f"small_{k}"].proved for k in range(3)), (run, results)
        failed = results["oversized"]
        assert not failed.proved and failed.failure_reason == "prompt_rejected" and failed.rejected_prompts == 1
        assert failed.detail == f"the policy refused 1 prompt(s); first: {reason}"
        rows = read_edges(str(tmp_path / run), columns=["theorem", "outcome", "error", "tactic"],
                          store=store).to_pylist()
        rejected = [r for r in rows if r["outcome"] == "prompt_rejected"]
        assert rejected == [{"theorem": "oversized", "outcome": "prompt_rejected", "error": reason, "tactic": ""}]
        assert "proved 3/4" in done.stdout, done.stdout


@pytest.mark.slow
def test_search_gives_up_clearly_when_the_policy_server_is_gone(tmp_path: Path, store: Store) -> None:
    import socket
    import time

    with socket.socket() as sock:  # a port bound and closed again: nothing listens there
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    started = time.monotonic()  # policy.ready_timeout_s keeps its 600 s: nobody is starting that server
    done = cli("search", "--output", str(tmp_path / "t"), "--set", "policy.backend=sglang",
               "--set", f"policy.url={url}")
    assert time.monotonic() - started < 20.0  # the command's own start and the Lean pool's, no waiting
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"error: nothing listens on {url} (ConnectError: All connection attempts failed): start the server there "
        "(SGLang, or `burnqed serve`) or set policy.url; policy.wait_for_start=true waits up to policy.ready_timeout_s "
        "for a server that is being started"]
    assert not committed_parts(str(tmp_path / "t"), store=store)


@pytest.mark.slow
@pytest.mark.parametrize("flag", ["--help"])
def test_help_explains_the_commands(flag: str) -> None:
    for command in ("search", "eval", "compare", "summary", "merge-trajectories"):
        done = cli(command, flag)
        assert done.returncode == 0 and "Usage" in done.stdout


def eval_args(out: Path, traj: Path, model: Path, *extra: str) -> list[str]:
    # Budgets of 2 and 4 expansions: the resume, its refusals and the reuse are the subject, not the search's length.
    return ["eval", "--output", str(out), "--trajectories-out", str(traj), "--theorems", str(bundled_index_path()),
            "--budgets", "2,4", "--set", f"policy.model={model}", "--set", f"lean.command={REPLAY}",
            "--set", "lean.workers=2", "--set", "search.checkpoint_every=2", *extra]


@pytest.mark.slow  # a 51-theorem eval on a slowed Lean, interrupted and resumed
def test_an_interrupted_eval_resumes_as_its_hint_says_and_a_finished_one_is_not_redone(
    tiny_model_dir: Path, tmp_path: Path, store: Store
) -> None:
    out, traj = tmp_path / "r.json", tmp_path / "traj"
    args = eval_args(out, traj, tiny_model_dir)
    with forked(*args, *SLOWED, capture=True) as proc:  # a fork of this process, interrupted as a process is
        wait_for(lambda: len(committed_parts(str(traj), store=store)) >= 2 or proc.poll() is not None)
        assert proc.poll() is None, "the eval finished before it could be interrupted; slow it down"
        os.kill(proc.pid, signal.SIGINT)
        code = proc.wait(timeout=60)
        assert proc.stderr is not None
        hint = proc.stderr.read().decode().strip().splitlines()[-1]
    assert code == 130 and "SIGINT" in hint and "--resume" in hint and str(traj) in hint
    assert not out.exists()
    first = {r.name for r in read_results(str(traj), store=store)}
    assert 0 < len(first) < len(ALL_NAMES)
    refused = cli(*args)  # the prefix holds an earlier run: refused before any search
    assert refused.returncode == 2 and "--resume" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    other_budgets = cli(*[a if a != "2,4" else "2,5" for a in args], "--resume")
    assert other_budgets.returncode == 2 and "same --budgets" in other_budgets.stderr
    resumed = cli(*args, "--resume", "--show-theorems")
    assert resumed.returncode == 0, resumed.stderr
    result = load_eval_result(out, store=store)
    assert result.total == len(ALL_NAMES) and result.resumed == len(first)
    assert sorted(r.name for r in read_results(str(traj), store=store)) == ALL_NAMES and is_complete(str(traj),
                                                                                                     store=store)
    assert f"solved ({result.cumulative_solved}/{result.total})" in resumed.stdout  # --show-theorems
    assert all(t.detail for t in result.per_theorem if not t.proved)
    assert result.wall_s is not None and result.wall_s > 0
    # A finished eval is not redone (like every stage): its table again, the file untouched; --force redoes it.
    written = out.stat().st_mtime_ns
    again = cli(*args, "--resume")
    assert again.returncode == 0 and again.stdout.startswith(f"reusing {out} (finished ")
    assert ", same inputs); --force redoes it\n" in again.stdout
    assert out.stat().st_mtime_ns == written
