"""The two Lua scripts of the rate limits: admit a request against all its counters at once, and settle
what it held once its usage is known. Each runs atomically inside Redis, on one tenant's keys.

A counter is one string key holding its GCRA "theoretical arrival time" (``tat``), in microseconds: the
moment the counter is whole again. Taking ``amount`` of a limit of ``capacity`` per ``period`` moves it
``amount * period / capacity`` later (rounded up); the take fits while ``tat`` stays within one ``period``
of now. So ``(period - (tat - now)) * capacity / period`` is what is left, ``tat - now`` the time until the
counter is whole, and a counter whose ``tat`` has passed is whole and needs no key (each key expires then).

Time is the server's (``TIME``), the one clock every worker and instance shares; a test may pass its own.
All values are whole microseconds below 2**53, exact in Lua's doubles.
"""

from __future__ import annotations

NOW = """
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[1])
end
local period = tonumber(ARGV[2])
local function tat_of(key)
  local tat = tonumber(redis.call('GET', key) or '0')
  if tat < now then tat = now end
  return tat
end
local function store(key, tat)
  if tat > now then
    redis.call('SET', key, string.format('%d', tat), 'PX', math.ceil((tat - now) / 1000))
  else
    redis.call('DEL', key)
  end
end
"""

ADMIT = (
    NOW
    + """
-- KEYS: one counter per limit. ARGV: 1 now in microseconds ('' for the server's clock), 2 the period in
-- microseconds, then per counter its capacity and the amount this request takes.
-- Returns {admitted (1/0), the counter that refused (1-based; 0), microseconds until the request would
-- fit (-1: never, the amount is above the capacity), now, then each counter's tat after the call}.
-- A refused request takes nothing from any counter.
local tats, after = {}, {}
local refused, wait = 0, 0
for i = 1, #KEYS do
  local capacity, amount = tonumber(ARGV[1 + 2 * i]), tonumber(ARGV[2 + 2 * i])
  tats[i] = tat_of(KEYS[i])
  after[i] = tats[i] + math.ceil(amount * period / capacity)
  if amount > capacity then
    if wait >= 0 then refused, wait = i, -1 end
  elseif after[i] - now > period and wait >= 0 and after[i] - now - period > wait then
    refused, wait = i, after[i] - now - period
  end
end
local reply = {refused == 0 and 1 or 0, refused, wait, now}
for i = 1, #KEYS do
  if refused == 0 then
    if after[i] > tats[i] then store(KEYS[i], after[i]) end
    reply[#reply + 1] = after[i]
  else
    reply[#reply + 1] = tats[i]
  end
end
return reply
"""
)

SETTLE = (
    NOW
    + """
-- KEYS: counters a request held an estimate on. ARGV: 1 now ('' for the server's clock), 2 the period in
-- microseconds, then per counter its capacity and what to give back (held minus used; below zero when
-- the request used more than it held, which is taken now). Returns nothing.
for i = 1, #KEYS do
  local capacity, back = tonumber(ARGV[1 + 2 * i]), tonumber(ARGV[2 + 2 * i])
  if back ~= 0 then
    local tat = tat_of(KEYS[i])
    if back > 0 then
      tat = tat - math.floor(back * period / capacity)
    else
      tat = tat + math.ceil(-back * period / capacity)
    end
    store(KEYS[i], tat)
  end
end
return 0
"""
)
