#!/usr/bin/env bash
# On-demand smoke test with a real agent (NOT run by ./bin/test): Codex CLI, speaking the Responses API
# over HTTP, through a gateway to the mock upstream; checks that the gateway's ledger saw every turn.
#
#   scripts/codex_smoke.sh            # needs npm (the npm registry) and the project's .venv
#   TURNS=3 KEEP=1 scripts/codex_smoke.sh   # KEEP=1 leaves the temp dir (logs, codex output) behind
set -euo pipefail

# shellcheck source=scripts/smoke_common.sh
source "$(dirname "$0")/smoke_common.sh"

echo "== installing @openai/codex into $WORK/npm"
npm install --silent --no-audit --no-fund --prefix "$WORK/npm" @openai/codex >/dev/null
CODEX="$WORK/npm/node_modules/.bin/codex"
"$CODEX" --version

MOCK_PORT="$(free_port)"; GW_PORT="$(free_port)"
export SMOKE_TENANT_KEY="sk-smoke-$RANDOM$RANDOM"
(cd "$ROOT" && exec "$PY" -m tests.mock.upstream --port "$MOCK_PORT") >"$WORK/mock.log" 2>&1 &
PIDS+=($!)
wait_up "http://127.0.0.1:$MOCK_PORT/v1/models"

cat >"$WORK/gateway.yaml" <<YAML
providers:
  mock: {base_url: "http://127.0.0.1:$MOCK_PORT/v1", api_key: sk-upstream}
models:
  gpt-5.4:
    provider: mock
    context_window: 1050000
    pricing: {input: "2.50", cached_input: "0.25", output: "15.00"}
tenants:
  smoke: {keys: ["\${SMOKE_TENANT_KEY}"]}
YAML
(cd "$ROOT" && GATEWAY_CONFIG="$WORK/gateway.yaml" GATEWAY_PORT="$GW_PORT" GATEWAY_DATA_DIR="$WORK/data" \
  GATEWAY_LOG_FORMAT=json exec "$ROOT/.venv/bin/gateway" serve) >"$WORK/gateway.log" 2>&1 &
PIDS+=($!)
wait_up "http://127.0.0.1:$GW_PORT/healthz"

export CODEX_HOME="$WORK/codex"
mkdir -p "$CODEX_HOME" "$WORK/project"
cat >"$CODEX_HOME/config.toml" <<TOML
model = "gpt-5.4"
model_provider = "gateway"

[model_providers.gateway]
name = "LLM cost gateway"
base_url = "http://127.0.0.1:$GW_PORT/v1"
env_key = "SMOKE_TENANT_KEY"
wire_api = "responses"
supports_websockets = false
TOML

for turn in $(seq 1 "$TURNS"); do
  echo "== codex turn $turn"
  if [ "$turn" = 1 ]; then
    args=(exec --json --skip-git-repo-check -C "$WORK/project" "Turn $turn: say hello")
  else
    args=(exec --json --skip-git-repo-check -C "$WORK/project" resume --last "Turn $turn: and again")
  fi
  "$CODEX" "${args[@]}" </dev/null >"$WORK/codex-$turn.jsonl" 2>"$WORK/codex-$turn.err" || {
    echo "codex exited with $? (see $WORK/codex-$turn.err)"; tail -5 "$WORK/codex-$turn.err"; }
  grep -c '"type"' "$WORK/codex-$turn.jsonl" | xargs echo "  events:"
done

SEEN="$(curl -fsS "http://127.0.0.1:$MOCK_PORT/_requests" | "$PY" -c \
  'import json,sys; print(sum(1 for r in json.load(sys.stdin)["requests"] if r["path"] == "/v1/responses"))')"
for _ in $(seq 1 50); do
  LEDGER="$(curl -fsS -H "authorization: Bearer $SMOKE_TENANT_KEY" "http://127.0.0.1:$GW_PORT/v1/gateway/usage" \
    | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["day"]["requests"])')"
  [ "$LEDGER" -ge "$SEEN" ] && break
  sleep 0.2
done
echo "== upstream saw $SEEN Responses calls; the ledger recorded $LEDGER requests"
if [ "$SEEN" -ge "$TURNS" ] && [ "$LEDGER" -ge "$SEEN" ]; then echo "OK"; else echo "FAILED"; exit 1; fi
