# Sourced by the on-demand agent smoke scripts (scripts/*_smoke.sh): the project's paths, a temp dir
# removed at exit (KEEP=1 leaves it), background processes killed at exit, free ports, waiting for a URL,
# and the agent mode's functions (MODE=agent: long turns of file reads that make the gateway compact).
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="$ROOT/.venv/bin/python"
MODE="${MODE:-short}"
if [ "$MODE" = agent ]; then TURNS="${TURNS:-6}"; else TURNS="${TURNS:-3}"; fi
CALLS="${CALLS:-5}"
WORK="$(mktemp -d)"
NPM_PREFIX="${NPM_PREFIX:-$WORK/npm}"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ "${KEEP:-0}" = "1" ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_up() {
  for _ in $(seq 1 200); do curl -fsS -o /dev/null "$1" 2>/dev/null && return 0; sleep 0.1; done
  echo "not up: $1" >&2; return 1
}

# The mock upstream on MOCK_PORT; in agent mode it plays a scripted agent over a generated project
# ($WORK/project: seeded files of 10-20K tokens) that reads CALLS files a turn (tests/mock/agent.py).
start_mock() {
  local agent=()
  if [ "$MODE" = agent ]; then
    (cd "$ROOT" && "$PY" -m tests.mock.agent "$WORK/project" --files "${FILES:-24}" --seed "${SEED:-7}")
    agent=(--agent-project "$WORK/project" --agent-calls "$CALLS")
  fi
  (cd "$ROOT" && exec "$PY" -m tests.mock.upstream --port "$MOCK_PORT" "${agent[@]}") >"$WORK/mock.log" 2>&1 &
  PIDS+=($!)
  wait_up "http://127.0.0.1:$MOCK_PORT/v1/models"
}

# Agent mode: the client talks to a recording relay (scripts/smoke_relay.py) in front of the gateway, which
# keeps every answer's x-gateway-* headers and the body of every 4xx/5xx in $WORK/relay.ndjson (clients
# print their own words for a failure). CLIENT_PORT is where the client connects.
start_relay() {
  CLIENT_PORT="$GW_PORT"
  [ "$MODE" = agent ] || return 0
  CLIENT_PORT="$(free_port)"
  "$PY" "$ROOT/scripts/smoke_relay.py" --port "$CLIENT_PORT" --upstream "http://127.0.0.1:$GW_PORT" \
    --log "$WORK/relay.ndjson" >"$WORK/relay.log" 2>&1 &
  PIDS+=($!)
  wait_up "http://127.0.0.1:$CLIENT_PORT/healthz"
}

# The prompt of turn $1 (the mock's agent counts turns by the "Turn N" it carries).
turn_prompt() {
  if [ "$MODE" = agent ]; then
    echo "Turn $1: read the next $CALLS files of the project one by one and tell me what they say."
  elif [ "$1" = 1 ]; then echo "Turn 1: say hello"; else echo "Turn $1: and again"; fi
}

# Agent mode: record turn $1's start time, the client's exit status $2 and its final answer $3.
record_turn() { printf '%s\t%s\t%s\n' "$1" "$2" "$(echo "$3" | tr '\t\n' '  ')" >>"$WORK/turns.tsv"; }

# Agent mode: the per-turn report and verdict (scripts/smoke_report.py) from the mock's requests, the
# ledger (admin key admin-smoke, tenant $1) and the gateway's JSON log.
agent_report() {
  curl -fsS "http://127.0.0.1:$MOCK_PORT/_requests" >"$WORK/requests.json"
  local calls
  calls="$("$PY" -c 'import json,sys; print(sum(r["path"] in ("/v1/responses", "/v1/messages",
    "/v1/chat/completions", "/v1/embeddings") for r in json.load(open(sys.argv[1]))["requests"]))' "$WORK/requests.json")"
  for _ in $(seq 1 50); do  # the ledger writes in batches
    curl -fsS -H "authorization: Bearer admin-smoke" \
      "http://127.0.0.1:$GW_PORT/admin/costs?tenant=$1&format=ndjson" >"$WORK/ledger.ndjson"
    [ "$(grep -c . "$WORK/ledger.ndjson" || true)" -ge "$calls" ] && break
    sleep 0.2
  done
  "$PY" "$ROOT/scripts/smoke_report.py" "$WORK"
}
