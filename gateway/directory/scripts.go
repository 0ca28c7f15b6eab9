package directory

import "github.com/redis/go-redis/v9"

// The Lua scripts. Every change to a record goes through one of them, so the
// comparison of owner and epoch and the write that follows are one atomic
// step in Redis. They mirror decide in rules.go; keep the two in step
// (TestScriptsAgreeWithModel runs random schedules through both).
//
// Conventions: KEYS[1] is the session record (a hash); a lease key is built
// inside a script from the lease prefix (ARGV) and the owner the record names,
// so the scripts need a single Redis (or a Sentinel-managed primary): on Redis
// Cluster all keys would have to share a slot (a prefix with a hash tag, e.g.
// "{sessiongate}:", would do, but that is not tested). Epochs and seqs travel
// as decimal strings and are compared as strings (Lua numbers are doubles).
// updated_ms comes from the server's clock (TIME), one clock for every
// replica. Scripts reply {verdict, ...}.

// luaLib is prepended to every script.
const luaLib = `
local function now_ms()
  local t = redis.call('TIME')
  return t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))
end
-- a > b for decimal strings without leading zeros
local function gt(a, b)
  if #a ~= #b then return #a > #b end
  return a > b
end
`

// fields is the order in which scripts return a record.
// owner, epoch, caller, runtime, upstream, token, seq, updated_ms
const luaFields = `'owner', 'epoch', 'caller', 'runtime', 'upstream', 'token', 'seq', 'updated_ms'`

// Claim: ARGV me, caller, runtime, upstream, sealed token, seq, ttl_ms,
// owner index prefix, session id.
var claimScript = redis.NewScript(luaLib + `
if redis.call('EXISTS', KEYS[1]) == 1 then return {'EXISTS'} end
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'epoch', '1', 'caller', ARGV[2], 'runtime', ARGV[3],
  'upstream', ARGV[4], 'token', ARGV[5], 'seq', ARGV[6], 'updated_ms', now_ms())
redis.call('PEXPIRE', KEYS[1], ARGV[7])
redis.call('SADD', ARGV[8] .. ARGV[1], ARGV[9])
return {'OK', '1'}
`)

// Update: ARGV me, epoch, sealed token ("" keeps the stored one), seq, ttl_ms.
// A record below the epoch given is a stale owner's restore after a flush:
// NOTFOUND (the caller restores; the higher epoch wins), not FENCED.
var updateScript = redis.NewScript(luaLib + `
local v = redis.call('HMGET', KEYS[1], 'owner', 'epoch', 'seq')
if not v[1] then return {'NOTFOUND'} end
if gt(ARGV[2], v[2]) then return {'NOTFOUND'} end
if v[1] ~= ARGV[1] or v[2] ~= ARGV[2] then return {'FENCED', v[1], v[2]} end
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'token', ARGV[3]) end
if gt(ARGV[4], v[3]) then redis.call('HSET', KEYS[1], 'seq', ARGV[4]) end
redis.call('HSET', KEYS[1], 'updated_ms', now_ms())
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return {'OK'}
`)

// Takeover: ARGV me, lease prefix, ttl_ms, marker key, marker expected
// ("" = not checked), owner index prefix, released set key, session id. Replies {'OK', previous owner, record...},
// {'OWNED', owner, addr} or {'FLUSHED'} (the marker is not the one
// expected: every lease may have been flushed).
var takeoverScript = redis.NewScript(luaLib + `
if ARGV[5] ~= '' and redis.call('GET', ARGV[4]) ~= ARGV[5] then return {'FLUSHED'} end
local prev = redis.call('HGET', KEYS[1], 'owner')
if not prev then return {'NOTFOUND'} end
if prev ~= '' and prev ~= ARGV[1] then
  local addr = redis.call('HGET', ARGV[2] .. prev, 'addr')
  if addr then return {'OWNED', prev, addr} end
end
redis.call('HINCRBY', KEYS[1], 'epoch', 1)
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'updated_ms', now_ms())
redis.call('PEXPIRE', KEYS[1], ARGV[3])
if prev ~= '' then redis.call('SREM', ARGV[6] .. prev, ARGV[8]) end
redis.call('SREM', ARGV[7], ARGV[8])
redis.call('SADD', ARGV[6] .. ARGV[1], ARGV[8])
local r = redis.call('HMGET', KEYS[1], ` + luaFields + `)
table.insert(r, 1, prev)
table.insert(r, 1, 'OK')
return r
`)

