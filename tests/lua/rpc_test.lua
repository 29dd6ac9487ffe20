-- rpc-test: unit tests of lib/rpc.lua (ONC RPC and portmapper DUMP) on
-- fixed bytes, offline.
-- Run: moonscan plugins test libtests/rpc_test.lua --plugin-dir plugins
local rpc = require "rpc"

local function unhex(h)
  return (string.gsub(string.gsub(h, "%s", ""), "%x%x", function(x)
    return string.char(tonumber(x, 16))
  end))
end

-- A stream socket over fixed bytes (recv_exact), remembering what was sent.
local function stream(bytes)
  local pos = 1
  return {
    sent = {},
    send = function(self, data)
      self.sent[#self.sent + 1] = data
      return true
    end,
    recv_exact = function(_, n)
      if pos + n - 1 > #bytes then
        pos = #bytes + 1
        return nil, "closed"
      end
      local s = string.sub(bytes, pos, pos + n - 1)
      pos += n
      return s
    end,
    close = function() end,
  }
end

-- A portmapper over TCP: answers each call with `reply(xid, version)`.
local function portmapper(reply)
  local sock = stream("")
  sock.send = function(self, data)
    local _, xid, _, _, _, version = string.unpack(">I4I4I4I4I4I4", data)
    local body = reply(xid, version)
    local s = stream(rpc.frame(body))
    self.recv_exact = s.recv_exact
    return true
  end
  return sock
end

local function xdr(s)
  return string.pack(">I4", #s) .. s .. string.rep("\0", -#s % 4)
end

-- An accepted reply header (AUTH_NULL verifier) with accept_stat.
local function accepted(xid, stat)
  return string.pack(">I4I4I4I4I4I4", xid, 1, 0, 0, 0, stat)
end

return {
  id = "rpc-test",
  description = "Unit tests of the rpc library (ONC RPC, portmapper DUMP).",
  categories = { "safe" },
  ports = { 1 },
  run = function(ctx)
    local n = 0
    local function check(cond, what)
      n += 1
      if not cond then
        error("check " .. n .. " failed: " .. tostring(what), 2)
      end
    end
    local function eq(got, want, what)
      check(got == want, (what or "") .. ": got " .. tostring(got) .. ", want " .. tostring(want))
    end

    -- A DUMP call, as rpcinfo sends it (xid 0x12345678, rpcbind 2, proc 4).
    local call = rpc.call_message(0x12345678, 100000, 2, 4)
    eq(call, unhex("12345678 00000000 00000002 000186a0 00000002 00000004 00000000 00000000 00000000 00000000"), "call")
    eq(rpc.frame(call), unhex("80000028") .. call, "record mark")

    -- Record marking: one fragment, two fragments, cut, too long.
    eq(rpc.read_record(stream(unhex("80000003 616263"))), "abc", "one fragment")
    eq(rpc.read_record(stream(unhex("00000002 6162 80000001 63"))), "abc", "two fragments")
    local r, err = rpc.read_record(stream(unhex("80000010 6162")))
    check(r == nil and string.find(err, "fragment"), "cut fragment: " .. tostring(err))
    r, err = rpc.read_record(stream(unhex("80100000")), 1024)
    check(r == nil and string.find(err, "longer"), "long record: " .. tostring(err))
    r, err = rpc.read_record(stream(string.rep(unhex("00000000"), 100)))
    check(r == nil and string.find(err, "fragments"), "endless fragments: " .. tostring(err))
    r, err = rpc.read_record(stream(unhex("8000")))
    check(r == nil and string.find(err, "record mark"), "cut mark: " .. tostring(err))

    -- Replies: success, another xid, denied, failed, odd verifier, garbage.
    eq(rpc.decode_reply(accepted(7, 0) .. "body", 7), "body", "success")
    r, err = rpc.decode_reply(accepted(8, 0), 7)
    check(r == nil and string.find(err, "xid"), "xid: " .. tostring(err))
    r, err = rpc.decode_reply(unhex("00000007 00000001 00000001 00000000 00000002 00000004"), 7)
    check(r == nil and string.find(err, "version mismatch"), "denied: " .. tostring(err))
    r, err = rpc.decode_reply(accepted(7, 2) .. unhex("00000002 00000004"), 7)
    check(r == nil and string.find(err, "program version mismatch"), "PROG_MISMATCH: " .. tostring(err))
    r, err = rpc.decode_reply(accepted(7, 1), 7)
    check(r == nil and string.find(err, "program unavailable"), "PROG_UNAVAIL: " .. tostring(err))
    local verf = string.pack(">I4I4I4I4", 7, 1, 0, 1) .. xdr("abcde") .. string.pack(">I4", 0) .. "x"
    eq(rpc.decode_reply(verf, 7), "x", "verifier skipped")
    r, err = rpc.decode_reply(string.pack(">I4I4I4I4I4", 7, 1, 0, 1, 0x7fffffff), 7)
    check(r == nil and err == "bad verifier", "huge verifier: " .. tostring(err))
    r, err = rpc.decode_reply(string.pack(">I4I4I4", 7, 0, 0), 7)
    check(r == nil and err == "not a reply", "a call: " .. tostring(err))
    r, err = rpc.decode_reply("xyz", 7)
    check(r == nil and string.find(err, "shorter"), "short: " .. tostring(err))
    r, err = rpc.decode_reply(string.pack(">I4I4I4", 7, 1, 0), 7)
    check(r == nil and string.find(err, "verifier"), "cut verifier: " .. tostring(err))

    -- DUMP version 2: portmapper on TCP and UDP 111, then the end.
    local v2 = unhex([[
      00000001 000186a0 00000002 00000006 0000006f
      00000001 000186a0 00000002 00000011 0000006f
      00000001 000186b8 00000001 00000084 00000801
      00000000]])
    local list = rpc.decode_dump(v2, 2)
    eq(#list, 3, "v2 entries")
    eq(list[1].program, 100000, "v2 program")
    eq(list[1].protocol, "tcp", "v2 tcp")
    eq(list[2].protocol, "udp", "v2 udp")
    eq(list[2].port, 111, "v2 port")
    eq(list[3].protocol, "132", "v2 other protocol number")
    eq(list[3].port, 2049, "v2 port 2049")
    r, err = rpc.decode_dump(string.sub(v2, 1, 30), 2)
    check(r == nil and string.find(err, "cut"), "v2 cut: " .. tostring(err))
    r, err = rpc.decode_dump(unhex("00000005"), 2)
    check(r == nil and string.find(err, "not a DUMP"), "v2 garbage: " .. tostring(err))
    eq(#rpc.decode_dump(unhex("00000000"), 2), 0, "empty list")

    -- DUMP version 4 (rpcb entries): tcp, tcp6, local, a NetApp-padded netid.
    local function entry(prog, vers, netid, addr, owner)
      return string.pack(">I4I4I4", 1, prog, vers) .. xdr(netid) .. xdr(addr) .. xdr(owner)
    end
    local v4 = entry(100000, 4, "tcp", "198.18.0.5.0.111", "superuser")
      .. entry(100000, 3, "tcp6", "::1.0.111", "superuser")
      .. entry(100000, 4, "local", "/run/rpcbind.sock", "superuser")
      .. entry(100003, 3, "udp\0\0", "0.0.0.0.8.1", "unknown")
      .. string.pack(">I4", 0)
    list = rpc.decode_dump(v4, 4)
    eq(#list, 4, "v4 entries")
    eq(list[1].port, 111, "v4 tcp port")
    eq(list[1].addr, "198.18.0.5", "v4 addr")
    eq(list[1].owner, "superuser", "v4 owner")
    eq(list[2].protocol, "tcp6", "v4 tcp6")
    eq(list[2].port, 111, "v4 tcp6 port")
    eq(list[3].protocol, "local", "v4 local")
    eq(list[3].port, nil, "v4 local has no port")
    eq(list[3].addr, "/run/rpcbind.sock", "v4 local addr")
    eq(list[2].addr, "::1", "v4 tcp6 addr")
    eq(list[4].protocol, "udp", "NULs trimmed")
    eq(list[4].port, 2049, "v4 udp port")
    r, err = rpc.decode_dump(string.sub(v4, 1, 20), 4)
    check(r == nil and string.find(err, "cut"), "v4 cut: " .. tostring(err))
    r, err = rpc.decode_dump(string.pack(">I4I4I4I4", 1, 1, 1, 0x10000000), 4)
    check(r == nil and string.find(err, "cut"), "v4 huge string: " .. tostring(err))

    local host, port = rpc.uaddr("10.0.0.1.3.232")
    eq(host, "10.0.0.1", "uaddr host")
    eq(port, 1000, "uaddr port")
    eq(rpc.uaddr("10.0.0.1.300.1"), nil, "bad uaddr")
    eq(rpc.uaddr("/run/x"), nil, "path")
    eq(rpc.program_name(100000), "rpcbind", "name")
    eq(rpc.program_name(100024), "status", "name status")
    eq(rpc.program_name(42), nil, "no name")

    -- A whole call over a fake TCP portmapper, and the version fallback:
    -- version 4 refused (PROG_MISMATCH), version 3 answers.
    local body = rpc.call(portmapper(function(xid)
      return accepted(xid, 0) .. "ok"
    end), "tcp", 100000, 2, 4)
    eq(body, "ok", "call over tcp")
    local versions = {}
    local got, version = rpc.portmap_dump(function()
      return portmapper(function(xid, v)
        versions[#versions + 1] = v
        if v == 4 then
          return accepted(xid, 2) .. unhex("00000002 00000003")
        end
        return accepted(xid, 0) .. entry(100000, 3, "udp", "1.2.3.4.0.111", "superuser") .. unhex("00000000")
      end)
    end, "tcp")
    eq(version, 3, "fell back to version 3")
    eq(#versions, 2, "two tries")
    eq(got[1].port, 111, "dump entry")
    -- Every version refused: the last error.
    got, err = rpc.portmap_dump(function()
      return portmapper(function(xid)
        return accepted(xid, 1)
      end)
    end, "tcp")
    check(got == nil and string.find(err, "rpcbind 2"), "all refused: " .. tostring(err))
    got, err = rpc.portmap_dump(function()
      return nil, "refused"
    end, "tcp")
    check(got == nil and string.find(err, "connect"), "no connection: " .. tostring(err))
    -- A UDP exchange: one datagram each way.
    local udp = {
      send = function(self, d)
        self.xid = string.unpack(">I4", d)
        return true
      end,
      recv = function(self)
        return accepted(self.xid, 0) .. "u"
      end,
      close = function() end,
    }
    eq(rpc.call(udp, "udp", 100000, 2, 4), "u", "call over udp")

    return "ok " .. n
  end,
}
