-- snmp-test: unit tests of lib/snmp.lua on datagrams captured from the lab's
-- Net-SNMP agent (nmap's snmp-sysdescr exchange), offline.
local snmp = require "snmp"
local ber = require "ber"

local function unhex(h)
  return (string.gsub(h, "%s", ""):gsub("%x%x", function(x)
    return string.char(tonumber(x, 16))
  end))
end

local function hex(s)
  return (string.gsub(s, ".", function(c)
    return string.format("%02x", string.byte(c))
  end))
end

local GET_DESCR = "302702010004067075626c6963a01a02026f0c020100020100300e300c06082b060102010101000500"
local GET_UPTIME = "302702010004067075626c6963a01a02026f0c020100020100300e300c06082b060102010103000500"
local RESP_DESCR = "305202010004067075626c6963a24502026f0c0201000201003039303706082b06010201010100"
  .. "042b6d6f6f6e7363616e206c616220534e4d50206167656e7420284e65742d534e4d50206f6e204c696e757829"
local RESP_UPTIME = "302a02010004067075626c6963a21d02026f0c0201000201003011300f06082b06010201010300430300e23f"
-- A v3 Report the agent sends to an SNMPv3 probe: not a v1/v2c response.
local REPORT_V3 = "306e020103300f02024a69020300ffe304010002010304223020041180001f8880b8f2b943cd58066b"
  .. "00000000020101020202430400040004003034041180001f8880b8f2b943cd58066b000000000400a81d02"
  .. "0237f00201000201003011300f060a2b060106030f01010400410101"

-- A datagram socket answering from a list: a string is a datagram, false a
-- timeout, anything else an error message.
local function fake_udp(replies)
  local sent, i = {}, 0
  return {
    sent = sent,
    send = function(_, data)
      sent[#sent + 1] = data
      return true
    end,
    recv = function(_, max)
      i += 1
      local r = replies[i]
      if r == nil or r == false then
        return nil, errors.new("timeout", "timeout") -- as ctx:udp's recv says it
      elseif type(r) == "table" then
        return nil, r[1]
      end
      return string.sub(r, 1, max)
    end,
  }
end

return {
  id = "snmp-test",
  description = "Unit tests of the snmp library (GetRequest and GetResponse on ber).",
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

    -- The requests nmap sent, byte for byte.
    eq(hex(snmp.get_request("public", 28428, { "1.3.6.1.2.1.1.1.0" })), GET_DESCR, "sysDescr request")
    eq(hex(snmp.get_request("public", 28428, { "1.3.6.1.2.1.1.3.0" }, snmp.V1)), GET_UPTIME, "sysUpTime request")
    local v2 = ber.decode(snmp.get_request("private", 5, { "1.3.6.1.2.1.1.1.0", "1.3.6.1.2.1.1.3.0" }, snmp.V2C))
    eq(v2[1].value, 1, "v2c version")
    eq(v2[2].value, "private", "community")
    eq(#v2[3][4], 2, "two varbinds")

    -- The agent's answers.
    local r, err = snmp.decode_response(unhex(RESP_DESCR))
    check(r, err)
    eq(r.version, 0, "version")
    eq(r.community, "public", "community")
    eq(r.id, 28428, "request id")
    eq(r.error_status, 0, "error status")
    eq(#r.varbinds, 1, "one varbind")
    eq(r.varbinds[1].oid, "1.3.6.1.2.1.1.1.0", "oid")
    eq(r.varbinds[1].type, "octets", "type")
    eq(r.varbinds[1].value, "moonscan lab SNMP agent (Net-SNMP on Linux)", "sysDescr")
    r, err = snmp.decode_response(unhex(RESP_UPTIME))
    check(r, err)
    eq(r.varbinds[1].type, "timeticks", "timeticks")
    eq(r.varbinds[1].value, 57919, "uptime")

    -- Every value type.
    local function resp_with(value)
      local vb = ber.sequence{ ber.sequence{ ber.oid("1.3.6.1.2.1.1.5.0"), value } }
      local pdu = ber.integer(9) .. ber.integer(0) .. ber.integer(0) .. vb
      return ber.sequence{ ber.integer(1), ber.octets("public"), ber.context(2, pdu, true) }
    end
    local app = function(tag, data)
      return ber.tlv(ber.id(ber.APPLICATION, false, tag), data)
    end
    local cases = {
      { ber.integer(-5), "integer", -5 },
      { ber.octets("x"), "octets", "x" },
      { ber.oid("1.3.6.1.4.1.8072.3.2.10"), "oid", "1.3.6.1.4.1.8072.3.2.10" },
      { ber.null(), "null", nil },
      { app(0, "\192\168\0\1"), "ipaddress", "192.168.0.1" },
      { app(1, "\0\255\255\255\255"), "counter32", 4294967295 },
      { app(2, "\1"), "gauge32", 1 },
      { app(3, "\0\226\63"), "timeticks", 57919 },
      { app(4, "\1\2"), "opaque", "\1\2" },
      { app(6, "\0\255\255\255\255\255\255\255\255"), "counter64", "0x00ffffffffffffffff" },
      { app(6, "\1\0\0\0\0"), "counter64", 4294967296 },
      { app(7, "\7"), "uinteger32", 7 },
      { ber.tlv(0x80, ""), "noSuchObject", nil },
      { ber.tlv(0x81, ""), "noSuchInstance", nil },
      { ber.tlv(0x82, ""), "endOfMibView", nil },
    }
    for _, c in ipairs(cases) do
      r, err = snmp.decode_response(resp_with(c[1]))
      check(r, c[2] .. ": " .. tostring(err))
      eq(r.version, 1, "v2c")
      eq(r.varbinds[1].type, c[2], "type")
      eq(r.varbinds[1].value, c[3], c[2] .. " value")
    end

    -- What is not a GetResponse, or not well formed, is refused.
    local function refused(bytes, what)
      local ok, got, why = pcall(snmp.decode_response, bytes)
      check(ok, what .. ": raised " .. tostring(got))
      check(got == nil and type(why) == "string", what .. ": accepted")
    end
    refused(unhex(GET_DESCR), "a GetRequest")
    refused(unhex(REPORT_V3), "an SNMPv3 report")
    refused(unhex(RESP_DESCR) .. "\0", "trailing byte")
    refused("", "empty datagram")
    refused("hello world", "garbage")
    refused(resp_with(app(0, "\1\2\3")), "short IpAddress")
    refused(resp_with(app(9, "\1")), "unknown application type")
    refused(resp_with(ber.sequence{ ber.null() }), "constructed value")
    refused(resp_with(ber.tlv(0x83, "")), "unknown exception")
    refused(resp_with(app(1, "\1\0\0\0\0\0\0\0\0")), "counter32 too large")
    local full = unhex(RESP_DESCR)
    for i = 0, #full - 1 do
      refused(string.sub(full, 1, i), "truncated to " .. i)
    end
    -- The response length patched to claim 2^32-1 bytes.
    refused("\48\132\255\255\255\255" .. string.sub(full, 3), "huge length")
    math.randomseed(7)
    for _ = 1, 300 do
      local b = { string.byte(full, 1, -1) }
      b[math.random(1, #b)] = math.random(0, 255)
      local ok, e = pcall(snmp.decode_response, string.char(table.unpack(b)))
      check(ok, "mutated datagram raised " .. tostring(e))
    end

    -- snmp.get over a datagram socket.
    local sock = fake_udp({ unhex(RESP_DESCR) })
    r, err = snmp.get(sock, "public", { "1.3.6.1.2.1.1.1.0" }, { id = 28428 })
    check(r, err)
    eq(hex(sock.sent[1]), GET_DESCR, "sent the request")
    eq(r.varbinds[1].value, "moonscan lab SNMP agent (Net-SNMP on Linux)", "get sysDescr")
    -- Garbage and another request's answer are skipped; the right one is kept.
    sock = fake_udp({ "junk", unhex(RESP_UPTIME), resp_with(ber.integer(1)) })
    r, err = snmp.get(sock, "public", { "1.3.6.1.2.1.1.5.0" }, { id = 9 })
    check(r, err)
    eq(r.id, 9, "matching id")
    -- A timeout, then an answer to the second send.
    sock = fake_udp({ false, unhex(RESP_UPTIME) })
    r, err = snmp.get(sock, "public", { "1.3.6.1.2.1.1.3.0" }, { id = 28428 })
    check(r, err)
    eq(#sock.sent, 2, "sent twice")
    eq(r.varbinds[1].value, 57919, "uptime after a retry")
    -- Silence: nil, "timeout", after `tries` sends.
    sock = fake_udp({})
    r, err = snmp.get(sock, "public", { "1.3.6.1.2.1.1.3.0" }, { tries = 3 })
    check(r == nil and err == "timeout", "silence: " .. tostring(err))
    eq(#sock.sent, 3, "three tries")
    -- A closed port ends it at once.
    sock = fake_udp({ { "port unreachable" } })
    r, err = snmp.get(sock, "public", { "1.3.6.1.2.1.1.3.0" })
    check(r == nil and err == "port unreachable", "unreachable: " .. tostring(err))
    eq(#sock.sent, 1, "no retry after unreachable")
    -- A flood of wrong answers is read at most max_replies a send.
    local flood = {}
    for i = 1, 100 do
      flood[i] = "junk"
    end
    sock = fake_udp(flood)
    r, err = snmp.get(sock, "public", { "1.3.6.1.2.1.1.3.0" }, { tries = 2, max_replies = 4 })
    check(r == nil and err, "flood")
    eq(#sock.sent, 2, "flood: two sends")

    return "ok " .. n
  end,
}