// Takeover of a batch: KEYS the session records; ARGV me, lease prefix,
// ttl_ms, marker key, marker expected ("" = not checked), owner index
// prefix, released set key, then the session ids of KEYS in order. The
// marker is checked once: {'FLUSHED'}; else {'OK', reply...} with one reply
// per key, each what takeoverScript answers for it. One script call for the
// whole batch: a takeover of thousands of orphans is a few round trips.
var takeoverManyScript = redis.NewScript(luaLib + `
if ARGV[5] ~= '' and redis.call('GET', ARGV[4]) ~= ARGV[5] then return {'FLUSHED'} end
local out = {'OK'}
local addrs = {}
for i, key in ipairs(KEYS) do
  local id = ARGV[7 + i]
  local prev = redis.call('HGET', key, 'owner')
  local r
  if not prev then
    r = {'NOTFOUND'}
  else
    local addr = false
    if prev ~= '' and prev ~= ARGV[1] then
      addr = addrs[prev]
      if addr == nil then
        addr = redis.call('HGET', ARGV[2] .. prev, 'addr') or false
        addrs[prev] = addr
      end
    end
    if addr then
      r = {'OWNED', prev, addr}
    else
      redis.call('HINCRBY', key, 'epoch', 1)
      redis.call('HSET', key, 'owner', ARGV[1], 'updated_ms', now_ms())
      redis.call('PEXPIRE', key, ARGV[3])
      if prev ~= '' then redis.call('SREM', ARGV[6] .. prev, id) end
      redis.call('SREM', ARGV[7], id)
      redis.call('SADD', ARGV[6] .. ARGV[1], id)
      r = redis.call('HMGET', key, ` + luaFields + `)
      table.insert(r, 1, prev)
      table.insert(r, 1, 'OK')
    end
  end
  table.insert(out, r)
end
return out
`)

// Release: ARGV me, epoch, ttl_ms, releases counter key, owner index
// prefix, released set key, session id. The record stays, unowned; the
// counter tells sweepers that there is something to adopt, the released
// set what.
var releaseScript = redis.NewScript(luaLib + `
local v = redis.call('HMGET', KEYS[1], 'owner', 'epoch')
if not v[1] then return {'NOTFOUND'} end
if v[1] ~= ARGV[1] or v[2] ~= ARGV[2] then return {'FENCED', v[1], v[2]} end
redis.call('HSET', KEYS[1], 'owner', '', 'updated_ms', now_ms())
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('INCR', ARGV[4])
redis.call('SREM', ARGV[5] .. ARGV[1], ARGV[7])
redis.call('SADD', ARGV[6], ARGV[7])
return {'OK'}
`)

// Delete: ARGV me, epoch, owner index prefix, session id.
var deleteScript = redis.NewScript(luaLib + `
local v = redis.call('HMGET', KEYS[1], 'owner', 'epoch')
if not v[1] then return {'NOTFOUND'} end
if v[1] ~= ARGV[1] or v[2] ~= ARGV[2] then return {'FENCED', v[1], v[2]} end
redis.call('DEL', KEYS[1])
redis.call('SREM', ARGV[3] .. ARGV[1], ARGV[4])
return {'OK'}
`)

