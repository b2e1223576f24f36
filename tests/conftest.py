"""Shared test fixtures: the Lean double's argv, a check that no test leaks a process, the tiny model, S3 and the
transformers 4.57.1 environment of the cross-version tests."""

from __future__ import annotations

import gc
import os
import sys
import time
from collections.abc import Generator, Iterator
from pathlib import Path

# One torch thread per process, unless the caller says otherwise: the tests run tiny models, on which a second
# thread costs more than it gives, and two workers share the cores with the processes they start (measured on 2
# cores: the embedded eval of tests/search/test_cli_prover.py took 36 s on 2 threads, 24 s on 1). Set before
# torch is imported; every child inherits it (the rehearsal's pods too: tests/cluster/image_venv.py).
os.environ.setdefault("OMP_NUM_THREADS", "1")
# torch.compile off (torch reads TORCHDYNAMO_DISABLE in torch/_dynamo/eval_frame.py `_optimize`, torch 2.13): burnqed
# compiles nothing, but `import peft` imports bitsandbytes, which wraps its CPU fallback kernels in torch.compile at
# import, and that loads torch's inductor: 1.5-3 CPU-s in every process that imports peft (sft, rl, export, the EBM's
# and each torchrun process). The tiny models take bitsandbytes' native CPU kernels, not those fallbacks (odd
# shapes, blocks of 2,048 and more). Every child inherits it but the rehearsal's pods, which get their pod's
# environment (tests/cluster/image_venv.py) and so import as a pod does. tests/test_torch_compile_off.py checks it.
os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")

import psutil
import pytest

from burnqed.base.collector import tune_collector
from burnqed.base.cpu_kernels import pin_cpu_kernels

# The kernels `burnqed` itself runs (its entry point pins them): in-process tests then compute what the CLI
# children they compare against compute, on any x86-64 machine (burnqed/base/cpu_kernels.py).
pin_cpu_kernels()

from burnqed.storage import Store  # noqa: E402
from tests.shared import shared_artifact  # noqa: E402

# pytest keeps each test module as it rewrote its asserts (tests/**/__pycache__/*-pytest-*.pyc) only where Python
# may write bytecode: under PYTHONDONTWRITEBYTECODE=1 every worker rewrote all ~300 modules at every run (~17 of
# the ~25 CPU-s a worker spends collecting, measured on 2 cores).
sys.dont_write_bytecode = False

DOUBLE = Path(__file__).parent / "doubles" / "lean_double.py"
DOUBLE_START = DOUBLE.with_name("run_lean_double.py")  # starts it from its cached bytecode


def double_argv(*flags: str) -> list[str]:
    """argv of the fault-injecting Pantograph double."""
    return [sys.executable, str(DOUBLE_START), *flags]


# Linux lists a thread's children in /proc/PID/task/TID/children (CONFIG_PROC_CHILDREN): reading this process's
# descendants there costs ~0.03 ms, where psutil's `children()` reads every process's stat file (~1.3 ms on an idle
# machine, more on a busy one; twice for each of ~4,700 tests). Elsewhere psutil's walk answers.
_CHILDREN_LISTED = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").exists()


def _descendants(pid: int) -> list[int]:
    """The pids below `pid` (children first), from each thread's children file; a process that ends meanwhile is
    skipped with what was below it."""
    found, pending = [], [pid]
    while pending:
        parent = pending.pop()
        try:
            threads = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for tid in threads:
            try:
                with open(f"/proc/{parent}/task/{tid}/children", encoding="ascii") as listing:
                    children = [int(word) for word in listing.read().split()]
            except OSError:
                continue
            found += children
            pending += children
    return found


def _zombie(pid: int) -> bool:
    """Whether `pid` has exited and waits to be reaped (or is gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rpartition(")")[2].split()[0] in ("Z", "X")
    except OSError:
        return True


def live_children() -> list[psutil.Process]:
    """This process's descendants that still run (zombies, exited and unreaped, are not)."""
    if not _CHILDREN_LISTED:
        alive = []
        for child in psutil.Process().children(recursive=True):
            try:
                if child.status() != psutil.STATUS_ZOMBIE:
                    alive.append(child)
            except psutil.NoSuchProcess:
                continue
        return alive
    processes = []
    for pid in _descendants(os.getpid()):
        if _zombie(pid):
            continue
        try:
            processes.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            continue
    return processes


@pytest.fixture(autouse=True)
def no_leaked_processes() -> Iterator[None]:
    """Every process a test starts (Lean workers run in their own sessions) must be gone when it ends."""
    before = {p.pid for p in live_children()}
    yield
    deadline = time.monotonic() + 3.0
    leaked = [p for p in live_children() if p.pid not in before]
    while leaked and time.monotonic() < deadline:
        time.sleep(0.05)
        leaked = [p for p in live_children() if p.pid not in before]
    for proc in leaked:
        proc.kill()
    assert not leaked, f"test leaked processes: {[p.cmdline() for p in leaked]}"


