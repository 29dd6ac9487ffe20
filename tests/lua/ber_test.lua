-- ber-test: unit tests of lib/ber.lua on fixed bytes, offline.
-- Run: moonscan plugins test libtests/ber_test.lua --plugin-dir plugins
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

-- A stream socket over fixed bytes, as ber.receive reads one.
local function fake_sock(bytes)
  local pos = 1
  return {
    recv_exact = function(_, n)
      if pos + n - 1 > #bytes then
        local left = #bytes - pos + 1
        pos = #bytes + 1
        return nil, ("closed after %d of %d bytes"):format(left, n)
      end
      local s = string.sub(bytes, pos, pos + n - 1)
      pos += n
      return s
    end,
  }
end

return {
  id = "ber-test",
  description = "Unit tests of the ber library (ASN.1 BER encode and decode).",
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
    local function fails(s, what)
      local ok, node, err = pcall(ber.decode, s)
      check(ok, what .. ": decode raised " .. tostring(node))
      check(node == nil and type(err) == "string", what .. ": decoded garbage")
      return err
    end

    -- Known encodings (X.690 examples and captured LDAP/SNMP bytes).
    local ints = {
      { 0, "020100" }, { 1, "020101" }, { 127, "02017f" }, { 128, "02020080" }, { 256, "02020100" },
      { -1, "0201ff" }, { -128, "020180" }, { -129, "0202ff7f" }, { 28428, "02026f0c" },
      { 65535, "020300ffff" }, { -32768, "02028000" }, { 2 ^ 31 - 1, "02047fffffff" },
    }
    for _, c in ipairs(ints) do
      eq(hex(ber.integer(c[1])), c[2], "integer " .. c[1])
      eq(ber.decode(unhex(c[2])).value, c[1], "decode integer " .. c[1])
    end
    eq(hex(ber.length(0)), "00", "length 0")
    eq(hex(ber.length(127)), "7f", "length 127")
    eq(hex(ber.length(128)), "8180", "length 128")
    eq(hex(ber.length(256)), "820100", "length 256")
    eq(hex(ber.length(65536)), "83010000", "length 65536")
    eq(hex(ber.boolean(true)), "0101ff", "true")
    eq(hex(ber.boolean(false)), "010100", "false")
    eq(hex(ber.null()), "0500", "null")
    eq(hex(ber.enumerated(2)), "0a0102", "enumerated")
    eq(hex(ber.octets("abc")), "0403616263", "octets")
    eq(hex(ber.oid("1.3.6.1.2.1.1.1.0")), "06082b06010201010100", "sysDescr oid")
    eq(hex(ber.oid("1.2.840.113549")), "06062a864886f70d", "rsadsi oid")
    eq(hex(ber.oid({ 2, 999, 3 })), "0603883703", "X.690 oid 2.999.3")
    eq(ber.oid_of(unhex("883703")), "2.999.3", "decode 2.999.3")
    eq(ber.oid_of(unhex("2a864886f70d")), "1.2.840.113549", "decode rsadsi")
    eq(hex(ber.id(ber.CONTEXT, false, 7)), "87", "[7]")
    eq(hex(ber.id(ber.APPLICATION, true, 3)), "63", "[APPLICATION 3] constructed")
    eq(hex(ber.id(ber.CONTEXT, true, 100)), "bf64", "[100] constructed, high tag")
    eq(hex(ber.id(ber.PRIVATE, false, 201)), "df8149", "private 201")
    -- nmap's anonymous LDAP bind.
    local bind = ber.sequence{
      ber.integer(1),
      ber.application(0, ber.integer(3) .. ber.octets("") .. ber.octets("", 0x80), true),
    }
    eq(hex(bind), "300c020101600702010304008000", "LDAP bind")
    -- The captured SNMPv1 GetRequest for sysDescr.0 (request id 28428).
    local get = ber.sequence{
      ber.integer(0),
      ber.octets("public"),
      ber.context(0, ber.integer(28428) .. ber.integer(0) .. ber.integer(0)
        .. ber.sequence{ ber.sequence{ ber.oid("1.3.6.1.2.1.1.1.0"), ber.null() } }, true),
    }
    eq(hex(get), "302702010004067075626c6963a01a02026f0c020100020100300e300c06082b060102010101000500", "SNMP get")

    -- Decoding a tree.
    local t, after = ber.decode(get)
    check(t, after)
    eq(after, #get + 1, "position after")
    eq(t.class, "universal", "class")
    check(t.constructed, "constructed")
    eq(t.tag, ber.SEQUENCE, "sequence tag")
    eq(#t, 3, "three children")
    eq(t[1].value, 0, "version")
    eq(t[2].value, "public", "community")
    eq(t[3].class, "context", "pdu class")
    eq(t[3].tag, 0, "pdu tag")
    eq(t[3].id, 0xa0, "pdu id")
    eq(t[3][4][1][1].value, "1.3.6.1.2.1.1.1.0", "varbind oid")
    eq(t[3][4][1][2].tag, ber.NULL, "varbind null")
    eq(t[3][4][1][2].value, nil, "null value")
    local hi = ber.decode(ber.tlv(ber.id(ber.CONTEXT, false, 100), "x"))
    eq(hi.tag, 100, "high tag number")
    eq(hi.data, "x", "high tag data")
    local b = ber.decode(unhex("0101ff"))
    eq(b.value, true, "boolean true")
    eq(ber.decode(unhex("010100")).value, false, "boolean false")
    -- Trailing bytes are left to the caller.
    local _, pos2 = ber.decode(unhex("0500" .. "0500"))
    eq(pos2, 3, "stops after one element")
    local second = ber.decode(unhex("05000201ff"), 3)
    eq(second.value, -1, "decode at a position")
    -- Long-form lengths, non-minimal included.
    local long = ber.octets(string.rep("a", 300))
    eq(hex(string.sub(long, 1, 4)), "0482012c", "long form")
    eq(#ber.decode(long).value, 300, "long form decodes")
    eq(ber.decode(unhex("0481036162 63")).value, "abc", "non-minimal long form")
    eq(ber.uint_of(unhex("00e23f")), 57919, "uint")
    eq(ber.uint_of(unhex("ffffffff")), 4294967295, "uint 32 bits")
    eq(ber.int_of(unhex("ffffffff")), -1, "int of ffffffff")

    -- Round trips.
    math.randomseed(4)
    local samples = { 0, 1, -1, 2 ^ 53, -(2 ^ 53), 2 ^ 32, -(2 ^ 32), 255, -255, 256, -256 }
    for _ = 1, 300 do
      local bits = math.random(0, 53)
      local v = math.floor(math.random() * 2 ^ bits)
      samples[#samples + 1] = math.random(0, 1) == 0 and v or -v
    end
    for _, v in ipairs(samples) do
      eq(ber.decode(ber.integer(v)).value, v, "integer round trip")
      eq(ber.decode(ber.enumerated(v)).value, v, "enumerated round trip")
    end
    for _, oid in ipairs({ "0.0", "1.3.6.1.4.1.4203.1.11.1", "2.5.4.3", "1.3.6.1.2.1.1.3.0", "2.100.9007199254740992" }) do
      eq(ber.decode(ber.oid(oid)).value, oid, "oid round trip " .. oid)
    end
    for _, len in ipairs({ 0, 1, 127, 128, 255, 256, 65535, 65536 }) do
      local s = string.rep("z", len)
      local node = ber.decode(ber.octets(s, 0x84)) -- [4] primitive
      eq(node.class, "context", "implicit tag class")
      eq(node.data, s, "octets round trip " .. len)
    end
    local nested = ber.set{ ber.sequence{ ber.boolean(true), ber.null() }, ber.application(1, "", false) }
    local nt = ber.decode(nested)
    eq(nt.tag, ber.SET, "set")
    eq(nt[1][1].value, true, "nested boolean")
    eq(nt[2].class, "application", "application class")
    eq(nt[2].data, "", "empty application")

    -- Truncated input: every proper prefix of a valid element fails.
    for i = 0, #get - 1 do
      fails(string.sub(get, 1, i), "prefix of " .. i .. " bytes")
    end
    -- Lengths past the input, in every form.
    fails(unhex("0405616263"), "short length past input")
    fails(unhex("0484ffffffff61"), "huge length")
    fails(unhex("04857fffffffff"), "length in 5 bytes")
    fails(unhex("0489ffffffffffffffffff"), "length in 9 bytes")
    fails(unhex("3080050000 00"), "indefinite length")
    fails(unhex("300304056162 63"), "child longer than parent")
    fails(unhex("3004020101 05 00"), "child header cut by parent")
    fails(unhex("1f"), "high tag cut short")
    fails(unhex("1f8080808001 00"), "tag number too large")
    -- Malformed universal values.
    fails(unhex("0200"), "empty integer")
    fails(unhex("0209010000000000000000"), "integer too large")
    fails(unhex("010200ff"), "boolean of two bytes")
    fails(unhex("050100"), "null with content")
    fails(unhex("0600"), "empty oid")
    fails(unhex("06022b81"), "oid ending inside an arc")
    fails(unhex("060affffffffffffffffff7f"), "oid arc too large")
    -- Depth and element bounds.
    local function nest(depth)
      local s = ber.null()
      for _ = 2, depth do
        s = ber.sequence(s)
      end
      return s
    end
    check(ber.decode(nest(32)), "32 levels decode")
    local why = fails(nest(33), "33 levels")
    check(string.find(why, "deeper", 1, true), why)
    check(ber.decode(ber.sequence(string.rep(ber.null(), 9999))), "10000 elements decode")
    why = fails(ber.sequence(string.rep(ber.null(), 10000)), "10001 elements")
    check(string.find(why, "10000", 1, true), why)
    -- Garbage: random bytes never raise an error.
    for _ = 1, 400 do
      local len = math.random(0, 40)
      local bytes = {}
      for i = 1, len do
        bytes[i] = math.random(0, 255)
      end
      local ok, err = pcall(ber.decode, string.char(table.unpack(bytes)))
      check(ok, "garbage raised " .. tostring(err))
    end

    -- Reading one element from a stream.
    local sock = fake_sock(get .. bind)
    eq(ber.receive(sock), get, "receive first")
    eq(ber.receive(sock), bind, "receive second")
    local r, rerr = ber.receive(sock)
    check(r == nil and rerr, "receive at the end")
    eq(ber.receive(fake_sock(long)), long, "receive long form")
    local high = ber.tlv(ber.id(ber.CONTEXT, true, 200), ber.null())
    eq(ber.receive(fake_sock(high)), high, "receive high tag")
    r, rerr = ber.receive(fake_sock(long), 100)
    check(r == nil and string.find(rerr, "limit", 1, true), "receive over the limit: " .. tostring(rerr))
    r, rerr = ber.receive(fake_sock(unhex("3084ffffffff")), 1048576)
    check(r == nil and string.find(rerr, "limit", 1, true), "receive huge length: " .. tostring(rerr))
    r, rerr = ber.receive(fake_sock(unhex("308000")))
    check(r == nil and string.find(rerr, "indefinite", 1, true), "receive indefinite: " .. tostring(rerr))
    r, rerr = ber.receive(fake_sock(string.sub(get, 1, 20)))
    check(r == nil and rerr, "receive cut short")
    r, rerr = ber.receive(fake_sock(unhex("1f8181818101")))
    check(r == nil and rerr, "receive tag too large: " .. tostring(rerr))

    return "ok " .. n
  end,
}