// Get (read-only): ARGV lease prefix, marker key.
// Replies {'OK', record..., owner's lease addr (empty without a lease), '1'/'0' (lease live),
// record pttl, owner's lease pttl (-2 without a lease)}, or
// {'NOTFOUND', marker age in ms or -1 when there is no marker}.
var getScript = redis.NewScript("#!lua flags=no-writes\n" + luaLib + `
local r = redis.call('HMGET', KEYS[1], ` + luaFields + `)
if not r[1] then
  local m = redis.call('GET', ARGV[2])
  if not m then return {'NOTFOUND', '-1'} end
  local at = string.match(m, ':r:(%d+)$')
  if not at then return {'NOTFOUND', '9223372036854775807'} end
  return {'NOTFOUND', tostring(tonumber(now_ms()) - tonumber(at))}
end
local addr = false
if r[1] ~= '' then addr = redis.call('HGET', ARGV[1] .. r[1], 'addr') end
table.insert(r, 1, 'OK')
table.insert(r, addr or '')
table.insert(r, addr and '1' or '0')
table.insert(r, redis.call('PTTL', KEYS[1]))
if addr then table.insert(r, redis.call('PTTL', ARGV[1] .. r[2])) else table.insert(r, -2) end
return r
`)

// Orphans (read-only): KEYS are session records found by SCAN; ARGV lease
// prefix. Replies {key, owner, epoch, ...} for every record whose owner is ""
// or has no lease.
var orphansScript = redis.NewScript(`#!lua flags=no-writes
local live = {}
local out = {}
for _, k in ipairs(KEYS) do
  local v = redis.call('HMGET', k, 'owner', 'epoch')
  if v[1] then
    local owner = v[1]
    local alive = false
    if owner ~= '' then
      alive = live[owner]
      if alive == nil then
        alive = redis.call('EXISTS', ARGV[1] .. owner) == 1
        live[owner] = alive
      end
    end
    if not alive then
      table.insert(out, k)
      table.insert(out, owner)
      table.insert(out, v[2])
    end
  end
end
return out
`)

// Lease refresh: KEYS[1] lease key; ARGV incarnation, addr, started_ms, ttl_ms,
// registry key, instance. A lease held by another incarnation (another
// process with the same instance id) is left alone: {'CONFLICT', its
// incarnation}. The instance is (re)entered in the registry of replicas that
// sweepers watch for leases that are gone.
var leaseScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[1], 'incarnation')
if cur and cur ~= ARGV[1] then return {'CONFLICT', cur} end
redis.call('HSET', KEYS[1], 'incarnation', ARGV[1], 'addr', ARGV[2], 'started_ms', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('SADD', ARGV[5], ARGV[6])
return {'OK'}
`)

// Sweep check (read-only): ARGV registry key, lease prefix, releases counter
// key. Replies {releases counter or ”, instances in the registry whose
// lease is gone...}: what says whether Orphans must scan the keyspace.
var sweepCheckScript = redis.NewScript(`#!lua flags=no-writes
local out = {redis.call('GET', ARGV[3]) or ''}
for _, inst in ipairs(redis.call('SMEMBERS', ARGV[1])) do
  if redis.call('EXISTS', ARGV[2] .. inst) == 0 then table.insert(out, inst) end
end
return out
`)

// Registry drop: ARGV registry key, lease prefix, instance. Leaves the
// registry an instance whose lease is (still) gone.
var registryDropScript = redis.NewScript(`
if redis.call('EXISTS', ARGV[2] .. ARGV[3]) == 0 then redis.call('SREM', ARGV[1], ARGV[3]) end
return {'OK'}
`)

// Lease drop: KEYS[1] lease key; ARGV incarnation.
var leaseDropScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'incarnation') == ARGV[1] then redis.call('DEL', KEYS[1]) end
return {'OK'}
`)

// Owner lookup (read-only): KEYS[1] lease key. Replies {addr, started_ms, pttl} or {}.
var ownerScript = redis.NewScript(`#!lua flags=no-writes
local v = redis.call('HMGET', KEYS[1], 'addr', 'started_ms')
if not v[1] then return {} end
return {v[1], v[2] or '0', redis.call('PTTL', KEYS[1])}
`)

