"""The Lua scripts that keep the ledger exact: each runs atomically inside Redis, on one tenant's keys.

Scripts are addressed by their SHA-1 (EVALSHA); a server that does not know one (restarted, flushed)
answers NOSCRIPT, and the caller loads it and tries again. Amounts arrive as decimal strings; sums made
in Lua are exact below 2**53 nano-dollars (about $9M), which the caller guarantees per script call, and
are written back with ``%d`` (never in exponent form).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import NoScriptError

GIVE_BACK = """
-- Lowers the tenant's held total by a hold just removed (its HDEL answered 1, so never twice), and
-- never below zero: a total under zero would let the tenant's next requests spend past its budget.
-- A hold taken for a key with a budget of its own (field 'k' .. id: the key's id) lowers that key's
-- held total ('k:<key id>:held') too.
local function give_back(holds, id, amount)
  local minus = string.format('%d', -tonumber(amount))
  if redis.call('HINCRBY', holds, 'total', minus) < 0 then
    redis.call('HSET', holds, 'total', 0)
  end
  local key = redis.call('HGET', holds, 'k' .. id)
  if key then
    redis.call('HDEL', holds, 'k' .. id)
    if redis.call('HINCRBY', holds, 'k:' .. key .. ':held', minus) <= 0 then
      redis.call('HDEL', holds, 'k:' .. key .. ':held')
    end
  end
end
"""

APPLY_EVENTS = (
    GIVE_BACK
    + """
-- Applies a chunk of one tenant's events. Per event: the dedup marker (SADD), then, only if it is new,
-- the stream entry and its time index; counters are summed in Lua and added once per key at the end.
-- KEYS: 1 holds hash, 2 holds expiry, then 4 per month (seen set, stream, time index, monthly hash),
--       then 1 per day (daily hash).
-- ARGV: 1 number of months M, 2..M+1 each month's expiry (unix s), then 3 per event:
--       id, meta "<month#> <day#> <time_ms:013d> <cost> <saving> <in> <cached> <out> <reasoning> <key>
--       <model>" (key: a managed key's id, whose cost is counted on its own as 'k:<key>:cost', else '-'),
--       event JSON.
-- Returns one 1 (applied) or 0 (already applied) per event. Keys of the wrong type (foreign data)
-- fail the call before anything is written.
local months = tonumber(ARGV[1])
local day_base = 2 + 4 * months
local types = {'hash', 'zset'}
for m = 1, months do
  for _, kind in ipairs({'set', 'stream', 'zset', 'hash'}) do types[#types + 1] = kind end
end
for k = 1, #KEYS do
  local found = redis.call('TYPE', KEYS[k])['ok']
  if found ~= 'none' and found ~= (types[k] or 'hash') then
    return redis.error_reply('WRONGTYPE ledger key ' .. KEYS[k] .. ' holds a ' .. found)
  end
end
local names = {'requests', 'cost', 'saving', 'input_tokens', 'cached_tokens', 'output_tokens',
               'reasoning_tokens'}
local ids, results = {}, {}
for e = months + 2, #ARGV, 3 do
  ids[#ids + 1] = 'r:' .. ARGV[e]
end
for _, id in ipairs(ids) do
  -- HDEL answers 1 only for the call that removed the hold: an id twice in a chunk gives it back once
  local amount = redis.call('HGET', KEYS[1], id)
  if amount and redis.call('HDEL', KEYS[1], id) == 1 then
    redis.call('ZREM', KEYS[2], string.sub(id, 3))
    give_back(KEYS[1], id, amount)
  end
end
-- sums per (day, model) and per month: {requests, cost, saving, input, cached, output, reasoning}
local groups, month_sums, key_sums = {}, {}, {}
for e = months + 2, #ARGV, 3 do
  local id, meta = ARGV[e], ARGV[e + 1]
  local m, d, at, cost, saving, input, cached, output, reasoning, key, model =
    string.match(meta, '^(%d+) (%d+) (%d+) (%-?%d+) (%-?%d+) (%d+) (%d+) (%d+) (%d+) (%S+) (.*)$')
  local month = 2 + 4 * (tonumber(m) - 1)
  if redis.call('SADD', KEYS[month + 1], id) == 1 then
    local sid = redis.call('XADD', KEYS[month + 2], '*', 'id', id, 'event', ARGV[e + 2])
    redis.call('ZADD', KEYS[month + 3], 0, at .. '|' .. sid)
    local group_key = d .. ' ' .. model
    local g = groups[group_key]
    if not g then
      g = {day_base + tonumber(d), model, tonumber(m), 0, 0, 0, 0, 0, 0, 0}
      groups[group_key] = g
    end
    cost, saving = tonumber(cost), tonumber(saving)
    g[4], g[5], g[6] = g[4] + 1, g[5] + cost, g[6] + saving
    g[7], g[8] = g[7] + tonumber(input), g[8] + tonumber(cached)
    g[9], g[10] = g[9] + tonumber(output), g[10] + tonumber(reasoning)
    local s = month_sums[month]
    if not s then s = {0, 0, 0, tonumber(m)}; month_sums[month] = s end
    s[1], s[2], s[3] = s[1] + 1, s[2] + cost, s[3] + saving
    if key ~= '-' then
      local field = 'k:' .. key .. ':cost'
      for _, hash in ipairs({day_base + tonumber(d), month + 4}) do
        key_sums[hash] = key_sums[hash] or {}
        key_sums[hash][field] = (key_sums[hash][field] or 0) + cost
      end
    end
    results[#results + 1] = 1
  else
    results[#results + 1] = 0
  end
end
local function hincrby(key, field, value)
  if value ~= 0 then redis.call('HINCRBY', key, field, string.format('%d', value)) end
end
local function expire_new(key, m)
  if redis.call('TTL', key) == -1 then redis.call('EXPIREAT', key, ARGV[1 + m]) end
end
local days = {}
for _, g in pairs(groups) do
  local total = days[g[1]]
  if not total then total = {0, 0, 0, 0, 0, 0, 0, g[3]}; days[g[1]] = total end
  local prefix = 'm:' .. g[2] .. ':'
  for i = 1, 7 do
    hincrby(KEYS[g[1]], prefix .. names[i], g[3 + i])
    total[i] = total[i] + g[3 + i]
  end
end
for key, total in pairs(days) do
  for i = 1, 7 do hincrby(KEYS[key], names[i], total[i]) end
  expire_new(KEYS[key], total[8])
end
for month, s in pairs(month_sums) do
  hincrby(KEYS[month + 4], 'requests', s[1])
  hincrby(KEYS[month + 4], 'cost', s[2])
  hincrby(KEYS[month + 4], 'saving', s[3])
  expire_new(KEYS[month + 4], s[4])
end
for hash, sums in pairs(key_sums) do
  for field, cost in pairs(sums) do hincrby(KEYS[hash], field, cost) end
end
for m = 1, months do
  for k = 1, 3 do expire_new(KEYS[2 + 4 * (m - 1) + k], m) end
end
return results
"""
)

RESERVE = (
    GIVE_BACK
    + """
-- KEYS: 1 holds hash, 2 holds expiry, 3 daily hash, 4 monthly hash
-- ARGV: 1 request id, 2 amount, 3 ttl ms, 4 daily limit, 5 monthly limit ('' = none), then for a key with
--       a budget of its own: 6 its id, 7 its daily limit, 8 its monthly limit ('' = none).
-- Returns {accepted (1/0), refused period or '' ('daily', 'monthly', 'key daily', 'key monthly'),
--          day spend, month spend, held before this request, and the key's day, month and held}.
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
for _, rid in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now_ms)) do
  local amount = redis.call('HGET', KEYS[1], 'r:' .. rid)
  if amount and redis.call('HDEL', KEYS[1], 'r:' .. rid) == 1 then
    give_back(KEYS[1], 'r:' .. rid, amount)
  end
  redis.call('ZREM', KEYS[2], rid)
end
local day = redis.call('HGET', KEYS[3], 'cost') or '0'
local month = redis.call('HGET', KEYS[4], 'cost') or '0'
local held = redis.call('HGET', KEYS[1], 'total') or '0'
local key = ARGV[6]
local key_day, key_month, key_held = '0', '0', '0'
if key then
  key_day = redis.call('HGET', KEYS[3], 'k:' .. key .. ':cost') or '0'
  key_month = redis.call('HGET', KEYS[4], 'k:' .. key .. ':cost') or '0'
  key_held = redis.call('HGET', KEYS[1], 'k:' .. key .. ':held') or '0'
end
local function answer(accepted, refused)
  return {accepted, refused, day, month, held, key_day, key_month, key_held}
end
if redis.call('HEXISTS', KEYS[1], 'r:' .. ARGV[1]) == 1 then
  return answer(1, '')
end
local committed = math.max(0, tonumber(held)) + tonumber(ARGV[2])
if ARGV[4] ~= '' and tonumber(day) + committed > tonumber(ARGV[4]) then
  return answer(0, 'daily')
end
if ARGV[5] ~= '' and tonumber(month) + committed > tonumber(ARGV[5]) then
  return answer(0, 'monthly')
end
if key then
  local key_committed = math.max(0, tonumber(key_held)) + tonumber(ARGV[2])
  if ARGV[7] ~= '' and tonumber(key_day) + key_committed > tonumber(ARGV[7]) then
    return answer(0, 'key daily')
  end
  if ARGV[8] ~= '' and tonumber(key_month) + key_committed > tonumber(ARGV[8]) then
    return answer(0, 'key monthly')
  end
  redis.call('HSET', KEYS[1], 'kr:' .. ARGV[1], key)
  redis.call('HINCRBY', KEYS[1], 'k:' .. key .. ':held', ARGV[2])
end
redis.call('HSET', KEYS[1], 'r:' .. ARGV[1], ARGV[2])
redis.call('HINCRBY', KEYS[1], 'total', ARGV[2])
redis.call('ZADD', KEYS[2], now_ms + tonumber(ARGV[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]) + 60000)
redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[3]) + 60000)
return answer(1, '')
"""
)

RELEASE = (
    GIVE_BACK
    + """
-- KEYS: 1 holds hash, 2 holds expiry; ARGV: 1 request id. Returns the amount released (0 if none).
local amount = redis.call('HGET', KEYS[1], 'r:' .. ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
if not amount or redis.call('HDEL', KEYS[1], 'r:' .. ARGV[1]) == 0 then
  return 0
end
give_back(KEYS[1], 'r:' .. ARGV[1], amount)
return amount
"""
)


@dataclass(frozen=True, slots=True)
class Script:
    source: str
    sha: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sha", hashlib.sha1(self.source.encode()).hexdigest())

    async def load(self, redis: Redis) -> None:
        await redis.script_load(self.source)

    async def run(self, redis: Redis, keys: Sequence[str], args: Sequence[str | int]) -> Any:
        """EVALSHA, loading the script once if the server does not know it."""
        try:
            return await redis.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            await self.load(redis)
            return await redis.evalsha(self.sha, len(keys), *keys, *args)
