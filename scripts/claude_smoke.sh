#!/usr/bin/env bash
# On-demand smoke test with a real agent (NOT run by ./bin/test): Claude Code, speaking the Anthropic
# Messages API, through a gateway to the mock upstream (tests/mock/anthropic.py); checks that the mock
# refused none of the calls and that the gateway's ledger recorded every one of them exactly once.
#
#   scripts/claude_smoke.sh            # needs npm (the npm registry) and the project's .venv
#   TURNS=3 KEEP=1 scripts/claude_smoke.sh   # KEEP=1 leaves the temp dir (logs, claude output) behind
set -euo pipefail

# shellcheck source=scripts/smoke_common.sh
source "$(dirname "$0")/smoke_common.sh"

echo "== installing @anthropic-ai/claude-code into $WORK/npm"
npm install --silent --no-audit --no-fund --prefix "$WORK/npm" @anthropic-ai/claude-code >/dev/null
CLAUDE="$WORK/npm/node_modules/.bin/claude"
"$CLAUDE" --version

MOCK_PORT="$(free_port)"; GW_PORT="$(free_port)"
export SMOKE_TENANT_KEY="sk-smoke-$RANDOM$RANDOM"
TENANT="smoke-$RANDOM$RANDOM"
(cd "$ROOT" && exec "$PY" -m tests.mock.upstream --port "$MOCK_PORT") >"$WORK/mock.log" 2>&1 &
PIDS+=($!)
wait_up "http://127.0.0.1:$MOCK_PORT/v1/models"

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

# Claude Code's own state stays in the temp dir; the gateway is its API, the tenant key its API key.
mkdir -p "$WORK/home" "$WORK/project"
export HOME="$WORK/home" CLAUDE_CONFIG_DIR="$WORK/home/.claude"
export ANTHROPIC_BASE_URL="http://127.0.0.1:$GW_PORT" ANTHROPIC_API_KEY="$SMOKE_TENANT_KEY"
export ANTHROPIC_MODEL=claude-sonnet-4-5 ANTHROPIC_DEFAULT_SONNET_MODEL=claude-sonnet-4-5
export ANTHROPIC_SMALL_FAST_MODEL=claude-haiku-4-5 ANTHROPIC_DEFAULT_HAIKU_MODEL=claude-haiku-4-5
export DISABLE_AUTOUPDATER=1 CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY=1

cd "$WORK/project"
for turn in $(seq 1 "$TURNS"); do
  echo "== claude turn $turn"
  if [ "$turn" = 1 ]; then args=(-p "Turn $turn: say hello"); else args=(-p --continue "Turn $turn: and again"); fi
  "$CLAUDE" "${args[@]}" --output-format json --max-turns 4 </dev/null >"$WORK/claude-$turn.json" \
    2>"$WORK/claude-$turn.err" || { echo "claude exited with $? (see $WORK/claude-$turn.err)"; tail -5 "$WORK/claude-$turn.err"; }
  "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print("  result:", d.get("subtype"), "|", str(d.get("result"))[:100])' \
    "$WORK/claude-$turn.json" || { echo "  no JSON result:"; head -c 400 "$WORK/claude-$turn.json"; echo; }
done
cd "$ROOT"

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
