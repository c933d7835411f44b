"""The two Lua scripts of the rate limits: admit a request against all its counters at once, and settle
what it held once its usage is known. Each runs atomically inside Redis, on one tenant's keys.

A counter is a token bucket of ``capacity`` units that refills at ``capacity`` per ``period``. Its key holds
``"<used> <time>"``: what is taken from the bucket, in unit-microseconds (units times the period in
microseconds, so that the refill, ``elapsed * capacity``, is a whole number and nothing is lost to rounding),
as of a time in microseconds. A take of ``amount`` fits while ``used + amount * period <= capacity * period``;
what is left is ``(capacity * period - used) // period`` units; the counter is whole again
``used / capacity`` microseconds later, and its key expires then (a whole counter needs none). This is GCRA
with exact arithmetic: sums below 2**53 are exact in Lua's doubles, which covers request and token limits
(60,000,000 unit-microseconds per unit: up to 150 million units a minute); a dollar limit above about $0.15
a minute is counted in nano-dollars to within a few millionths of a cent.

Time is the server's (``TIME``), the one clock every worker and instance shares; a test may pass its own.
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
-- what the counter has taken now, refilled since it was written, and as of when (never before a time it
-- was written at: a clock that steps back refills nothing twice)
local function used_of(key, capacity)
  local found = redis.call('GET', key)
  if not found then return 0, now end
  local used, at = string.match(found, '^(%S+) (%S+)$')
  used, at = tonumber(used), tonumber(at)
  if now <= at then return used, at end
  used = used - (now - at) * capacity
  if used < 0 then used = 0 end
  return used, now
end
local function store(key, used, at, capacity)
  if used > 0 then
    local whole_in = math.ceil((at - now + used / capacity) / 1000)
    if whole_in < 1 then whole_in = 1 end
    redis.call('SET', key, string.format('%.17g %.17g', used, at), 'PX', whole_in)
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
-- fit (-1: never, the amount is above the capacity), then per counter what is left (whole units) and
-- microseconds until it is whole, after the call}. A refused request takes nothing from any counter.
local used, at, after = {}, {}, {}
local refused, wait = 0, 0
for i = 1, #KEYS do
  local capacity, amount = tonumber(ARGV[1 + 2 * i]), tonumber(ARGV[2 + 2 * i])
  local full = capacity * period
  used[i], at[i] = used_of(KEYS[i], capacity)
  after[i] = used[i] + amount * period
  if amount > capacity then
    if wait >= 0 then refused, wait = i, -1 end
  elseif after[i] > full and wait >= 0 then
    local until_fits = math.ceil((after[i] - full) / capacity)
    if until_fits > wait then refused, wait = i, until_fits end
  end
end
local reply = {refused == 0 and 1 or 0, refused, wait}
for i = 1, #KEYS do
  local capacity, amount = tonumber(ARGV[1 + 2 * i]), tonumber(ARGV[2 + 2 * i])
  local taken = used[i]
  if refused == 0 then
    taken = after[i]
    if amount > 0 then store(KEYS[i], taken, at[i], capacity) end
  end
  local left = math.floor((capacity * period - taken) / period)
  if left < 0 then left = 0 end
  reply[#reply + 1] = left
  reply[#reply + 1] = math.ceil(taken / capacity)
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
    local used, at = used_of(KEYS[i], capacity)
    used = used - back * period
    if used < 0 then used = 0 end
    store(KEYS[i], used, at, capacity)
  end
end
return 0
"""
)
