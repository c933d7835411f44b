"""The per-turn report of an agent smoke run (``scripts/*_smoke.sh`` with ``MODE=agent``), and its verdict.

Reads what the run left in its work directory: ``turns.tsv`` (per turn: start time, the client's exit
status, its final answer), the gateway's JSON log (one ``request`` line per client request: action, band,
status, tokens received and sent upstream), the relay's ``relay.ndjson`` (``scripts/smoke_relay.py``: the
``x-gateway-*`` headers of every answer, the body of every 4xx/5xx), the ledger's events
(``ledger.ndjson``, from ``/admin/costs``: one per upstream call, side calls such as ``<id>:summary:1``
included) and the mock's ``requests.json`` (every call it received). Prints one row per turn and exits 1
when a turn failed (the client exited non-zero or printed no answer, or the gateway answered a 4xx/5xx) or
when the ledger does not hold every upstream call exactly once.

    python scripts/smoke_report.py WORK_DIR
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

COUNTING = ("count_tokens", "input_tokens")
"""Endpoints that only count a prompt (not billed, nothing sent to a model)."""
BILLED_PATHS = ("/v1/responses", "/v1/messages", "/v1/chat/completions", "/v1/embeddings")


def _time(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _log_requests(path: Path) -> list[dict[str, Any]]:
    found = []
    for line in path.read_text(errors="replace").splitlines():
        if not line.startswith("{"):
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("event") == "request":
            found.append(event)
    return found


def _note(warning: str) -> str:
    """A warning without its leading band notice ("N input tokens are over the price cliff of ...", which
    every request past a line carries): what the transforms said."""
    if warning == "None":
        return ""
    first, _, rest = warning.partition("; ")
    return rest if re.match(r"\d+ input tokens ", first) else warning


def _turn_of(when: float, starts: list[float]) -> int:
    return sum(1 for start in starts if start <= when)


def main() -> int:
    work = Path(sys.argv[1])
    turns = [line.split("\t", 2) for line in (work / "turns.tsv").read_text().splitlines() if line]
    starts = [float(start) for start, _, _ in turns]
    requests = _log_requests(work / "gateway.log")
    ledger = [json.loads(line) for line in (work / "ledger.ndjson").read_text().splitlines() if line]
    seen = json.loads((work / "requests.json").read_text())["requests"]
    upstream = [r for r in seen if r["path"] in BILLED_PATHS]
    relay_path = work / "relay.ndjson"
    relayed = (
        [json.loads(line) for line in relay_path.read_text().splitlines()] if relay_path.exists() else []
    )

    failed: list[str] = []
    print(
        "turn  exit  reqs  actions                         max band      received→sent upstream  out"
        "  cheap calls  answer"
    )
    for number, (_start, status, answer) in enumerate(turns, start=1):
        ours = [r for r in requests if _turn_of(_time(r["timestamp"]), starts) == number]
        counts = [r for r in ours if str(r.get("endpoint")).endswith(COUNTING)]
        mine = [r for r in ours if r not in counts]
        events = [e for e in ledger if _turn_of(_time(e["time"]), starts) == number]
        side = [e for e in events if e.get("parent_id")]
        cost = sum(float(e.get("cost_usd") or 0) for e in events)
        forwarding = sum(float(e.get("counterfactual_usd") or 0) for e in events)
        actions = Counter(str(r.get("action")) for r in mine)
        bands = [str(r.get("band")) for r in mine]
        order = ["below_warning", "warning", "over_cliff", "over_window"]
        worst = max(bands, key=lambda b: order.index(b) if b in order else -1, default="-")
        received = sum(int(r.get("prompt_tokens") or 0) for r in mine)
        sent = sum(int(r.get("forwarded_tokens") or r.get("input_tokens") or 0) for r in mine)
        output = sum(int(r.get("output_tokens") or 0) for r in mine)
        largest = max((int(r.get("prompt_tokens") or 0) for r in mine), default=0)
        side_tokens = sum(int(e.get("input_tokens") or 0) for e in side)
        bad = [r for r in ours if int(r.get("status") or 0) >= 400]
        action_text = " ".join(f"{name} x{count}" for name, count in actions.items())
        print(
            f"{number:>4}  {status:>4}  {len(mine):>4}  {action_text:<30}  {worst:<12}  "
            f"{received:>9,}→{sent:>9,}  {output:>5}  {len(side):>3} ({side_tokens:,} in)  "
            f"{answer[:90]}"
        )
        print(
            f"      largest request {largest:,} tokens; {len(counts)} count requests; cost ${cost:.4f}, "
            f"forwarding unchanged ${forwarding:.4f}"
        )
        answers = [r for r in relayed if _turn_of(float(r["time"]), starts) == number]
        headers = Counter(
            str(r["gateway"].get("x-gateway-action", f"no-action-{r['status']}"))
            for r in answers
            if r["gateway"]
        )
        if headers:
            print(
                "      x-gateway-action: " + " ".join(f"{name} x{count}" for name, count in headers.items())
            )
        notes = Counter(_note(str(r["gateway"].get("x-gateway-warning"))) for r in answers if r["gateway"])
        for note, count in notes.items():
            if note:
                print(f"      x-gateway-warning x{count}: {note[:400]}")
        for r in answers:
            if int(r["status"]) >= 400 and r["method"] == "POST" and r["path"].startswith("/v1/"):
                body = r.get("body", "")[:600]
                failed.append(f"turn {number}: {r['path']} answered {r['status']}: {body}")
        if status != "0" or not answer.strip():
            failed.append(f"turn {number}: the client exited {status}, answer {answer[:200]!r}")
        for r in bad:
            detail = r.get("error_detail") or r.get("error")
            failed.append(
                f"turn {number}: the gateway answered {r.get('status')} ({r.get('action')}): {detail}"
            )

    refused = [r for r in seen if r["path"] in BILLED_PATHS and int(r.get("status", 200)) >= 400]
    ids = [str(e.get("id")) for e in ledger]
    print(
        f"== upstream saw {len(upstream)} billed calls ({len(refused)} refused); "
        f"the ledger holds {len(ledger)} events ({len(set(ids))} distinct ids); "
        f"the gateway logged {len(requests)} client requests"
    )
    for r in refused:
        failed.append(f"the mock refused a call to {r['path']} with {r.get('status')}")
    if len(ledger) != len(upstream) or len(set(ids)) != len(ids):
        failed.append(f"the ledger holds {len(ledger)} events for {len(upstream)} upstream calls")
    for line in failed:
        print("FAILED:", line)
    print("OK" if not failed else "FAILED")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
