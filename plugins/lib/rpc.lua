-- rpc: ONC RPC version 2 (RFC 5531) as a scanner needs it, and the
-- portmapper's DUMP (rpcbind versions 2, 3 and 4: RFC 1833).
--
--   local rpc = require "rpc"
--   local body, err = rpc.call(sock, "tcp", rpc.PORTMAP, 2, 4)   -- PMAPPROC_DUMP
--   local list, err = rpc.decode_dump(body, 2)
--   local list, version = rpc.portmap_dump(open, "tcp")          -- versions 4, 3, 2
--   rpc.program_name(100003)                                    --> "nfs"
--
-- A call is the RPC header (random xid, CALL, RPC version 2, program,
-- version, procedure, AUTH_NULL credentials and verifier) and the
-- arguments. Over TCP it travels in record marking: each fragment is a
-- 4-byte big-endian length whose top bit marks the last one. Over UDP the
-- message is one datagram. A reply is checked (same xid, REPLY, accepted,
-- SUCCESS) and its body (what follows accept_stat) returned; every read is
-- bounded (MAX_RECORD bytes, MAX_FRAGMENTS fragments, MAX_ENTRIES entries)
-- and anything malformed gives nil, why.

local rpc = {}

rpc.PORTMAP = 100000
rpc.MAX_RECORD = 256 * 1024
local MAX_FRAGMENTS = 64
local MAX_ENTRIES = 4096
local MAX_STRING = 1024

-- Program names as nmap's nmap-rpc gives them (the common ones).
local NAMES = {
  [100000] = "rpcbind", [100001] = "rstatd", [100002] = "rusersd", [100003] = "nfs",
  [100004] = "ypserv", [100005] = "mountd", [100007] = "ypbind", [100008] = "walld",
  [100009] = "yppasswdd", [100010] = "etherstatd", [100011] = "rquotad", [100012] = "sprayd",
  [100017] = "rexd", [100020] = "llockmgr", [100021] = "nlockmgr", [100023] = "statmon",
  [100024] = "status", [100026] = "bootparam", [100028] = "ypupdated", [100029] = "keyserv",
  [100069] = "ypxfrd", [100083] = "ttdbserverd", [100099] = "pld", [100101] = "na.event",
  [100133] = "nsm_addrand", [100227] = "nfs_acl", [100232] = "sadmind", [100300] = "nisd",
  [150001] = "pcnfsd", [300019] = "amd", [391002] = "sgi_fam", [100249] = "snmpXdmid",
}

-- nmap's name for program number `n`, or nil.
function rpc.program_name(n)
  return NAMES[n]
end

-- A CALL message (no record mark): AUTH_NULL credentials and verifier.
function rpc.call_message(xid, program, version, procedure, args)
  return string.pack(">I4I4I4I4I4I4I4I4I4I4", xid, 0, 2, program, version, procedure, 0, 0, 0, 0) .. (args or "")
end

