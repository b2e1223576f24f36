"""Every command that takes a URI, against every storage fault: one line on stderr, the documented exit code, no
traceback, nothing written (docs/errors.md).

The matrix runs in-process (typer's runner; the store's once-per-process bucket probe and s3fs' instance cache are
cleared between cases) against: no S3 credentials (environment cleared), an endpoint that does not answer (a closed
local port), a bucket that does not exist (moto's server), an endpoint that refuses the credentials (a local server
answering 403 to everything, as S3 does for a bad key), a folder no process can write (under /proc, which refuses
root too), a folder made read-only with chmod (skipped only for root, which ignores it), a full disk (the write
refused with ENOSPC), an output path through a symlink loop, a dangling link or a file, and a disk that fills or
turns read-only halfway through a stage's writes (tests/doubles/filling_disk.py). Two cases run `burnqed` as a
user would, in a subprocess, to show the line end to end. The Lean of a command run in this process (eval, search,
lean check) is minilean in this process too (`minilean_in_process`): the storage, not Lean's pipe, is the subject.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import moto  # noqa: F401  # a dev dependency: a missing one fails here instead of skipping the file
import pytest
import s3fs  # a runtime dependency

from burnqed import storage
from burnqed.base import uris
from burnqed.errors import TRANSIENT_EXIT_CODE, TransientStorageError
from burnqed.storage import faults, localfs, s3
from burnqed.storage import store as store_module
from tests.processes import cli

NO_CREDENTIALS: dict[str, str | None] = {
    "AWS_ACCESS_KEY_ID": None, "AWS_SECRET_ACCESS_KEY": None, "AWS_SESSION_TOKEN": None, "AWS_PROFILE": None,
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_CONFIG_FILE": "/nonexistent",
    "AWS_EC2_METADATA_DISABLED": "true", "AWS_WEB_IDENTITY_TOKEN_FILE": None,
    "AWS_CONTAINER_CREDENTIALS_FULL_URI": None,
}
CREDENTIALS: dict[str, str | None] = {
    **NO_CREDENTIALS, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}
UNWRITABLE = "/proc/burnqed-nonexistent"  # no process, root included, can create files under /proc
pytestmark = pytest.mark.usefixtures("minilean_in_process")

# command → its arguments with the URI `u` (an s3:// prefix or a local folder) and a local scratch folder `t`
Args = Callable[[str, Path], list[str]]
URI_COMMANDS: dict[str, Args] = {
    "plan --root": lambda u, t: ["plan", "--root", f"{u}/run"],
    "iterate --root": lambda u, t: ["iterate", "--iter", "0", "--root", f"{u}/run"],
    "report --root": lambda u, t: ["report", "--iter", "0", "--root", f"{u}/run", "--output", str(t / "report")],
    "report --output": lambda u, t: ["report", "--iter", "0", "--root", str(t), "--output", f"{u}/report"],
    "summary": lambda u, t: ["summary", f"{u}/traj"],
    "compare": lambda u, t: ["compare", f"{u}/a.json", f"{u}/b.json"],
    "merge-trajectories": lambda u, t: ["merge-trajectories", f"{u}/shard-0", "--output", f"{u}/merged"],
    "search --output": lambda u, t: ["search", "--output", f"{u}/search"],
    "eval --theorems": lambda u, t: ["eval", "--theorems", f"{u}/theorems.json", "--output", str(t / "r.json")],
    "eval --output": lambda u, t: ["eval", "--output", f"{u}/r.json"],
    "eval --trajectories-out": lambda u, t: ["eval", "--output", str(t / "r.json"), "--trajectories-out",
                                             f"{u}/traj"],
    "fetch": lambda u, t: ["fetch", f"{u}/export", str(t / "dest")],
    "lean check --theorems": lambda u, t: ["lean", "check", "--theorems", f"{u}/theorems.json"],
    "data prepare --output": lambda u, t: ["data", "prepare", "--output", f"{u}/data"],
    "sft --data": lambda u, t: ["sft", "--data", f"{u}/data", "--output", str(t / "sft")],
    "export --sft": lambda u, t: ["export", "--sft", f"{u}/sft", "--output", str(t / "export")],
    "train-ebm --trajectories": lambda u, t: ["train-ebm", "--trajectories", f"{u}/traj", "--output",
                                              str(t / "ebm")],
    "ebm embed --cache": lambda u, t: ["ebm", "embed", "--trajectories", str(t), "--cache", f"{u}/cache"],
}
# commands whose output (a local path) is written: `u` is a folder under which nothing can be created
OUTPUT_COMMANDS: dict[str, Args] = {
    "iterate --root": lambda u, t: ["iterate", "--iter", "0", "--root", f"{u}/run"],
    "search --output": lambda u, t: ["search", "--output", f"{u}/search"],
    "eval --output": lambda u, t: ["eval", "--output", f"{u}/r.json"],
    "eval --trajectories-out": lambda u, t: ["eval", "--output", str(t / "r.json"), "--trajectories-out",
                                             f"{u}/traj"],
    "report --output": lambda u, t: ["report", "--iter", "0", "--output", f"{u}/report"],
    "merge-trajectories --output": lambda u, t: ["merge-trajectories", str(t), "--output", f"{u}/merged"],
    "data prepare --output": lambda u, t: ["data", "prepare", "--output", f"{u}/data"],
    "sft --output": lambda u, t: ["sft", "--data", str(t), "--output", f"{u}/sft"],
    "export --output": lambda u, t: ["export", "--sft", str(t), "--output", f"{u}/export"],
    "train-ebm --output": lambda u, t: ["train-ebm", "--trajectories", str(t), "--output", f"{u}/ebm"],
    "lean check --output": lambda u, t: ["lean", "check", "--output", f"{u}/check.json"],
    "render --output": lambda u, t: ["render", "--output", f"{u}/rendered"],
    "model init-tiny --output": lambda u, t: ["model", "init-tiny", "--output", f"{u}/tiny"],
}
FAST = {"summary", "search --output"}  # the fast tier (`-m 'not slow'`) runs every fault on these; the rest is slow


def matrix(commands: dict[str, Args]) -> list[object]:
    """The command names as parameters: those in FAST unmarked, the others marked slow (still run by default)."""
    return [pytest.param(name, marks=() if name in FAST else pytest.mark.slow) for name in sorted(commands)]


# any work would wait a minute for this server (being started, so its closed port is waited for)
WOULD_WAIT = ["--set", "policy.backend=sglang", "--set", "policy.url=http://127.0.0.1:9",
              "--set", "policy.ready_timeout_s=60", "--set", "policy.wait_for_start=true"]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    from tests.doubles.s3 import moto_s3

    with moto_s3("burnqed-faults") as endpoint:
        yield endpoint


@pytest.fixture(scope="module")
def refusing_endpoint() -> Iterator[str]:
    """An S3 endpoint that refuses every request with 403 AccessDenied (what S3 answers a bad key)."""

    class Refuse(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            body = b"<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
            self.send_response(403)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _answer

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture(autouse=True)
def fresh_clients() -> Iterator[None]:
    """No case sees another's probed buckets, last URI or cached S3 clients."""
    s3._probed.clear()
    faults._last_uri[0] = None
    s3fs.S3FileSystem.clear_instance_cache()
    yield
    s3._probed.clear()
    s3fs.S3FileSystem.clear_instance_cache()


