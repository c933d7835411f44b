#!/usr/bin/env bash
# On-demand smoke test with a real agent (NOT run by ./bin/test): Codex CLI, speaking the Responses API
# over HTTP, through a gateway to the mock upstream; checks that the gateway's ledger saw every turn.
#
#   scripts/codex_smoke.sh            # needs npm (the npm registry) and the project's .venv
#   TURNS=3 KEEP=1 scripts/codex_smoke.sh   # KEEP=1 leaves the temp dir (logs, codex output) behind
#   MODE=agent scripts/codex_smoke.sh # long turns: the mock plays an agent that runs `cat` on CALLS (5)
#                                     # files of 10-20K tokens a turn, for TURNS (6) turns, past the
#                                     # warning line (250K) and the cliff (272K) of gpt-5.4; prints the
#                                     # gateway's actions and tokens per turn, fails on any failed turn
#   NPM_PREFIX=/tmp/npm ...           # install (or reuse) the CLI there instead of the temp dir
set -euo pipefail

# shellcheck source=scripts/smoke_common.sh
source "$(dirname "$0")/smoke_common.sh"

echo "== installing @openai/codex into $NPM_PREFIX"
npm install --silent --no-audit --no-fund --prefix "$NPM_PREFIX" @openai/codex >/dev/null
CODEX="$NPM_PREFIX/node_modules/.bin/codex"
"$CODEX" --version

MOCK_PORT="$(free_port)"; GW_PORT="$(free_port)"
export SMOKE_TENANT_KEY="sk-smoke-$RANDOM$RANDOM"
start_mock

# gpt-5.4 as priced by OpenAI: the whole request costs 2x input and 1.5x output above 272K input tokens,
# which puts the gateway's cliff at 272,000 and its warning line at 250,000 (the shipped policies).
cat >"$WORK/gateway.yaml" <<YAML
providers:
  mock: {base_url: "http://127.0.0.1:$MOCK_PORT/v1", api_key: sk-upstream}
models:
  gpt-5.4:
    provider: mock
    context_window: 1050000
    max_output_tokens: 128000
    pricing:
      input: "2.50"
      cached_input: "0.25"
      output: "15.00"
      tiers: [{above_input_tokens: 272000, input_multiplier: 2, cached_input_multiplier: 2, output_multiplier: 1.5}]
tenants:
  smoke: {keys: ["\${SMOKE_TENANT_KEY}"]}
YAML
(cd "$ROOT" && GATEWAY_CONFIG="$WORK/gateway.yaml" GATEWAY_PORT="$GW_PORT" GATEWAY_DATA_DIR="$WORK/data" \
  GATEWAY_ADMIN_KEY=admin-smoke GATEWAY_LOG_FORMAT=json exec "$ROOT/.venv/bin/gateway" serve) \
  >"$WORK/gateway.log" 2>&1 &
PIDS+=($!)
wait_up "http://127.0.0.1:$GW_PORT/healthz"
start_relay

# Codex as it runs gpt-5.4: its model catalog gains a gpt-5.4 entry (gpt-5.5's, with gpt-5.4's 1.05M window;
# this Codex's bundled catalog has no gpt-5.4 and would fall back to 272K, compacting itself near 258K), so
# Codex compacts only near 1M and the gateway is the one that compacts. Tool outputs stay whole in its
# history (up to 30K tokens; its default keeps 10K).
export CODEX_HOME="$WORK/codex"
mkdir -p "$CODEX_HOME" "$WORK/project"
"$CODEX" debug models --bundled 2>/dev/null | "$PY" -c 'import json, sys
catalog = json.load(sys.stdin)
entry = next(model for model in catalog["models"] if model["slug"] == "gpt-5.5")
entry = {**entry, "slug": "gpt-5.4", "display_name": "GPT-5.4", "upgrade": None, "context_window": 1050000,
         "max_context_window": 1050000}
catalog["models"] = [model for model in catalog["models"] if model["slug"] != "gpt-5.4"] + [entry]
json.dump(catalog, open(sys.argv[1], "w"))' "$WORK/codex-models.json"
cat >"$CODEX_HOME/config.toml" <<TOML
model = "gpt-5.4"
model_provider = "gateway"
model_catalog_json = "$WORK/codex-models.json"
tool_output_token_limit = 30000

[model_providers.gateway]
name = "LLM cost gateway"
base_url = "http://127.0.0.1:$CLIENT_PORT/v1"
env_key = "SMOKE_TENANT_KEY"
wire_api = "responses"
supports_websockets = false
TOML

STARTED=$SECONDS
for turn in $(seq 1 "$TURNS"); do
  echo "== codex turn $turn"
  prompt="$(turn_prompt "$turn")"
  if [ "$turn" = 1 ]; then
    args=(exec --json --skip-git-repo-check -C "$WORK/project" "$prompt")
  else
    args=(exec --json --skip-git-repo-check -C "$WORK/project" resume --last "$prompt")
  fi
  start="$(date +%s.%N)"; status=0
  "$CODEX" "${args[@]}" </dev/null >"$WORK/codex-$turn.jsonl" 2>"$WORK/codex-$turn.err" || {
    status=$?; echo "codex exited with $status (see $WORK/codex-$turn.err)"; tail -5 "$WORK/codex-$turn.err"; }
  grep -c '"type"' "$WORK/codex-$turn.jsonl" | xargs echo "  events:"
  if [ "$MODE" = agent ]; then
    answer="$("$PY" -c 'import json,sys
events = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
items = [e.get("item") or {} for e in events]
said = [i.get("text", "") for i in items if i.get("type") == "agent_message"]
errors = [e.get("message", "") for e in events if e.get("type") == "error"]
print(said[-1] if said else "NO ANSWER; errors: " + " | ".join(errors))' "$WORK/codex-$turn.jsonl")"
    [[ "$answer" == "NO ANSWER"* ]] && [ "$status" = 0 ] && status=no-answer
    echo "  answer: ${answer:0:160} ($((SECONDS - STARTED))s so far)"
    record_turn "$start" "$status" "$answer"
  fi
done

if [ "$MODE" = agent ]; then
  agent_report smoke
  exit $?
fi

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
