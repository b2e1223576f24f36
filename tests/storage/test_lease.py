"""One writer per place (storage.place_lease): a second writer refuses, naming the first; a stale lease
(dead owner, expired heartbeat) is taken over with a warning;
locally and on S3 (moto honours If-None-Match and If-Match on PutObject)."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from burnqed import storage
from burnqed.storage import Store
from burnqed.storage.place_lease import LEASE_NAME, Lease, LeaseHeldError, LeaseOwner, hold_lease, stale_reason


def _owner(**changes: object) -> LeaseOwner:
    now = time.time()
    base = LeaseOwner(pid=os.getpid(), host=socket.gethostname(), command="burnqed iterate --iter 0", token="t",
                      started_at=now, heartbeat=now)
    return base.model_copy(update=changes)


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_second_writer_refuses_naming_the_first_and_takes_over_once_it_let_go(tmp_path: Path, store: Store) -> None:
    place = str(tmp_path / "run")
    with hold_lease(store, place, what="run root", command="burnqed iterate --iter 0") as first:
        written = json.loads((tmp_path / "run" / LEASE_NAME).read_text())
        assert written["pid"] == os.getpid() and written["command"] == "burnqed iterate --iter 0"
        with pytest.raises(LeaseHeldError) as refused:
            Lease(store, place, what="run root", command="burnqed iterate --iter 1").acquire()
        message = str(refused.value)
        owner = f"pid {os.getpid()} on {socket.gethostname()}"
        assert f"run root {storage.normalize(place)} is in use by {owner}" in message
        assert "`burnqed iterate --iter 0`" in message and "\n" not in message
        assert not first.lost
    assert not (tmp_path / "run" / LEASE_NAME).exists()  # released
    with hold_lease(store, place, what="run root", command="again"):
        pass


def test_a_dead_owners_lease_is_taken_over_with_a_warning(tmp_path: Path, store: Store,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "run").mkdir()
    dead = _dead_pid()
    (tmp_path / "run" / LEASE_NAME).write_text(_owner(pid=dead, token="old").model_dump_json())
    with caplog.at_level(logging.WARNING, "burnqed.storage.place_lease"), hold_lease(store, str(tmp_path / "run"),
                                                                        what="run root", command="second") as lease:
        held = json.loads((tmp_path / "run" / LEASE_NAME).read_text())
        assert held["token"] == lease.owner.token != "old"
    assert f"from pid {dead} on {socket.gethostname()}" in caplog.text and "no longer running" in caplog.text


def test_staleness_is_a_dead_pid_here_a_reused_pid_or_an_old_lease() -> None:
    assert stale_reason(_owner(), age=0, expiry_s=60) is None  # this process, fresh
    assert "no longer running" in (stale_reason(_owner(pid=_dead_pid()), age=0, expiry_s=60) or "")
    assert "another process" in (stale_reason(_owner(pid_started=1.0), age=0, expiry_s=60) or "")
    elsewhere = _owner(host="other-host", pid=_dead_pid())  # a pid on another host says nothing here
    assert stale_reason(elsewhere, age=0, expiry_s=60) is None
    assert stale_reason(elsewhere, age=90, expiry_s=60) == (
        "it was last renewed 90s ago by the storage's clock (expiry 60s)")
    assert "last renewed" in (stale_reason(_owner(), age=90, expiry_s=60) or "")  # alive here, but silent
    # the owner's own clock plays no part: a heartbeat an hour behind or ahead changes nothing
    for skew in (-3600.0, 3600.0):
        skewed = _owner(host="other-host", heartbeat=time.time() + skew)
        assert stale_reason(skewed, age=5, expiry_s=60) is None
        assert stale_reason(skewed, age=61, expiry_s=60) is not None


def test_the_heartbeat_renews_the_lease_and_notices_a_takeover(tmp_path: Path, store: Store) -> None:
    path = tmp_path / "out" / LEASE_NAME
    with hold_lease(store, str(tmp_path / "out"), what="search output", command="c", heartbeat_s=0.05) as lease:
        first = json.loads(path.read_text())["heartbeat"]
        deadline = time.monotonic() + 10
        while json.loads(path.read_text())["heartbeat"] == first:
            assert time.monotonic() < deadline, "no heartbeat"
            time.sleep(0.02)
        path.write_text(_owner(token="thief").model_dump_json())  # another writer took it over
        while not lease.lost:
            assert time.monotonic() < deadline, "the lost lease went unnoticed"
            time.sleep(0.02)
    assert json.loads(path.read_text())["token"] == "thief"  # not ours: left alone on release


def test_of_two_local_writers_racing_exactly_one_wins(tmp_path: Path, store: Store) -> None:
    place = str(tmp_path / "run")
    results: list[str] = []
    start = threading.Barrier(8)

    def contender(k: int) -> None:
        lease = Lease(store, place, what="run root", command=f"c{k}")
        start.wait()
        try:
            lease.acquire()
            results.append("won")
        except LeaseHeldError:
            results.append("refused")

    threads = [threading.Thread(target=contender, args=(k,)) for k in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == ["refused"] * 7 + ["won"]


def test_s3_leases_are_conditional_puts(s3_root: str, store: Store) -> None:
    place = f"{s3_root}/run"
    with hold_lease(store, place, what="run root", command="first", heartbeat_s=0.05) as first:
        raw = store.read_bytes(f"{place}/{LEASE_NAME}")
        assert json.loads(raw)["command"] == "first"
        with pytest.raises(LeaseHeldError, match=f"in use by pid {os.getpid()}"):
            Lease(store, place, what="run root", command="second").acquire()
        time.sleep(0.3)  # heartbeats renew with If-Match on our own ETag
        assert not first.lost
        assert json.loads(store.read_bytes(f"{place}/{LEASE_NAME}"))["heartbeat"] > json.loads(raw)["heartbeat"]
    assert not store.exists(f"{place}/{LEASE_NAME}")
    # taking over an expired one (If-Match on the ETag read): test_s3_leases_age_on_s3s_clock_whatever_the_writers


def test_an_s3_takeover_race_is_won_once(s3_root: str, store: Store) -> None:
    """Two writers both read the same stale lease; the If-Match PUT lets only the first replace it."""
    place = f"{s3_root}/run"
    store.write_bytes(f"{place}/{LEASE_NAME}", _owner(host="elsewhere", heartbeat=0.0).model_dump_json().encode())
    a = Lease(store, place, what="run root", command="a")
    b = Lease(store, place, what="run root", command="b")
    _, etag = a._read_s3()
    assert etag is not None
    assert a._put_s3(IfMatch=etag)
    assert not b._put_s3(IfMatch=etag)  # the ETag it read is gone
    assert not b._put_s3(mode="create")  # and the object exists
    with pytest.raises(LeaseHeldError, match="`a`"):
        b.acquire()


@pytest.mark.slow
@pytest.mark.parametrize("command", [["search", "--output", "{place}"],
                                     ["eval", "--output", "{tmp}/r.json", "--trajectories-out", "{place}"]],
                         ids=["search-output", "eval-trajectories"])
def test_search_and_eval_refuse_a_place_another_writer_holds(tmp_path: Path, store: Store,
                                                            command: list[str]) -> None:
    place = tmp_path / "place"
    argv = [part.replace("{place}", str(place)).replace("{tmp}", str(tmp_path)) for part in command]
    with hold_lease(store, str(place), what="search output", command="burnqed search --output elsewhere"):
        refused = subprocess.run([sys.executable, "-m", "burnqed.cli", *argv], capture_output=True, text=True,
                                 timeout=120, check=False,
                                 env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.count("\n") == 1 and f"is in use by pid {os.getpid()} on " in refused.stderr
    assert "`burnqed search --output elsewhere`" in refused.stderr
    assert not list(place.glob("part-*")) and not (tmp_path / "r.json").exists()


# ------------------------------------------------------------------------------------------ clock skew between nodes


def _on_another_node(lease: Lease, clock_skew_s: float) -> Lease:
    """`lease` as a pod on another node whose wall clock is `clock_skew_s` off would hold it."""
    lease.clock = lambda: time.time() + clock_skew_s
    now = lease.clock()
    lease.owner = lease.owner.model_copy(update={"host": "node-a", "started_at": now, "heartbeat": now})
    return lease


@pytest.mark.parametrize("skew", [-600.0, 600.0])
def test_a_live_writer_on_a_skewed_node_keeps_its_local_lease(tmp_path: Path, store: Store, skew: float) -> None:
    """A writer whose clock is ten minutes behind (or ahead) of the reader's: its lease was just written, by the
    file system's clock, so it holds; judged by its heartbeat against the reader's clock it would have looked
    600 s silent and been taken over."""
    place = str(tmp_path / "run")
    writer = _on_another_node(Lease(store, place, what="run root", command="node-a", heartbeat_s=3600), skew)
    writer.acquire()
    try:
        held = json.loads((tmp_path / "run" / LEASE_NAME).read_text())
        assert abs(held["heartbeat"] - (time.time() + skew)) < 60  # it records its own clock
        with pytest.raises(LeaseHeldError, match=r"is in use by pid .* on node-a"):
            Lease(store, place, what="run root", command="node-b").acquire()
    finally:
        writer.release()
    assert not list((tmp_path / "run").glob("._lease-clock-*"))  # the clock probe leaves nothing


def test_a_dead_writer_whose_clock_ran_ahead_is_taken_over_by_the_file_systems_clock(
        tmp_path: Path, store: Store, caplog: pytest.LogCaptureFixture) -> None:
    """Its heartbeat says an hour from now, but the file system last wrote the lease 200 s ago: stale."""
    (tmp_path / "run").mkdir()
    lease_file = tmp_path / "run" / LEASE_NAME
    lease_file.write_text(_owner(host="node-a", token="old", heartbeat=time.time() + 3600).model_dump_json())
    written = lease_file.stat().st_mtime - 200
    os.utime(lease_file, (written, written))
    with caplog.at_level(logging.WARNING, "burnqed.storage.place_lease"), hold_lease(store, str(tmp_path / "run"),
                                                                        what="run root", command="node-b") as lease:
        assert json.loads(lease_file.read_text())["token"] == lease.owner.token
    assert "from pid" in caplog.text and "on node-a" in caplog.text
    assert "it was last renewed 200s ago by the storage's clock (expiry 120s)" in caplog.text


@pytest.mark.slow
def test_s3_leases_age_on_s3s_clock_whatever_the_writers(s3_root: str, store: Store,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    """On S3 a lease's age is its HEAD's Date minus its LastModified, both S3's: a live writer ten minutes behind
    holds; a dead one whose heartbeat lies an hour ahead is taken over once S3 has not seen it renewed for the
    expiry."""
    place = f"{s3_root}/run"
    writer = _on_another_node(Lease(store, place, what="run root", command="node-a", heartbeat_s=3600), -600.0)
    writer.acquire()
    try:
        with pytest.raises(LeaseHeldError, match="on node-a"):
            Lease(store, place, what="run root", command="node-b").acquire()
    finally:
        writer.release()
    store.write_bytes(f"{place}/{LEASE_NAME}", _owner(host="node-a", token="old", heartbeat=time.time() + 3600)
                      .model_dump_json().encode())
    with pytest.raises(LeaseHeldError):  # just written, by S3's clock: it holds
        Lease(store, place, what="run root", command="node-b", expiry_s=1.0).acquire()
    deadline = time.monotonic() + 10
    with caplog.at_level(logging.WARNING, "burnqed.storage.place_lease"):
        while True:
            try:
                with hold_lease(store, place, what="run root", command="node-b", expiry_s=1.0):
                    assert json.loads(store.read_bytes(f"{place}/{LEASE_NAME}"))["command"] == "node-b"
                break
            except LeaseHeldError:
                assert time.monotonic() < deadline, "the dead lease was never taken over"
                time.sleep(0.25)
    assert "on node-a" in caplog.text and "by the storage's clock (expiry 1s)" in caplog.text
