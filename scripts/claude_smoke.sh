#!/usr/bin/env bash
# On-demand smoke test with a real agent (NOT run by ./bin/test): Claude Code, speaking the Anthropic
# Messages API, through a gateway to the mock upstream (tests/mock/anthropic.py); checks that the mock
# refused none of the calls and that the gateway's ledger recorded every one of them exactly once.
#
#   scripts/claude_smoke.sh            # needs npm (the npm registry) and the project's .venv
#   TURNS=3 KEEP=1 scripts/claude_smoke.sh   # KEEP=1 leaves the temp dir (logs, claude output) behind
#   MODE=agent scripts/claude_smoke.sh # long turns: the mock plays an agent that Reads CALLS (5) files of
#                                      # 10-20K tokens a turn, for TURNS (6) turns, past the warning line
#                                      # and the cliff (200K, its price tier) of claude-sonnet-4-5; prints
#                                      # the gateway's actions and tokens per turn, fails on a failed turn
#   NPM_PREFIX=/tmp/npm ...            # install (or reuse) the CLI there instead of the temp dir
set -euo pipefail

# shellcheck source=scripts/smoke_common.sh
source "$(dirname "$0")/smoke_common.sh"

echo "== installing @anthropic-ai/claude-code into $NPM_PREFIX"
npm install --silent --no-audit --no-fund --prefix "$NPM_PREFIX" @anthropic-ai/claude-code >/dev/null
CLAUDE="$NPM_PREFIX/node_modules/.bin/claude"
"$CLAUDE" --version

MOCK_PORT="$(free_port)"; GW_PORT="$(free_port)"
export SMOKE_TENANT_KEY="sk-smoke-$RANDOM$RANDOM"
TENANT="smoke-$RANDOM$RANDOM"
start_mock

cat >"$WORK/gateway.yaml" <<YAML
providers:
  anthropic:
    base_url: "http://127.0.0.1:$MOCK_PORT/v1"
    api_key: sk-upstream
    kind: anthropic
    messages_count_tokens: true
    prompt_cache: {min_prefix_tokens: 1024, granularity: 1, retention_seconds: 300, extended_retention_seconds: 3600, write_multiplier: 1.25}
models:
  claude-sonnet-4-5:
    provider: anthropic
    context_window: 1000000
    max_output_tokens: 64000
    pricing:
      input: "3.00"
      cached_input: "0.30"
      output: "15.00"
      tiers: [{above_input_tokens: 200000, input_multiplier: 2, cached_input_multiplier: 2, output_multiplier: 1.5}]
  claude-haiku-4-5:
    provider: anthropic
    context_window: 200000
    max_output_tokens: 64000
    pricing: {input: "1.00", cached_input: "0.10", output: "5.00"}
tenants:
  $TENANT: {keys: ["\${SMOKE_TENANT_KEY}"]}
YAML
(cd "$ROOT" && GATEWAY_CONFIG="$WORK/gateway.yaml" GATEWAY_PORT="$GW_PORT" GATEWAY_DATA_DIR="$WORK/data" \
  GATEWAY_ADMIN_KEY=admin-smoke GATEWAY_LOG_FORMAT=json exec "$ROOT/.venv/bin/gateway" serve) \
  >"$WORK/gateway.log" 2>&1 &
PIDS+=($!)
wait_up "http://127.0.0.1:$GW_PORT/healthz"
start_relay

# Claude Code's own state stays in the temp dir; the gateway is its API, the tenant key its API key.
mkdir -p "$WORK/home" "$WORK/project"
export HOME="$WORK/home" CLAUDE_CONFIG_DIR="$WORK/home/.claude"
export ANTHROPIC_BASE_URL="http://127.0.0.1:$CLIENT_PORT" ANTHROPIC_API_KEY="$SMOKE_TENANT_KEY"
export ANTHROPIC_MODEL=claude-sonnet-4-5 ANTHROPIC_DEFAULT_SONNET_MODEL=claude-sonnet-4-5
if [ "$MODE" = agent ]; then
  # The 1M-context variant (Claude Code sends claude-sonnet-4-5 with the context-1m beta header): its own
  # auto-compaction waits for a 1M window, so the gateway is the one that compacts here.
  export ANTHROPIC_MODEL="claude-sonnet-4-5[1m]" ANTHROPIC_DEFAULT_SONNET_MODEL="claude-sonnet-4-5[1m]"
