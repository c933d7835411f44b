"""The spool: segment files, their locks across processes, and replay bookkeeping."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

from gateway.ledger.spool import REJECTED, Spool

HOLD_A_SEGMENT = """
import sys, time
from pathlib import Path
from gateway.ledger.spool import Spool
spool = Spool(Path(sys.argv[1]))
spool.append([b'{"held": "by a live process"}'])
print("ready", flush=True)
time.sleep(60)
"""


def lines_of(spool: Spool) -> list[bytes]:
    return [line for segment in spool.seal() for lines in spool.read(segment, batch=3) for line in lines]


def test_spool_appends_lines_in_order_and_reads_them_in_batches(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    assert not spool.pending
    spool.append([b"1", b"2"])
    spool.append([b"3", b"4", b"5"], sync=False)
    assert spool.pending and spool.unsynced
    spool.sync()
    segments = spool.seal()
    assert len(segments) == 1
    assert list(spool.read(segments[0], batch=2)) == [[b"1", b"2"], [b"3", b"4"], [b"5"]]


def test_spool_seal_starts_a_new_segment_and_discard_deletes(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.append([b"old"])
    [sealed] = spool.seal()
    spool.append([b"new"])  # arrives while the sealed segment is replayed
    spool.discard(sealed)
    assert not sealed.path.exists()
    assert lines_of(spool) == [b"new"]


def test_spool_close_keeps_unreplayed_segments_and_drops_empty_ones(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.append([b"kept"])
    spool.close()
    survivor = Spool(tmp_path)
    assert survivor.claim_orphans() == 1
    assert lines_of(survivor) == [b"kept"]
    for segment in survivor.seal():
        survivor.discard(segment)
    survivor.close()
    assert list(tmp_path.glob("*.jsonl")) == []


def test_spool_does_not_claim_a_segment_a_live_spool_holds(tmp_path: Path) -> None:
    live = Spool(tmp_path)
    live.append([b"in use"])
    other = Spool(tmp_path)
    assert other.claim_orphans() == 0
    live.close()
    assert other.claim_orphans() == 1


def test_spool_does_not_claim_a_live_process_segment_but_takes_it_after_death(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_A_SEGMENT, str(tmp_path)], stdout=subprocess.PIPE, cwd=Path.cwd()
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"ready"
        assert Spool(tmp_path).claim_orphans() == 0
    finally:
        holder.kill()
        holder.wait()
    heir = Spool(tmp_path)
    assert heir.claim_orphans() == 1
    assert orjson.loads(lines_of(heir)[0]) == {"held": "by a live process"}


def test_spool_reject_records_line_and_reason(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.reject(b'{"id": "x"', "unreadable spool line")
    [record] = (tmp_path / REJECTED).read_bytes().splitlines()
    assert orjson.loads(record) == {"reason": "unreadable spool line", "line": '{"id": "x"'}
    assert Spool(tmp_path).claim_orphans() == 0  # the rejected file is never replayed