// Marker: KEYS[1] marker key; ARGV a fresh random id, "r" when the caller
// had seen another marker (so a missing one means Redis lost its data).
// Returns the directory's incarnation marker, "<id>" or, created after a
// loss, "<id>:r:<created_ms>" (Get answers RECOVERING for a while after
// that), creating it when missing.
var markerScript = redis.NewScript(luaLib + `
local m = redis.call('GET', KEYS[1])
if m then return m end
m = ARGV[1]
if ARGV[2] == 'r' then m = m .. ':r:' .. now_ms() end
redis.call('SET', KEYS[1], m)
return m
`)

// Restore: re-create a record a flushed directory lost. ARGV me, epoch,
// caller, runtime, upstream, sealed token, seq, ttl_ms. Creates it, or
// replaces one at a lower epoch (the higher epoch wins: a stale owner that
// restored first is fenced at its next write); {'OK'} also when the record
// is already ours at epoch; else {'FENCED', owner, epoch}. ARGV 9, 10:
// owner index prefix, session id; ARGV 11 '1': only where no record is
// (never replace one at a lower epoch).
var restoreScript = redis.NewScript(luaLib + `
local v = redis.call('HMGET', KEYS[1], 'owner', 'epoch')
if v[1] and v[1] == ARGV[1] and v[2] == ARGV[2] then
  redis.call('SADD', ARGV[9] .. ARGV[1], ARGV[10])
  return {'OK'}
end
if v[1] and (ARGV[11] == '1' or not gt(ARGV[2], v[2])) then return {'FENCED', v[1], v[2]} end
if v[1] and v[1] ~= '' then redis.call('SREM', ARGV[9] .. v[1], ARGV[10]) end
redis.call('SADD', ARGV[9] .. ARGV[1], ARGV[10])
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'epoch', ARGV[2], 'caller', ARGV[3], 'runtime', ARGV[4],
  'upstream', ARGV[5], 'token', ARGV[6], 'seq', ARGV[7], 'updated_ms', now_ms())
redis.call('PEXPIRE', KEYS[1], ARGV[8])
return {'OK'}
`)

// Peers (read-only): ARGV registry key, lease prefix. Replies {instance,
// lease pttl (-2: none), ...} for every replica in the registry.
var peersScript = redis.NewScript(`#!lua flags=no-writes
local out = {}
for _, inst in ipairs(redis.call('SMEMBERS', ARGV[1])) do
  table.insert(out, inst)
  table.insert(out, tostring(redis.call('PTTL', ARGV[2] .. inst)))
end
return out
`)

// Lease probe (read-only): KEYS[1] lease key. Replies {incarnation, pttl}
// or {}.
var leaseProbeScript = redis.NewScript(`#!lua flags=no-writes
local inc = redis.call('HGET', KEYS[1], 'incarnation')
if not inc then return {} end
return {inc, tostring(redis.call('PTTL', KEYS[1]))}
`)

// Orphans by index: ARGV session prefix, owner index prefix, released set
// key, lease prefix, registry key, then the instances to look up. Replies
// {id, owner, epoch, ...} for every session in the released set and in the
// owner index of each instance given whose record still names that owner
// (or is released); stale index entries (the record is gone or names
// someone else) are removed. An instance whose lease is gone and whose
// index is empty leaves the registry. O(orphans + stale entries).
var orphansIndexScript = redis.NewScript(`
local out = {}
local function look(set, want)
  for _, id in ipairs(redis.call('SMEMBERS', set)) do
    local v = redis.call('HMGET', ARGV[1] .. id, 'owner', 'epoch')
    if v[1] and v[1] == want then
      table.insert(out, id)
      table.insert(out, v[1])
      table.insert(out, v[2])
    else
      redis.call('SREM', set, id)
    end
  end
end
look(ARGV[3], '')
for i = 6, #ARGV do
  local inst = ARGV[i]
  look(ARGV[2] .. inst, inst)
  if redis.call('EXISTS', ARGV[4] .. inst) == 0 and redis.call('SCARD', ARGV[2] .. inst) == 0 then
    redis.call('SREM', ARGV[5], inst)
  end
end
return out
`)