fi
export ANTHROPIC_SMALL_FAST_MODEL=claude-haiku-4-5 ANTHROPIC_DEFAULT_HAIKU_MODEL=claude-haiku-4-5
export DISABLE_AUTOUPDATER=1 CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY=1

cd "$WORK/project"
STARTED=$SECONDS
for turn in $(seq 1 "$TURNS"); do
  echo "== claude turn $turn"
  prompt="$(turn_prompt "$turn")"
  if [ "$turn" = 1 ]; then args=(-p "$prompt"); else args=(-p --continue "$prompt"); fi
  if [ "$MODE" = agent ]; then args+=(--allowedTools "Read" --max-turns $((3 * CALLS + 2))); else args+=(--max-turns 4); fi
  start="$(date +%s.%N)"; status=0
  "$CLAUDE" "${args[@]}" --output-format json </dev/null >"$WORK/claude-$turn.json" \
    2>"$WORK/claude-$turn.err" || { status=$?; echo "claude exited with $status (see $WORK/claude-$turn.err)"; tail -5 "$WORK/claude-$turn.err"; }
  "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print("  result:", d.get("subtype"), "|", str(d.get("result"))[:160])' \
    "$WORK/claude-$turn.json" || { echo "  no JSON result:"; head -c 400 "$WORK/claude-$turn.json"; echo; }
  if [ "$MODE" = agent ]; then
    answer="$("$PY" -c 'import json,sys
try:
    d = json.load(open(sys.argv[1]))
except ValueError:
    d = {"result": "NO ANSWER: " + open(sys.argv[1]).read()[:300]}
ok = d.get("subtype") == "success" and not d.get("is_error")
print(d.get("result") if ok else "NO ANSWER: %s: %s" % (d.get("subtype"), d.get("result")))' "$WORK/claude-$turn.json")"
    [[ "$answer" == "NO ANSWER"* ]] && [ "$status" = 0 ] && status=no-answer
    echo "  ($((SECONDS - STARTED))s so far)"
    record_turn "$start" "$status" "$answer"
  fi
done
cd "$ROOT"

if [ "$MODE" = agent ]; then
  agent_report "$TENANT"
  exit $?
fi

curl -fsS "http://127.0.0.1:$MOCK_PORT/_requests" >"$WORK/requests.json"
read -r CALLS REFUSED COUNTS <<<"$("$PY" - "$WORK/requests.json" <<'PY'
import json, sys
seen = json.load(open(sys.argv[1]))["requests"]
calls = [r for r in seen if r["path"] == "/v1/messages"]
counts = [r for r in seen if r["path"] == "/v1/messages/count_tokens"]
refused = [r for r in calls + counts if r.get("status") != 200]
for r in refused:
    print(f"refused {r['status']}: {r['path']}", file=sys.stderr)
print(len(calls), len(refused), len(counts))
PY
)"
for _ in $(seq 1 50); do
  curl -fsS -H "authorization: Bearer admin-smoke" \
    "http://127.0.0.1:$GW_PORT/admin/costs?tenant=$TENANT&format=ndjson" >"$WORK/ledger.ndjson"
  LEDGER="$(grep -c . "$WORK/ledger.ndjson" || true)"
  [ "$LEDGER" -ge "$CALLS" ] && break
  sleep 0.2
done
UNIQUE="$(cut -d, -f1 "$WORK/ledger.ndjson" | sort -u | grep -c . || true)"
NON_200="$(grep -cv '"status":200' "$WORK/ledger.ndjson" || true)"
BETA="$("$PY" -c 'import json,sys; print(sum("anthropic-beta" in r["headers"] for r in json.load(open(sys.argv[1]))["requests"] if r["path"] == "/v1/messages"))' "$WORK/requests.json")"
LOGGED="$(grep -c '"endpoint": *"messages"' "$WORK/gateway.log" || true)"
echo "== upstream saw $CALLS Messages calls ($BETA with anthropic-beta) and $COUNTS count_tokens calls, refused $REFUSED"
echo "== the ledger recorded $LEDGER events ($UNIQUE distinct ids, $NON_200 not 200); the gateway logged $LOGGED Messages requests"
if [ "$CALLS" -ge "$TURNS" ] && [ "$REFUSED" = 0 ] && [ "$LEDGER" = "$CALLS" ] && [ "$UNIQUE" = "$LEDGER" ] \
  && [ "$NON_200" = 0 ]; then
  echo "OK"
else
  echo "FAILED"; exit 1
fi
