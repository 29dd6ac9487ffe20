-- dns-test: unit tests of lib/dns.lua on the query nmap's dns-nsid sends
-- and the answers the lab's dnsmasq (198.18.0.2) and BIND (198.18.0.5)
-- gave to it (capture/dnscap.py, capture/nmap_query.txt), on a hand-made
-- NSID answer, and on truncated, garbage and looping input, offline.
local dns = require "dns"

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

-- nmap 7.93's id.server query (id 1): RD, CH TXT, OPT 4096 DO with an empty NSID.
local NMAP_QUERY = "000101000001000000000001026964067365727665720000100003"
  .. "0000291000000080000004" .. "00030000"
-- dnsmasq 2.90: id.server is NOTIMP (with an OPT, no options); version.bind is a TXT.
local DNSMASQ_ID = "12348184000100000000000102696406736572766572000010000300002904d0000080000000"
local DNSMASQ_VERSION = "1235858000010001000000000776657273696f6e0462696e640000100003c00c0010000300000000000d0c646e736d6173712d322e3930"
-- BIND 9.18: id.server is NOERROR with no answer and an SOA (compressed names).
local BIND_ID = "123485000001000000010001026964067365727665720000100003c00c00060003000151800023c00c0a686f7374"
  .. "6d6173746572c00c000000000000708000001c2000093a800001518000002904d0000080000000"
local BIND_VERSION = "1235850000010001000000000776657273696f6e0462696e640000100003c00c0010000300000000001918392e31"
  .. "382e34392d317e646562313275332d44656269616e"

-- A datagram socket answering from a list: a string is a datagram, false a
-- timeout, a table an error message.
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
      return r
    end,
  }
end

