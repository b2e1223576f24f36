"""`burnqed search` killed outright (SIGKILL: an OOM kill, a lost node, `kill -9`), then resumed, with real processes:
no Lean worker outlives the killed search (the kernel kills each with it, also one that never reads its input), no
multipart upload is left open on S3, and `--resume` ends with exactly the rows and results of a search that was
never interrupted."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import boto3
import pytest

from burnqed.storage import Store
from burnqed.trajectory.reader import committed_parts, is_complete, read_results
from tests.conftest import double_argv
from tests.processes import background, cli, command_lines, descendants, forked, survivors, wait_for
from tests.search.helpers import SLOWED, one_at_a_time, results, rows, small_index


def open_uploads(s3_root: str) -> list[str]:
    bucket = s3_root.removeprefix("s3://").split("/", 1)[0]
    client = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    return [upload["Key"] for upload in client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])]


@pytest.mark.slow
def test_a_search_on_s3_killed_outright_resumes_to_the_rows_of_an_uninterrupted_one(
    tiny_model_dir: Path, tmp_path: Path, s3_root: str, store: Store
) -> None:
    index = small_index(tmp_path)
    killed, whole = f"{s3_root}/iter_0/search/shard-0", f"{s3_root}/uninterrupted/shard-0"
    args = ["--theorems", str(index), *one_at_a_time(tiny_model_dir), "--set", "search.checkpoint_every=1"]
    # The killed search is a fork of this process (tests/processes.py `forked`): a process of its own, with its Lean
    # workers, killed as one is, without a process start's imports; the next test kills a fresh `python -m burnqed.cli`.
    with forked("search", "--output", killed, *args, *SLOWED) as proc:
        wait_for(lambda: len(committed_parts(killed, store=store)) >= 2 or proc.poll() is not None)
        assert proc.poll() is None, "the search finished before it could be killed; slow it down"
        workers = descendants(proc.pid)
        assert workers, "the search runs no Lean worker"
        os.kill(proc.pid, signal.SIGKILL)  # the search process alone, as the OOM killer does
        proc.wait(timeout=30)
        assert survivors(workers, grace=5.0) == []
    first = {r.name for r in read_results(killed, store=store)}
    assert 2 <= len(first) < 6 and not is_complete(killed, store=store)
    assert open_uploads(s3_root) == []
    # the resume and the uninterrupted reference in this process: what the killed process left is the subject
    resumed = cli("search", "--output", killed, *args, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert f"({len(first)} already done)" in resumed.stdout
    assert is_complete(killed, store=store)
    assert cli("search", "--output", whole, *args).returncode == 0
    assert results(killed, store) == results(whole, store)
    assert rows(killed, store) == rows(whole, store)


@pytest.mark.slow
def test_a_lean_worker_that_never_reads_its_input_dies_with_a_search_killed_outright(
    tiny_model_dir: Path, tmp_path: Path, store: Store
) -> None:
    """A worker still importing (a Mathlib REPL takes 60-90 s before it reads a line) or stuck in a tactic never
    sees the end of its input: only the kernel's parent-death signal ends it."""
    importing = json.dumps(double_argv("--ready-delay", "60"))
    args = ["search", "--output", str(tmp_path / "out"), "--theorems", str(small_index(tmp_path)), "--set",
            f"policy.model={tiny_model_dir}", "--set", f"lean.command={importing}", "--set", "lean.workers=2"]
    with background(*args) as proc:
        def workers_started() -> bool:  # the workers, not their version probe
            lines = command_lines(descendants(proc.pid))
            return len([line for _, _, line in lines if "--version" not in line.split()]) == 2

        wait_for(lambda: workers_started() or proc.poll() is not None, timeout=60)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        workers = descendants(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert survivors(workers, grace=3.0) == []