def invoke(args: list[str], env: dict[str, str | None]) -> tuple[int, list[str]]:
    """Run `burnqed ARGS` in this process; its exit code and stderr lines."""
    done = cli(*args, env={"BURNQED_HOME": None, **env})
    return done.returncode, done.stderr.strip().splitlines()


def assert_one_line(code: int, lines: list[str], expected: int, *needles: str, progress: bool = False) -> None:
    """Exit code `expected` and one error line holding `needles`; with `progress`, the progress lines of the work
    that ran before the fault may come first (the error is the last line, and the only one)."""
    assert code == expected, lines
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], lines
    assert progress or len(lines) == 1, lines
    assert not any("Traceback" in line for line in lines), lines
    for needle in needles:
        assert needle in errors[0], errors[0]


def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@functools.cache
def lister(endpoint: str) -> Any:
    """The test's own S3 client of `endpoint`, made once (a client costs ~20 ms of CPU; the cases' clients, which the
    commands make, stay each case's own: `fresh_clients`)."""
    import boto3

    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                        aws_secret_access_key="testing")


def s3_objects(endpoint: str, bucket: str) -> list[str]:
    return [o["Key"] for o in lister(endpoint).list_objects_v2(Bucket=bucket).get("Contents", [])]


FAULTS = ["no credentials", "unreachable endpoint", "missing bucket", "refused credentials"]


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("command", matrix(URI_COMMANDS))
def test_every_command_that_takes_a_uri_ends_a_storage_fault_with_one_line(
    command: str, fault: str, tmp_path: Path, moto_endpoint: str, refusing_endpoint: str
) -> None:
    env: dict[str, str | None]
    if fault == "no credentials":
        env, uri, code, needle = ({**NO_CREDENTIALS, "AWS_ENDPOINT_URL": moto_endpoint}, "s3://burnqed-faults/x", 2,
                                  "no S3 credentials")
    elif fault == "unreachable endpoint":
        env, uri, code, needle = ({**CREDENTIALS, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{closed_port()}"},
                                  "s3://burnqed-faults/x", TRANSIENT_EXIT_CODE, "cannot reach")
    elif fault == "missing bucket":
        env, uri, code, needle = ({**CREDENTIALS, "AWS_ENDPOINT_URL": moto_endpoint}, "s3://burnqed-absent/x", 2,
                                  "bucket 'burnqed-absent' does not exist")
    else:
        env, uri, code, needle = ({**CREDENTIALS, "AWS_ENDPOINT_URL": refusing_endpoint}, "s3://burnqed-faults/x", 1,
                                  "refused the credentials")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    before = s3_objects(moto_endpoint, "burnqed-faults")
    exit_code, lines = invoke([*URI_COMMANDS[command](uri, scratch), *WOULD_WAIT], env)
    assert_one_line(exit_code, lines, code, needle, uri.split("/x")[0])
    assert files_under(scratch) == []
    assert s3_objects(moto_endpoint, "burnqed-faults") == before


@pytest.mark.parametrize("command", matrix(OUTPUT_COMMANDS))
def test_every_output_under_a_folder_no_process_can_write_is_refused_before_work(command: str, tmp_path: Path
                                                                                 ) -> None:
    exit_code, lines = invoke([*OUTPUT_COMMANDS[command](UNWRITABLE, tmp_path), *WOULD_WAIT], {})
    assert_one_line(exit_code, lines, 2, "cannot create files in /proc", "choose a writable path")


@pytest.mark.parametrize("command", matrix(OUTPUT_COMMANDS))
def test_every_output_in_a_read_only_folder_is_refused_before_work(command: str, tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root ignores a folder's permission bits (the /proc case covers root)")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        exit_code, lines = invoke([*OUTPUT_COMMANDS[command](str(locked), tmp_path), *WOULD_WAIT], {})
    finally:
        locked.chmod(0o755)
    assert_one_line(exit_code, lines, 2, "cannot create files in", "choose a writable path")
    assert files_under(locked) == []


@pytest.mark.parametrize("command", matrix(OUTPUT_COMMANDS))
def test_every_output_on_a_full_disk_is_refused_before_work(command: str, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    def full(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(localfs, "_probe_write", full)
    out = tmp_path / "out"
    out.mkdir()
    exit_code, lines = invoke([*OUTPUT_COMMANDS[command](str(out), tmp_path), *WOULD_WAIT], {})
    assert_one_line(exit_code, lines, 1, "no space left")
    assert files_under(out) == []


SHAPES = {  # a path that cannot be written as given → the words of its refusal
    "symlink loop": "a symbolic link in this path points back into it (a loop)",
    "dangling link": "is a symbolic link to {missing}, which does not exist",
    "file on the way": "is a file, not a folder",
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("command", matrix(OUTPUT_COMMANDS))
def test_every_output_path_through_a_loop_a_dangling_link_or_a_file_is_refused_before_work(
    command: str, shape: str, tmp_path: Path
) -> None:
    base = tmp_path / "base"
    missing = tmp_path / "nowhere" / "burnqed-target"  # this test's own: no other test creates or removes it
    if shape == "symlink loop":
        (tmp_path / "other").symlink_to(base)
        base.symlink_to(tmp_path / "other")
    elif shape == "dangling link":
        base.symlink_to(missing)
    else:
        base.write_text("a file\n")
    before = files_under(tmp_path)
    exit_code, lines = invoke([*OUTPUT_COMMANDS[command](str(base), tmp_path), *WOULD_WAIT], {})
    assert_one_line(exit_code, lines, 2, SHAPES[shape].format(missing=missing))
    assert files_under(tmp_path) == before
    assert not missing.parent.exists()  # a dangling link's target is never created


@pytest.mark.slow  # an eval of 3 theorems on the tiny model
def test_a_disk_that_fills_during_an_eval_loses_nothing_published_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_model_dir: Path
) -> None:
    """The result is written last: refused with ENOSPC, the eval ends with one line, exit 1, no result file and no
    temporary file; the committed trajectories stay, and a rerun with --resume publishes the result."""
    import json

    from burnqed.data.index import bundled_index_path

    index = json.loads(bundled_index_path("test").read_text())
    theorems = tmp_path / "theorems.json"
    theorems.write_text(json.dumps({**index, "theorems": index["theorems"][:3]}))
    real = localfs._write_local

    def full_at_the_result(target: Path, data: bytes) -> None:
        if target.name == "r.json":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(target))
        real(target, data)

    monkeypatch.setattr(store_module, "_write_local", full_at_the_result)
    out, traj = tmp_path / "r.json", tmp_path / "traj"
    args = ["eval", "--output", str(out), "--trajectories-out", str(traj), "--theorems", str(theorems),
            "--budgets", "2,4", "--set", f"policy.model={tiny_model_dir}", "--set", "lean.workers=1"]
    exit_code, lines = invoke(args, {})
    assert_one_line(exit_code, lines, 1, "no space left writing", str(out), progress=True)
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".r.json")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["theorems.json", "traj"]
    assert (traj / "_SUCCESS.json").exists()  # every theorem's search is kept
    monkeypatch.setattr(store_module, "_write_local", real)
    exit_code, lines = invoke([*args, "--resume"], {})
    assert exit_code == 0, lines
    assert out.exists()


# ------------------------------------------------------------------------------ the disk fills mid-run


def mid_run_inputs(folder: Path) -> dict[str, list[str]]:
    """command → its arguments with `OUT` for the output: a report over two published evals, data prepare from one
    small source without Lean, and lean check of one theorem (each writes its output with Python's own files)."""
    from datetime import UTC, datetime

    from burnqed.data.index import bundled_index_path
    from burnqed.eval.pass_at import build_eval_result
    from burnqed.eval.result import write_eval_result
    from burnqed.layout import Layout
    from burnqed.records.results import FailureReason, TheoremResult
    from burnqed.storage import Store
    from tests.data.samples import write_all_sources

    at = Layout(f"file://{folder}/runs")
    names = [f"t{k}" for k in range(6)]
    for i, solved in ((0, 2), (1, 4)):
        attempts = [[TheoremResult(name=n, proved=True, budget_at_proof=3, nodes_expanded=3, time_s=1.0, proof="p")
                     if k < solved else TheoremResult(name=n, proved=False, failure_reason=FailureReason.EXHAUSTED,
                                                      nodes_expanded=2, time_s=1.0) for k, n in enumerate(names)]]
        result = build_eval_result(attempts, [10, 50], benchmark="b", model="tiny", ebm=None, lean_backend="replay",
                                   iteration=i, config_digest="0" * 16, git_commit=None, theorem_names=names,
                                   timestamp=datetime(2026, 1, 1, tzinfo=UTC), seed=0)
        write_eval_result(result, at.eval_result(i), store=Store(folder / "cache"))
    source = write_all_sources(folder / "sources")["lean-github"]
    config = folder / "data.toml"
    config.write_text(f'[data]\nvalid_fraction = 0.0\n[[data.sources]]\nkind = "lean-github"\npath = "{source}"\n')
    index = json.loads(bundled_index_path("test").read_text())
    theorems = folder / "theorems.json"
    theorems.write_text(json.dumps({**index, "theorems": index["theorems"][:1]}))
    return {
        "report": ["report", "--root", f"{folder}/runs", "--iter", "1", "--output", "OUT"],
        "data prepare": ["data", "prepare", "--config", str(config), "--output", "OUT"],
        "lean check --output": ["lean", "check", "--theorems", str(theorems), "--output", "OUT"],
    }


MID_RUN_FAULTS = {"ENOSPC": (errno.ENOSPC, "no space left writing"),
                  "EROFS": (errno.EROFS, "(Read-only file system): check its permissions")}


@pytest.mark.slow  # each stage three times (clean, faulted, again), in-process
@pytest.mark.parametrize("fault", sorted(MID_RUN_FAULTS))
@pytest.mark.parametrize("command", ["report", "data prepare", "lean check --output"])
def test_a_disk_that_fills_or_turns_read_only_mid_stage_publishes_nothing_and_a_rerun_gives_the_clean_result(
    command: str, fault: str, tmp_path: Path
) -> None:
    """The output's file system takes half of what the stage writes, then refuses (ENOSPC, or EROFS as when it is
    remounted read-only): one line naming the file, exit 1, nothing at the output and no staging folder beside it;
    run again on a disk with room, the stage publishes exactly what a run without the fault publishes."""
    from tests.doubles.filling_disk import FillingDisk

    args = mid_run_inputs(tmp_path / "inputs")[command]
    name = "check.json" if command.startswith("lean") else command.rsplit(maxsplit=1)[-1]
    clean, out = tmp_path / "clean" / name, tmp_path / "out" / name
    for folder in (clean.parent, out.parent):
        folder.mkdir()
    code, lines = invoke([str(clean) if a == "OUT" else a for a in args], {})
    assert code == 0, lines
    written = sum(p.stat().st_size for p in clean.parent.rglob("*") if p.is_file())
    code_number, needle = MID_RUN_FAULTS[fault]
    with FillingDisk(out.parent, written // 2, code_number) as disk:
        code, lines = invoke([str(out) if a == "OUT" else a for a in args], {})
    assert_one_line(code, lines, 1, needle, str(out.parent), progress=True)
    assert disk.left == 0 and files_under(out.parent) == []  # it did fill; nothing published, nothing left beside
    code, lines = invoke([str(out) if a == "OUT" else a for a in args], {})
    assert code == 0, lines
    if out.is_dir():
        published = {p.name for p in out.iterdir()} - {"_SUCCESS.json"}
        assert published == {p.name for p in clean.iterdir()} - {"_SUCCESS.json"}
        same = [n for n in published if not n.endswith(".png")]  # plots: pixels, not pinned bytes
        assert {n: content(out / n) for n in same} == {n: content(clean / n) for n in same}
    else:
        assert content(out) == content(clean)


VOLATILE = {"created_at", "elapsed_s", "elapsed_ms", "written_at"}  # the only fields two runs may differ in


def content(path: Path) -> object:
    """A published file as compared between two runs: JSON without its timings, anything else as bytes."""
    if path.suffix != ".json":
        return path.read_bytes()

    def strip(value: object) -> object:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in VOLATILE}
        return [strip(v) for v in value] if isinstance(value, list) else value

    return strip(json.loads(path.read_text()))


@pytest.mark.slow  # a burnqed process
def test_a_report_process_whose_disk_fills_mid_run_says_so_in_one_line(tmp_path: Path) -> None:
    args = mid_run_inputs(tmp_path / "inputs")["report"]
    out = tmp_path / "out"
    out.mkdir()
    double = Path(__file__).parents[1] / "doubles" / "filling_disk.py"
    done = subprocess.run([sys.executable, str(double), str(out), "1000", "ENOSPC", "--",
                           *[str(out / "report") if a == "OUT" else a for a in args]],
                          capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith(f"error: no space left writing {out}/.report.") and done.stderr.count("\n") == 1
    assert "nothing partial was published" in done.stderr
    assert files_under(out) == []


# ------------------------------------------------------------------------------ as a user runs it


@pytest.mark.slow  # the first a burnqed process, the others the app in this process
@pytest.mark.parametrize(("args", "env", "code", "needle"), [
    (["summary", "s3://burnqed-faults/run/traj"], "none", 2, "no S3 credentials"),
    (["plan", "--root", "s3://burnqed-faults/run"], "closed", TRANSIENT_EXIT_CODE, "cannot reach"),
    (["plan", "--root", "s3://"], "none", 2, "no bucket name"),
    (["search", "--output", "s3://burnqed-faults"], "none", 2, "a whole bucket"),
    (["config", "show", "--set", "storage.endpoint_url=htp://minio:9000"], "none", 2, "not an http(s) URL"),
    (["config", "show", "--set", "policy.url=127.0.0.1:30000"], "none", 2, "not an http(s) URL"),
    (["search", "--output", "OUT"], "home-is-a-file", 2, "is a file, not a folder"),
], ids=["no-credentials", "unreachable", "no-bucket", "whole-bucket", "endpoint-scheme", "policy-url", "home-file"])
def test_a_user_sees_one_line(args: list[str], env: str, code: int, needle: str, tmp_path: Path) -> None:
    environ: dict[str, str | None] = dict(NO_CREDENTIALS)
    if env == "closed":
        environ = {**CREDENTIALS, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{closed_port()}"}
    if env == "home-is-a-file":
        (tmp_path / "home").write_text("")
        environ["BURNQED_HOME"] = str(tmp_path / "home")
    done = cli(*[str(tmp_path / "out") if a == "OUT" else a for a in args], env=environ, timeout=120,
               process=env == "none" and args[0] == "summary")
    lines = done.stderr.strip().splitlines()
    assert done.returncode == code, done.stderr
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], done.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.slow  # a search of 4 theorems on the tiny model
def test_a_disk_that_fills_during_a_search_keeps_the_committed_parts_and_publishes_nothing_partial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_model_dir: Path
) -> None:
    """The second part's data write is refused with ENOSPC: one line, exit 1; the first part stays committed, the
    refused write leaves no file, every data file is a committed part, there is no `_SUCCESS.json`; `--resume` on a
    disk with room finishes the run with every theorem once."""
    import json

    from burnqed.data.index import bundled_index_path
    from burnqed.storage import Store
    from burnqed.trajectory import writer
    from burnqed.trajectory.reader import read_results

    index = json.loads(bundled_index_path("test").read_text())
    theorems = tmp_path / "theorems.json"
    theorems.write_text(json.dumps({**index, "theorems": index["theorems"][:4]}))
    real = writer._write_all
    parts = 0

    def full_at_the_second_part(handle: object, data: bytes) -> None:
        nonlocal parts
        if data.startswith(b"PAR1"):
            parts += 1
            if parts == 2:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(handle, data)  # type: ignore[arg-type]

    monkeypatch.setattr(writer, "_write_all", full_at_the_second_part)
    out = tmp_path / "search"
    args = ["search", "--output", str(out), "--theorems", str(theorems), "--set", f"policy.model={tiny_model_dir}",
            "--set", "lean.workers=1", "--set", "search.checkpoint_every=2", "--set", "search.max_nodes=4"]
    exit_code, lines = invoke(args, {})
    assert_one_line(exit_code, lines, 1, "no space left writing", str(out), progress=True)
    names = sorted(p.name for p in out.iterdir())
    assert "part-000000.json" in names and "_SUCCESS.json" not in names  # the first part stays, nothing finished
    assert not [n for n in names if n.startswith(".")]  # no temporary file of the refused write
    # every data file is a committed part; beside them the search's recorded inputs, written before its first theorem
    assert {n.removesuffix(".parquet") for n in names if n.endswith(".parquet")} == \
        {n.removesuffix(".json") for n in names if n.endswith(".json") and n != "_INPUTS.json"}
    assert "_INPUTS.json" in names
    # (leaving the writer on the error commits its buffer as a last part when the disk takes it: here it does)
    assert read_results(str(out), store=Store(tmp_path / "cache"))
    monkeypatch.setattr(writer, "_write_all", real)
    exit_code, lines = invoke([*args, "--resume"], {})
    assert exit_code == 0, lines
    assert (out / "_SUCCESS.json").exists()
    assert len(read_results(str(out), store=Store(tmp_path / "cache"))) == 4


# ------------------------------------------------------------------------------ the pieces


@pytest.mark.parametrize(("uri", "key", "problem"), [
    ("s3://", False, "no bucket name"),
    ("s3:///run", False, "no bucket name"),
    ("s3:/bucket/run", False, "malformed S3 URI"),
    ("s3://bucket", True, "a whole bucket"),
    ("s3://bucket/", True, "a whole bucket"),
    ("", False, "empty URI"),
])
def test_malformed_uris_are_refused_without_contacting_anything(uri: str, key: bool, problem: str) -> None:
    from burnqed.errors import InputError

    with pytest.raises(InputError, match=problem):
        uris.check_uri(uri, "--output", key=key)


@pytest.mark.parametrize("uri", ["s3://bucket", "s3://bucket/run", "runs", "file:///tmp/x", "memory://b/x"])
def test_well_formed_uris_pass(uri: str) -> None:
    assert uris.check_uri(uri, "--root") == uri


@pytest.mark.parametrize("name", ["s3", "s3a"])
def test_a_local_folder_named_like_a_remote_scheme_is_a_local_folder(name: str, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    def probe(uri: str, *, endpoint_url: str | None, region: str | None) -> None:
        raise AssertionError(f"{uri} was probed as an S3 URI")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(store_module, "probe_bucket", probe)
    fs, path = storage.Store(cache_dir=tmp_path / "cache").resolve(name)  # `search --output s3`: a folder here
    assert "file" in fs.protocol and path == str(tmp_path / name)


@pytest.mark.parametrize("url", ["htp://minio:9000", "127.0.0.1:30000", "http://", "http://host:port", "ftp://h"])
def test_urls_without_an_http_scheme_and_host_are_refused(url: str) -> None:
    with pytest.raises(ValueError, match="expected http://host:port"):
        uris.check_http_url(url, "policy.url")


def test_the_boundary_knows_storage_faults_and_nothing_else() -> None:
    from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError

    from burnqed.errors import ConfigError, InputError, StorageError, TransientStorageError

    full = storage.storage_fault(OSError(errno.ENOSPC, "No space left on device", "/data/r.json"))
    assert isinstance(full, StorageError) and "no space left writing /data/r.json" in str(full)
    arrow = storage.storage_fault(OSError("[Errno 28] Error writing bytes to file. Detail: No space left on device"))
    assert isinstance(arrow, StorageError) and "no space left" in str(arrow)  # pyarrow keeps the errno in its text
    read_only = storage.storage_fault(OSError(errno.EROFS, "Read-only file system", "/mnt/out"))
    assert isinstance(read_only, StorageError) and "permission denied at /mnt/out" in str(read_only)
    faults._last_uri[0] = "s3://b/run/x"
    assert isinstance(storage.storage_fault(NoCredentialsError()), ConfigError)
    unreachable = storage.storage_fault(EndpointConnectionError(endpoint_url="http://127.0.0.1:9"))
    assert isinstance(unreachable, TransientStorageError) and "s3://b/run/x" in str(unreachable)
    missing = ClientError({"Error": {"Code": "NoSuchBucket"}}, "ListObjectsV2")
    assert isinstance(storage.storage_fault(missing), InputError)
    group = ExceptionGroup("tasks", [ValueError("x"), OSError(errno.ENOSPC, "No space left on device")])
    assert isinstance(storage.storage_fault(group), StorageError)
    assert storage.storage_fault(ValueError("a bug")) is None
    assert storage.storage_fault(FileNotFoundError(errno.ENOENT, "gone", "/x")) is None  # not raised by storage
    assert storage.storage_fault(KeyError("a bug")) is None


def test_a_bucket_check_reads_botocore_s_data_files_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each check has a session of its own (the credentials the environment holds then) reading botocore's data
    files through one loader per process (`s3._data_loader`): a second check reads none of them again."""
    import botocore.loaders
    import botocore.session

    # botocore's own loader per session, as in a process of burnqed (the tests share one: tests/conftest.py)
    monkeypatch.setattr(botocore.session, "create_loader", botocore.loaders.create_loader)
    read: list[str] = []
    load_file = botocore.loaders.JSONFileLoader.load_file

    def counted(self: botocore.loaders.JSONFileLoader, file_path: str) -> Any:
        read.append(file_path)
        return load_file(self, file_path)

    monkeypatch.setattr(botocore.loaders.JSONFileLoader, "load_file", counted)
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(name, value)
    s3._data_loader.cache_clear()  # as in a fresh process: an earlier check of this one read them already
    reads: list[list[str]] = []
    for _ in range(2):
        read.clear()
        with pytest.raises(TransientStorageError, match=r"cannot reach http://127\.0\.0\.1:9 "):
            s3.check_bucket("s3://bucket/run", "--output", endpoint_url="http://127.0.0.1:9", region="us-east-1")
        reads.append(list(read))
    first, second = reads
    assert any("/s3/" in path for path in first)  # the first check read the S3 model: it asked S3
    assert second == []