-- A stream socket holding `data` to read.
local function fake_tcp(data)
  local sent, pos = {}, 1
  return {
    sent = sent,
    send = function(_, s)
      sent[#sent + 1] = s
      return true
    end,
    recv_exact = function(_, n)
      if pos + n - 1 > #data then
        return nil, "closed"
      end
      local s = string.sub(data, pos, pos + n - 1)
      pos += n
      return s
    end,
  }
end

return {
  id = "dns-test",
  description = "Unit tests of the dns library (query building, answer parsing, exchange).",
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
    local T, CH = dns.TYPE.TXT, dns.CLASS.CH
    local NSID_EDNS = { udp_size = 4096, dnssec_ok = true, options = { { code = dns.OPT_NSID, data = "" } } }

    -- The query nmap sends, byte for byte.
    eq(hex(dns.encode_query{ id = 1, name = "id.server", type = T, class = CH, edns = NSID_EDNS }), NMAP_QUERY, "id.server query")
    eq(
      hex(dns.encode_query{ id = 0x1235, name = "version.bind.", type = T, class = CH }),
      "123501000001000000000000" .. "0776657273696f6e0462696e6400" .. "00100003",
      "version.bind query"
    )
    eq(hex(dns.encode_query{ id = 2, name = "a", rd = false }), "000200000001000000000000016100" .. "00010001", "no RD, A IN")
    eq(dns.encode_name(""), "\0", "root")
    check(dns.encode_name(string.rep("a", 64) .. ".com") == nil, "64-byte label refused")
    check(dns.encode_name(string.rep("abcdefg.", 40)) == nil, "320-byte name refused")
    check(dns.encode_query{ id = 1, name = string.rep("x", 70) } == nil, "query with a long label refused")

    -- Our own query decodes back.
    local q = dns.decode(unhex(NMAP_QUERY))
    check(q, "query decodes")
    eq(q.qr, false, "query: QR")
    eq(q.rd, true, "query: RD")
    eq(q.questions[1].name, "id.server", "query: name")
    eq(q.additional[1].opt.udp_size, 4096, "query: udp size")
    eq(q.additional[1].opt.dnssec_ok, true, "query: DO")
    eq(q.additional[1].opt.options[1].code, dns.OPT_NSID, "query: NSID option")
    eq(q.additional[1].opt.options[1].data, "", "query: empty NSID")

    -- dnsmasq.
    local m, err = dns.decode(unhex(DNSMASQ_ID))
    check(m, err)
    eq(m.id, 0x1234, "id")
    eq(m.qr, true, "QR")
    eq(m.rcode, 4, "NOTIMP")
    eq(m.ra, true, "RA")
    eq(#m.answers, 0, "no answers")
    eq(#m.additional, 1, "an OPT")
    eq(m.additional[1].type, dns.TYPE.OPT, "OPT type")
    eq(m.additional[1].opt.udp_size, 1232, "dnsmasq udp size")
    eq(#m.additional[1].opt.options, 0, "no options")
    eq(dns.nsid(m), nil, "no NSID")
    m, err = dns.decode(unhex(DNSMASQ_VERSION))
    check(m, err)
    eq(m.aa, true, "AA")
    eq(#m.answers, 1, "one answer")
    eq(m.answers[1].name, "version.bind", "compressed owner name")
    eq(m.answers[1].class, CH, "CHAOS")
    eq(m.answers[1].txt[1], "dnsmasq-2.90", "dnsmasq version")

    -- BIND.
    m, err = dns.decode(unhex(BIND_ID))
    check(m, err)
    eq(m.rcode, 0, "NOERROR")
    eq(#m.answers, 0, "no answer")
    eq(m.authority[1].type, dns.TYPE.SOA, "SOA")
    eq(m.authority[1].name, "id.server", "SOA owner")
    eq(dns.read_name(unhex(BIND_ID), 40), "id.server", "SOA mname (pointer)")
    local rname, after = dns.read_name(unhex(BIND_ID), 42)
    eq(rname, "hostmaster.id.server", "SOA rname (label, then pointer)")
    eq(after, 55, "position after a pointer")
    eq(m.additional[1].opt.dnssec_ok, true, "BIND DO")
    m, err = dns.decode(unhex(BIND_VERSION))
    check(m, err)
    eq(m.answers[1].txt[1], "9.18.49-1~deb12u3-Debian", "BIND version")

    -- An answer with an NSID (made by hand: BIND with server-id set).
    local nsid_answer = string.pack(">I2I2I2I2I2I2", 7, 0x8500, 1, 1, 0, 1)
      .. dns.encode_name("id.server") .. string.pack(">I2I2", T, CH)
      .. "\192\12" .. string.pack(">I2I2I4s2", T, CH, 0, string.pack("s1s1", "ns1", "two"))
      .. "\0" .. string.pack(">I2I2I4s2", dns.TYPE.OPT, 1232, 0x8000,
        dns.encode_options{ { code = 10, data = "cookie!!" }, { code = dns.OPT_NSID, data = "ns1.lab" } })
    m, err = dns.decode(nsid_answer)
    check(m, err)
    eq(dns.nsid(m), "ns1.lab", "NSID")
    eq(#m.answers[1].txt, 2, "two strings")
    eq(m.answers[1].txt[2], "two", "second string")
    eq(m.additional[1].opt.options[1].code, 10, "cookie first")

    -- TXT and OPT data that do not parse: the record stays, without txt/opt.
    eq(#dns.txt(""), 0, "empty TXT")
    check(dns.txt("\5abc") == nil, "TXT string past its end")
    check(dns.options("\0\3\0") == nil, "option header cut")
    check(dns.options("\0\3\0\9abc") == nil, "option past its end")
    local bad_txt = string.pack(">I2I2I2I2I2I2", 8, 0x8000, 0, 1, 0, 0) .. "\0" .. string.pack(">I2I2I4s2", T, CH, 0, "\9x")
    m, err = dns.decode(bad_txt)
    check(m, err)
    eq(m.answers[1].txt, nil, "bad TXT: no strings")
    eq(m.answers[1].data, "\9x", "bad TXT: raw data")

    -- Truncated: every prefix of every capture is refused, never raises.
    local function refused(bytes, what)
      local ok, got, why = pcall(dns.decode, bytes)
      check(ok, what .. ": raised " .. tostring(got))
      check(got == nil and type(why) == "string", what .. ": accepted")
    end
    for _, h in ipairs{ DNSMASQ_ID, DNSMASQ_VERSION, BIND_ID, BIND_VERSION } do
      local full = unhex(h)
      for i = 0, #full - 1 do
        refused(string.sub(full, 1, i), "truncated to " .. i)
      end
    end
    refused(nil, "nil")
    refused("hello world, this is not DNS", "garbage")
    refused(string.pack(">I2I2I2I2I2I2", 1, 0x8000, 0, 65535, 0, 0), "65535 answers, no bytes")

    -- Names: loops, forward pointers, reserved label types, too long, too many hops.
    local head = string.pack(">I2I2I2I2I2I2", 1, 0x8000, 1, 0, 0, 0)
    refused(head .. "\192\12" .. "\0\16\0\3", "pointer to itself")
    refused(head .. "\1a\192\12" .. "\0\16\0\3", "label then pointer back to it")
    refused(head .. "\192\14\0\0\16\0\3", "forward pointer")
    refused(head .. "\1a\192\14\1b\192\12" .. "\0\16\0\3", "two pointers in a loop")
    refused(head .. "\64abc\0" .. "\0\16\0\3", "label type 01")
    refused(head .. "\128abc\0" .. "\0\16\0\3", "label type 10")
    refused(head .. "\192", "pointer cut short")
    refused(head .. string.rep("\63" .. string.rep("x", 63), 4) .. "\0\0\16\0\3", "name of 257 bytes")
    local ok_name = dns.decode(head .. string.rep("\62" .. string.rep("x", 62), 4) .. "\0\0\16\0\3")
    check(ok_name and #ok_name.questions[1].name == 4 * 62 + 3, "name of 253 bytes")
    -- A chain of pointers, each to the one before it: 16 hops pass, 17 do not.
    local function chain(hops)
      local s = head .. "\1z\0" -- the name "z" at offset 12
      local prev = 12
      for _ = 1, hops do
        local at = #s
        s ..= string.pack(">I2", 0xc000 + prev)
        prev = at
      end
      return s, #s - 1 -- the last pointer's 1-based position
    end
    local s16, p16 = chain(16)
    eq(dns.read_name(s16, p16), "z", "16 pointers")
    local s17, p17 = chain(17)
    local none, why = dns.read_name(s17, p17)
    check(none == nil and string.find(why, "pointers", 1, true), "17 pointers: " .. tostring(why))

    -- Mutated captures never raise.
    math.randomseed(5001)
    for _, h in ipairs{ DNSMASQ_VERSION, BIND_ID } do
      local full = unhex(h)
      for _ = 1, 300 do
        local b = { string.byte(full, 1, -1) }
        for _ = 1, 3 do
          b[math.random(1, #b)] = math.random(0, 255)
        end
        local ok, e = pcall(dns.decode, string.char(table.unpack(b)))
        check(ok, "mutated answer raised " .. tostring(e))
      end
    end

    -- Exchange over UDP: skips garbage and other ids, resends after a timeout.
    local query = unhex("1235" .. string.sub(NMAP_QUERY, 5))
    local sock = fake_udp({ "junk", unhex(DNSMASQ_VERSION) })
    m, err = dns.exchange(sock, query)
    check(m, err)
    eq(m.id, 0x1235, "matching id")
    eq(sock.sent[1], query, "sent the query")
    sock = fake_udp({ unhex(DNSMASQ_ID), false, unhex(BIND_VERSION) })
    m, err = dns.exchange(sock, query)
    check(m, err)
    eq(#sock.sent, 2, "resent after a timeout")
    sock = fake_udp({})
    m, err = dns.exchange(sock, query, { tries = 3 })
    check(m == nil and err == "timeout", "silence: " .. tostring(err))
    eq(#sock.sent, 3, "three tries")
    sock = fake_udp({ { "port unreachable" } })
    m, err = dns.exchange(sock, query)
    check(m == nil and err == "port unreachable", "unreachable: " .. tostring(err))
    eq(#sock.sent, 1, "no retry after unreachable")
    local flood = {}
    for i = 1, 100 do
      flood[i] = unhex(DNSMASQ_ID) -- another id
    end
    sock = fake_udp(flood)
    m, err = dns.exchange(sock, query)
    check(m == nil and err, "flood of other answers")
    eq(#sock.sent, 2, "flood: two sends")
    -- The query itself echoed back (QR clear) is not an answer.
    sock = fake_udp({ query })
    check(dns.exchange(sock, query, { tries = 1 }) == nil, "echo refused")

    -- Over TCP: a two-byte length around each message.
    sock = fake_tcp(string.pack(">s2", unhex(BIND_VERSION)))
    m, err = dns.exchange(sock, query, { tcp = true })
    check(m, err)
    eq(sock.sent[1], string.pack(">s2", query), "length-prefixed query")
    eq(m.answers[1].txt[1], "9.18.49-1~deb12u3-Debian", "TCP answer")
    sock = fake_tcp(string.pack(">I2", 500) .. "short")
    m, err = dns.exchange(sock, query, { tcp = true })
    check(m == nil and err == "closed", "TCP answer cut short")
    sock = fake_tcp(string.pack(">s2", unhex(DNSMASQ_ID)))
    check(dns.exchange(sock, query, { tcp = true }) == nil, "TCP answer to another id")

    return "ok " .. n
  end,
}
