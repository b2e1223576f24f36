"""One writer per place (burnqed.lease): a second writer refuses naming the first; a stale lease (dead owner, expired
heartbeat) is taken over with a warning; locally and on S3 (moto honours If-None-Match and If-Match on PutObject)."""

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
from burnqed.lease import LEASE_NAME, Lease, LeaseHeldError, LeaseOwner, hold_lease, stale_reason
from burnqed.storage import Store


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
    with caplog.at_level(logging.WARNING, "burnqed.lease"), hold_lease(store, str(tmp_path / "run"),
                                                                        what="run root", command="second") as lease:
        held = json.loads((tmp_path / "run" / LEASE_NAME).read_text())
        assert held["token"] == lease.owner.token != "old"
    assert f"from pid {dead} on {socket.gethostname()}" in caplog.text and "no longer running" in caplog.text


def test_staleness_is_a_dead_pid_here_a_reused_pid_or_an_old_heartbeat() -> None:
    now = time.time()
    assert stale_reason(_owner(), now=now, expiry_s=60) is None  # this process, fresh
    assert "no longer running" in (stale_reason(_owner(pid=_dead_pid()), now=now, expiry_s=60) or "")
    assert "another process" in (stale_reason(_owner(pid_started=1.0), now=now, expiry_s=60) or "")
    elsewhere = _owner(host="other-host", pid=_dead_pid(), heartbeat=now)  # a pid on another host says nothing here
    assert stale_reason(elsewhere, now=now, expiry_s=60) is None
    assert "heartbeat is 90s old" in (stale_reason(elsewhere, now=now + 90, expiry_s=60) or "")
    assert "heartbeat" in (stale_reason(_owner(), now=now + 90, expiry_s=60) or "")  # alive here, but silent


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


def test_s3_leases_are_conditional_puts(s3_root: str, store: Store, caplog: pytest.LogCaptureFixture) -> None:
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
    # a lease whose heartbeat expired, held on another host: taken over (If-Match on the ETag read)
    store.write_bytes(f"{place}/{LEASE_NAME}", _owner(host="elsewhere", heartbeat=time.time() - 600).model_dump_json()
                      .encode())
    with caplog.at_level(logging.WARNING, "burnqed.lease"), hold_lease(store, place, what="run root", command="3"):
        assert json.loads(store.read_bytes(f"{place}/{LEASE_NAME}"))["command"] == "3"
    assert "from pid" in caplog.text and "on elsewhere" in caplog.text and "heartbeat is" in caplog.text


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
                                     ["eval", "--output", "{tmp}/r.json", "--trajectories", "{place}"]],
                         ids=["search-output", "eval-trajectories"])
def test_search_and_eval_refuse_a_place_another_writer_holds(tmp_path: Path, store: Store,
                                                            command: list[str]) -> None:
    place = tmp_path / "place"
    argv = [part.replace("{place}", str(place)).replace("{tmp}", str(tmp_path)) for part in command]
    with hold_lease(store, str(place), what="search output", command="burnqed search --output elsewhere"):
        refused = subprocess.run([sys.executable, "-m", "burnqed.cli", *argv], capture_output=True, text=True,
                                 timeout=120, check=False,
                                 env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.count("\n") == 1 and f"is in use by pid {os.getpid()} on " in refused.stderr
    assert "`burnqed search --output elsewhere`" in refused.stderr
    assert not list(place.glob("part-*")) and not (tmp_path / "r.json").exists()