-- `msg` as one last fragment of TCP record marking.
function rpc.frame(msg)
  return string.pack(">I4", 0x80000000 + #msg) .. msg
end

-- One record from a stream socket (recv_exact): its fragments joined, or nil, why.
function rpc.read_record(sock, max)
  max = max or rpc.MAX_RECORD
  local parts, total = {}, 0
  for _ = 1, MAX_FRAGMENTS do
    local mark, err = sock:recv_exact(4)
    if not mark then
      return nil, "record mark: " .. tostring(err)
    end
    local n = string.unpack(">I4", mark)
    local last, len = n >= 0x80000000, n % 0x80000000
    total += len
    if total > max then
      return nil, "record longer than " .. max .. " bytes"
    end
    if len > 0 then
      local data, derr = sock:recv_exact(len)
      if not data then
        return nil, "fragment: " .. tostring(derr)
      end
      parts[#parts + 1] = data
    end
    if last then
      return table.concat(parts)
    end
  end
  return nil, "more than " .. MAX_FRAGMENTS .. " fragments"
end

local REJECT = { [0] = "RPC version mismatch", [1] = "authentication error" }
local ACCEPT = {
  [1] = "program unavailable", [2] = "program version mismatch", [3] = "procedure unavailable",
  [4] = "garbage arguments", [5] = "system error",
}

-- The body of a successful REPLY to `xid` (what follows accept_stat), or nil, why.
function rpc.decode_reply(msg, xid)
  if #msg < 12 then
    return nil, "reply shorter than its header"
  end
  local rxid, mtype, stat, pos = string.unpack(">I4I4I4", msg)
  if xid and rxid ~= xid then
    return nil, "reply to another call (xid)"
  end
  if mtype ~= 1 then
    return nil, "not a reply"
  end
  if stat == 1 then
    local why = #msg >= pos + 3 and REJECT[(string.unpack(">I4", msg, pos))]
    return nil, "call denied: " .. (why or "unknown reason")
  elseif stat ~= 0 then
    return nil, "unknown reply status " .. stat
  end
  if #msg < pos + 7 then
    return nil, "reply cut in its verifier"
  end
  local _, vlen = string.unpack(">I4I4", msg, pos)
  pos += 8 + vlen + (-vlen % 4)
  if vlen > 400 or #msg < pos + 3 then
    return nil, "bad verifier"
  end
  local accept = string.unpack(">I4", msg, pos)
  if accept ~= 0 then
    return nil, "call accepted but failed: " .. (ACCEPT[accept] or ("state " .. accept))
  end
  return string.sub(msg, pos + 4)
end

-- Sends one call over `sock` ("tcp": record marking, "udp": a datagram)
-- and returns the reply's body, or nil, why.
function rpc.call(sock, transport, program, version, procedure, args)
  local xid = math.random(1, 0x7fffffff)
  local msg = rpc.call_message(xid, program, version, procedure, args)
  local ok, err = sock:send(transport == "udp" and msg or rpc.frame(msg))
  if not ok then
    return nil, "send: " .. tostring(err)
  end
  local reply, rerr
  if transport == "udp" then
    reply, rerr = sock:recv(65507)
  else
    reply, rerr = rpc.read_record(sock)
  end
  if not reply then
    return nil, tostring(rerr)
  end
  return rpc.decode_reply(reply, xid)
end

-- An XDR string (or opaque) at `pos`: its bytes and the next position, or nil.
local function xdr_string(data, pos)
  if #data < pos + 3 then
    return nil
  end
  local len = string.unpack(">I4", data, pos)
  local after = pos + 4 + len + (-len % 4)
  if len > MAX_STRING or after - 1 > #data then
    return nil
  end
  return string.sub(data, pos + 4, pos + 3 + len), after
end

-- A universal address ("198.18.0.5.0.111", "::1.0.111") split into its
-- host and port, or nil.
function rpc.uaddr(addr)
  local host, hi, lo = string.match(addr, "^(.-)%.(%d+)%.(%d+)$")
  if not host or tonumber(hi) > 255 or tonumber(lo) > 255 then
    return nil
  end
  return host, tonumber(hi) * 256 + tonumber(lo)
end

-- A DUMP reply's body as a list of { program, version, protocol, port,
-- addr, owner } (version 2: protocol "tcp"/"udp"/the number and a port;
-- 3 and 4: the netid, the owner and the universal address, split into
-- host and port for tcp/udp (6) netids), or nil, why.
function rpc.decode_dump(body, version)
  local list, pos = {}, 1
  while true do
    if #body < pos + 3 then
      return nil, "list cut short"
    end
    local follows = string.unpack(">I4", body, pos)
    pos += 4
    if follows == 0 then
      return list
    elseif follows ~= 1 or #list >= MAX_ENTRIES then
      return nil, "not a DUMP list"
    end
    local e = {}
    if version == 2 then
      if #body < pos + 15 then
        return nil, "entry cut short"
      end
      local prot
      e.program, e.version, prot, e.port, pos = string.unpack(">I4I4I4I4", body, pos)
      e.protocol = prot == 6 and "tcp" or prot == 17 and "udp" or tostring(prot)
    else
      if #body < pos + 7 then
        return nil, "entry cut short"
      end
      e.program, e.version, pos = string.unpack(">I4I4", body, pos)
      local netid, addr, owner
      netid, pos = xdr_string(body, pos)
      addr, pos = xdr_string(body, pos or #body + 1)
      owner, pos = xdr_string(body, pos or #body + 1)
      if not owner then
        return nil, "entry cut short"
      end
      e.protocol = string.match(netid, "^[^%z]*") -- NetApp pads it with NULs
      e.addr, e.owner = addr, owner
      -- For TCP and UDP, nmap keeps the host part as the address.
      local host, port = rpc.uaddr(addr)
      if host and string.find(e.protocol, "^[tu][cd]p6?$") then
        e.addr, e.port = host, port
      end
    end
    list[#list + 1] = e
  end
end

-- Asks the portmapper on sockets from `open()` (one per try) for its list:
-- rpcbind 4, then 3, then 2, as nmap does. Returns the list and the
-- version that gave it, or nil, why (the last try's).
function rpc.portmap_dump(open, transport)
  local err
  for version = 4, 2, -1 do
    local sock, oerr = open()
    if not sock then
      return nil, "connect: " .. tostring(oerr)
    end
    -- DUMP is procedure 4 in every version.
    local body, cerr = rpc.call(sock, transport, rpc.PORTMAP, version, 4)
    sock:close()
    local list
    if body then
      list, cerr = rpc.decode_dump(body, version)
      if list then
        return list, version
      end
    end
    err = "rpcbind " .. version .. ": " .. tostring(cerr)
  end
  return nil, err
end

return rpc