@pytest.fixture(scope="session", autouse=True)
def one_botocore_data_loader_per_path() -> Iterator[None]:
    """Every botocore session of a test process (each s3fs filesystem's aiobotocore one) reads botocore's data files
    (the S3 model, the endpoint rules: JSON shipped with botocore, never written) through the loader per data path
    the bucket check's sessions share (burnqed/storage/s3.py `_data_loader`), which keeps what it parsed. A session
    otherwise makes a loader of its own and parses them again (~0.08 CPU-s a client): the tests start hundreds of moto
    servers in one process, each read through new filesystems. The sessions, clients, credentials and requests stay
    each test's own; a process the tests start makes its own loader, as it would."""
    import botocore.session

    from burnqed.storage import s3

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(botocore.session, "create_loader", s3._data_loader)
        yield


@pytest.fixture(autouse=True)
def environment_kept() -> Iterator[None]:
    """No test leaves the process's environment other than it found it (its fixtures' teardowns included): a
    variable that outlives its test changes what later tests of the same worker run, by test order."""
    # pytest's, set at each phase of a test; torch's inductor records its cache folder there the first time any code
    # asks for it (torch/_inductor/runtime/cache_dir_utils.py `cache_dir`): once a process, whichever test came first
    own = {"PYTEST_CURRENT_TEST", "TORCHINDUCTOR_CACHE_DIR"}
    before = dict(os.environ)
    yield
    after = dict(os.environ)
    changed = sorted(name for name in (before.keys() | after.keys()) - own if before.get(name) != after.get(name))
    for name in changed:
        if name in before:
            os.environ[name] = before[name]
        else:
            del os.environ[name]
    assert not changed, f"the test left the environment changed: {changed}"


TINY_TEST_STEPS = 120  # enough to learn the corpus' common tactics; a few seconds on 2 cores


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model, built once per test run (seed 0, TINY_TEST_STEPS steps) and shared read-only by every
    worker process (tests/shared.py)."""
    from burnqed.policy.tiny import build_tiny_model

    return shared_artifact(tmp_path_factory, f"tiny-{TINY_TEST_STEPS}",
                           lambda folder: build_tiny_model(folder, steps=TINY_TEST_STEPS, seed=0))


@pytest.fixture(scope="session")
def iterate_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A BURNQED_HOME with the default tiny model and the small generated world of the end-to-end iterations
    (tests/pipeline/iteration.py), built once per test run and shared read-only."""
    from tests.pipeline.iteration import build_home

    return shared_artifact(tmp_path_factory, "iterate-home", build_home)


@pytest.fixture(scope="session")
def iteration_0(iterate_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Iteration 0 on `iterate_home`'s world, stopped by SIGTERM and by SIGKILL on its way and finished
    (tests/pipeline/iteration.py: `interrupted_iteration_0`), once per test run; the folder holds `run/` and
    `interruptions.json`. Tests that add to the run (iteration 1) work on a copy (`copy_run`)."""
    from tests.pipeline.iteration import interrupted_iteration_0

    return shared_artifact(tmp_path_factory, "iteration-0",
                           lambda folder: interrupted_iteration_0(iterate_home, folder))


@pytest.fixture(scope="session")
def transformers4_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a Python that reads model folders with transformers 4.57.1 (SGLang 0.5.6's pin, the older
    serving image) over this interpreter's other packages: `scripts/transformers4.sh` installs the pinned wheels
    into .venv-transformers4/ once (idempotent; CI's setup.sh runs it too; one worker at a time), which goes first
    on PYTHONPATH."""
    import subprocess

    repo = Path(__file__).resolve().parents[1]
    shared_artifact(tmp_path_factory, "transformers4-installed", lambda _: subprocess.run(
        [str(repo / "scripts" / "transformers4.sh")], check=True, timeout=600,
        env={**os.environ, "PYTHON": sys.executable}))
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(repo / ".venv-transformers4"), str(repo)])}


@pytest.fixture
def s3_root(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An empty s3:// run root on a moto server in a thread; AWS_* env points every client (and children
    started by the test) at it. Cached s3fs instances are cleared so no test sees another's endpoint."""
    import uuid

    from tests.doubles.s3 import moto_s3

    # moto keeps one in-memory store per process whatever the server: a fresh bucket per test isolates tests.
    bucket = f"burnqed-test-{uuid.uuid4().hex[:10]}"
    with moto_s3(bucket) as endpoint:
        for name, value in {
            "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": endpoint, "AWS_EC2_METADATA_DISABLED": "true",
        }.items():
            monkeypatch.setenv(name, value)
        import s3fs

        s3fs.S3FileSystem.clear_instance_cache()
        yield f"s3://{bucket}/run"
        s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture
def minilean_in_process() -> Iterator[list[object]]:
    """The Lean of a command run through `cli()` in this process (eval, search, iterate's stages, rl) answered by
    minilean in this process, where `lean.command` is `{python} -m minilean` (the default, its replay fallback in
    this process too) or `{python} -m minilean.replay` (tests/doubles/line_servers.py): the pools' worker factory
    (`burnqed.lean.pool.worker_from_config`) replaced for the test. Opt in where what a command makes of Lean's
    replies is the subject, not the worker's process: `pytestmark = pytest.mark.usefixtures("minilean_in_process")`.
    The list it gives fills with the in-process workers made. Any other `lean.command` (the double, a fallback
    module, `--version`, another user) and `cli(..., process=True)` keep their processes; so must a test of a crash,
    a hang, a watchdog, a recycle or a tactic that sleeps (an in-process peer blocks the event loop while it thinks:
    tests/doubles/line_servers.py says where it is more lenient than a process)."""
    from tests.doubles.line_servers import lean_in_process

    with lean_in_process() as made:
        yield made


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """A store on local files whose download cache is this test's own folder."""
    return Store(cache_dir=tmp_path / "cache")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto` (pyproject's addopts): one worker more than the cores this process may run on. Every worker waits
    at times (a shared fixture another worker is building, a Lean timeout running out, a signal landing) while its
    children or the other workers could use the core: measured on 2 cores, 3 workers (with the rehearsal second in
    LONGEST_FIRST) ran the suite in 642 s where 2 took 671 s. PYTEST_XDIST_AUTO_NUM_WORKERS still decides when
    set (None: pytest-xdist's own reading of it)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return cores + 1


# The longest modules, longest first (measured with `pytest --durations=0`; update when a module grows): under
# `pytest -n` (pyproject's addopts, `--dist loadscope`) each module runs whole on one worker, and these start first
# so that no long module begins when the others are done. Every other module keeps its collection order after them.
LONGEST_FIRST = (
    "tests/pipeline/test_iterate.py",
    "tests/cluster/test_rehearsal.py",  # second: the next worker has work while the first builds iteration 0
    "tests/pipeline/test_iterate_s3.py",
    "tests/pipeline/test_resume.py",
    "tests/sft/test_joint_iterate.py",
    "tests/search/test_cli_prover.py",
    "tests/lean/test_kernel_net.py",
    "tests/ebm/test_cli.py",
    "tests/storage/test_storage_faults.py",
    "tests/commands/test_preflight.py",
    "tests/pipeline/test_learning.py",
    "tests/lean/test_compile_timeout.py",
    "tests/benchmarks/test_ordering_ceiling.py",
    "tests/sft/test_data_parallel.py",
)


if os.environ.get("BURNQED_COUNT_PROCESSES"):  # the opt-in process count (tests/counting/__init__.py)
    from tests import counting

    os.environ["BURNQED_COUNT_PROCESSES"] = os.path.abspath(os.environ["BURNQED_COUNT_PROCESSES"])
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(counting.HERE), *filter(None, [os.environ.get("PYTHONPATH")])])
    counting.install(lambda: os.environ.get("BURNQED_COUNT_TEST", "?"))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
        os.environ["BURNQED_COUNT_TEST"] = item.nodeid.split("::", 1)[0]
        return (yield)

    def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
        counts = counting.summary(Path(os.environ["BURNQED_COUNT_PROCESSES"]))
        terminalreporter.section("processes started, per test file")
        for line in counts:
            terminalreporter.write_line(line)


if os.environ.get("BURNQED_CPU_ACCOUNT"):  # the opt-in CPU account per test (tests/counting/cpu.py)
    from tests.counting import cpu

    @pytest.hookimpl(wrapper=True, specname="pytest_runtest_protocol")  # beside the process count's wrapper
    def pytest_runtest_protocol_cpu(item: pytest.Item) -> Generator[None, object, object]:
        before, began = cpu.used(), time.monotonic()
        try:
            return (yield)
        finally:
            cpu.record(Path(os.environ["BURNQED_CPU_ACCOUNT"]), item.nodeid, time.monotonic() - began, before)


# Python's cyclic collector as a burnqed process tunes it (burnqed/base/collector.py), and what a worker holds once
# the test modules are collected (torch, transformers, peft, which they import) kept out of its passes over the whole
# heap (`gc.freeze`). Measured in one process on 2 cores over tests/search/test_cli_prover.py, tests/sft/test_train.py
# and tests/lean/test_guard_soundness.py: 29 such passes took 9.8 of its 53 CPU-s, 2.7 of 45 with both. Freezing again
# after each module (what its tests imported) took it to 1.4, but keeps each module's cyclic garbage for good: with
# it, a worker's peak memory over the suite was 1.8 GB, against 1.2 before this session's changes.
tune_collector()


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    gc.freeze()


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """After pytest's own last pass of the collector (its unraisable-exception plugin collects what the tests left
    to report what their finalizers raised): that pass then walks what the tests made, not the frozen heap as well
    (2.4-5.3 CPU-s a worker, sampled); the interpreter's exit then finalises what the worker holds as it would have."""
    gc.unfreeze()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {module: k for k, module in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))  # stable: the rest keep order
