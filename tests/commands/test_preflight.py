"""Bad or unlucky inputs fail before any work, as one line on stderr with the documented exit code.

Each case runs a `burnqed` command by its app in this process (tests/processes.py `cli`; the S3 cases with their own
environment) with a policy server that would make any work wait a minute
(`policy.ready_timeout_s=60` on a closed port, `policy.wait_for_start=true`: a server being started): a command
that fails within seconds with its own message checked its inputs before it started Lean or the model. Nothing may
be written.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.processes import cli

WOULD_WAIT = ["--set", "policy.backend=sglang", "--set", "policy.url=http://127.0.0.1:9",
              "--set", "policy.ready_timeout_s=60", "--set", "policy.wait_for_start=true"]
FAST_S = 15.0  # far below the minute any work would wait for the policy server
NO_CREDENTIALS = {"AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_CONFIG_FILE": "/nonexistent",
                  "AWS_EC2_METADATA_DISABLED": "true"}
UNWRITABLE = "/proc/burnqed-nonexistent"  # no process, root included, can create files under /proc


def burnqed(*args: str, env: dict[str, str] | None = None, drop_aws: bool = False,
            ) -> tuple[subprocess.CompletedProcess[str], float]:
    dropped: dict[str, str | None] = {k: None for k in os.environ if drop_aws and k.startswith("AWS_")}
    started = time.monotonic()
    done = cli(*args, env={**dropped, **(env or {})})
    return done, time.monotonic() - started


def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def assert_fails_fast(done: subprocess.CompletedProcess[str], elapsed: float, code: int, *needles: str) -> None:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == code, done.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert elapsed < FAST_S, f"took {elapsed:.1f}s to fail"


def cases(tmp: Path) -> list[tuple[list[str], int, tuple[str, ...]]]:
    a_file = tmp / "a-file"
    return [
        (["eval", "--output", f"{UNWRITABLE}/r.json"], 2, ("--output", "cannot create files in /proc")),
        (["eval", "--output", str(a_file / "r.json")], 2, ("a-file is a file, not a folder",)),
        (["eval", "--output", str(tmp)], 2, ("is a directory; give a file name",)),
        (["eval", "--output", str(tmp / "r.json"), "--trajectories-out", str(a_file)], 2,
         ("--trajectories-out", "is a file; give a folder")),
        (["eval", "--output", str(tmp / "r.json"), "--resume", "--no-trajectories-out"], 2,
         ("--resume", "--no-trajectories-out")),
        (["eval", "--output", str(tmp / "r.json"), "--trajectories-out", str(tmp / "t"), "--no-trajectories-out"], 2,
         ("--no-trajectories-out and --trajectories-out contradict each other",)),
        (["eval", "--output", str(tmp / "r.json"), "--pass-n", "0"], 2, ("burnqed eval", "--pass-n", "-h")),
        (["eval", "--output", str(tmp / "r.json"), "--budgets", "0"], 2, ("--budgets",)),
        (["eval", "--output", str(tmp / "r.json"), "--ablation"], 2, ("--ebm",)),
        (["search", "--output", f"{UNWRITABLE}/t"], 2, ("--output",)),
        (["search", "--output", str(tmp / "t"), "--resume", "--force"], 2,
         ("--resume and --force contradict each other",)),
        (["search", "--output", str(tmp / "t"), "--start", str(tmp / "nonexistent.json")], 2,
         ("--start is read only", "give --ebm too")),
        (["merge-trajectories", str(tmp / "s0"), "--output", f"{UNWRITABLE}/t"], 2, ("--output",)),
        (["lean", "check", "--output", f"{UNWRITABLE}/r.json"], 2, ("--output",)),
        (["report", "--iter", "0", "--output", f"{UNWRITABLE}/report"], 2, ("--output",)),
        (["sft", "--data", str(tmp / "data"), "--output", f"{UNWRITABLE}/sft"], 2, ("--output",)),
        (["train-ebm", "--trajectories", str(tmp / "t"), "--output", f"{UNWRITABLE}/ebm"], 2, ("--output",)),
        (["data", "prepare", "--output", f"{UNWRITABLE}/data"], 2, ("--output",)),
        (["run-all", "--iters", "0", "--root", f"{UNWRITABLE}/runs"], 2, ("--root",)),
        (["iterate", "--iter", "0", "--root", str(a_file)], 2, ("--root", "is a file; give a folder")),
        (["eval", "--nonsense"], 2, ("No such option",)),
    ]


@pytest.mark.slow  # twenty-one commands, by the app in this process
def test_bad_outputs_and_arguments_fail_before_work_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("x")
    before = files_under(tmp_path)
    for args, code, needles in cases(tmp_path):
        started = time.monotonic()
        done = cli(*args, *WOULD_WAIT)
        elapsed = time.monotonic() - started
        assert_fails_fast(done, elapsed, code, *needles)
        assert files_under(tmp_path) == before, args


@pytest.mark.slow
def test_s3_output_without_credentials_names_what_to_set(tmp_path: Path) -> None:
    done, elapsed = burnqed("eval", "--output", "s3://burnqed-none/r.json", *WOULD_WAIT, env=NO_CREDENTIALS,
                            drop_aws=True)
    assert_fails_fast(done, elapsed, 2, "no S3 credentials", "AWS_ACCESS_KEY_ID", "AWS_PROFILE")
    done, elapsed = burnqed("search", "--output", "s3://burnqed-none/t", *WOULD_WAIT, env=NO_CREDENTIALS,
                            drop_aws=True)
    assert_fails_fast(done, elapsed, 2, "AWS_ACCESS_KEY_ID")


@pytest.mark.slow
def test_s3_endpoint_that_does_not_answer_is_an_infrastructure_error(tmp_path: Path) -> None:
    env = {**NO_CREDENTIALS, "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s",
           "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}
    done, elapsed = burnqed("eval", "--output", "s3://burnqed-none/r.json", *WOULD_WAIT, env=env, drop_aws=True)
    # An endpoint that does not answer is a storage error a retry can cure: exit 75 (retried in the cluster).
    assert_fails_fast(done, elapsed, 75, "cannot reach http://127.0.0.1:9", "AWS_ENDPOINT_URL")


@pytest.mark.slow
@pytest.mark.usefixtures("minilean_in_process")  # the Lean the passing preflight starts: not the subject here
def test_s3_bucket_that_does_not_exist_is_a_bad_path(s3_root: str) -> None:
    import s3fs

    done, elapsed = burnqed("eval", "--output", "s3://no-such-bucket-here/r.json", *WOULD_WAIT)
    assert_fails_fast(done, elapsed, 2, "bucket 'no-such-bucket-here' does not exist")
    # The reachable bucket passes the preflight: the command then waits for the policy (cut short here).
    done, _ = burnqed("eval", "--output", f"{s3_root}/r.json", "--set", "policy.backend=sglang",
                      "--set", "policy.url=http://127.0.0.1:9", "--set", "policy.ready_timeout_s=0.5",
                      "--set", "policy.wait_for_start=true")
    assert done.returncode == 1 and "policy server http://127.0.0.1:9 not ready" in done.stderr, done.stderr
    assert not s3fs.S3FileSystem().exists(f"{s3_root}/r.json")


@pytest.mark.parametrize("command", [
    ["compare"], ["summary"], ["merge-trajectories"], ["data", "report"], ["ebm", "metrics"], ["model", "init-tiny"],
    ["eval"], ["search"], ["lean", "check"], ["run-all"], ["config", "show"],
])
@pytest.mark.slow
def test_every_command_takes_config_and_dash_h(command: list[str]) -> None:
    done = cli(*command, "-h", terminal_width=200)
    assert done.returncode == 0, done.stderr
    assert "--config" in done.stdout and "--set" in done.stdout and "Usage" in done.stdout
