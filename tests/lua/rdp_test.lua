-- rdp-test: unit tests of lib/rdp.lua (X.224 negotiation, CredSSP
-- TSRequest) on the bytes xrdp and FreeRDP's shadow server send, and on
-- cut and garbage ones, offline.
-- Run: moonscan plugins test tests/lua/rdp_test.lua --plugin-dir plugins
local rdp = require "rdp"
local ber = require "ber"
local ntlm = require "ntlm"

local function unhex(h)
  return (string.gsub(string.gsub(h, "%s", ""), "%x%x", function(x)
    return string.char(tonumber(x, 16))
  end))
end

local function hex(s)
  return (string.gsub(s, ".", function(c)
    return string.format("%02x", string.byte(c))
  end))
end

-- A stream socket over fixed bytes (recv_exact only).
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
  id = "rdp-test",
  description = "Unit tests of the rdp library (X.224 negotiation and CredSSP TSRequests).",
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

    -- The Connection Request nmap's rdp-ntlm-info sends (TLS, CredSSP, CredSSP EX).
    eq(hex(rdp.connection_request(bit32.bor(rdp.SSL, rdp.HYBRID, rdp.HYBRID_EX))),
      "0300002a25e00000000000" .. hex("Cookie: mstshash=nmap\r\n") .. "010008000b000000", "request")
    eq(#rdp.connection_request(0, "x"), 4 + 7 + 20 + 8, "request with another cookie")

    -- FreeRDP's shadow server with NLA selects CredSSP (flags 3).
    local freerdp = unhex("030000130ed000000000000203080002000000")
    local c, err = rdp.read_confirm(fake_sock(freerdp))
    eq(c and c.selected, rdp.HYBRID, "FreeRDP selects CredSSP: " .. tostring(err))
    eq(c and c.flags, 3, "FreeRDP's flags")
    -- xrdp (security_layer=negotiate) selects TLS.
    c = rdp.parse_confirm(unhex("0ed000001234000201080001000000"))
    eq(c and c.selected, rdp.SSL, "xrdp selects TLS")
    -- A server that wants CredSSP where only TLS was asked: a failure.
    c = rdp.parse_confirm(unhex("0ed000000000000300080005000000"))
    eq(c and c.failure, 5, "failure code")
    eq(c and c.reason, "HYBRID_REQUIRED_BY_SERVER", "failure name")
    -- An old server's confirm has no negotiation at all.
    c = rdp.parse_confirm(unhex("06d00000123400"))
    check(c and c.selected == nil and c.failure == nil, "no negotiation")

    -- Cut and garbage confirms are errors, never a raise.
    for i = 0, #freerdp - 1 do
      c, err = rdp.read_confirm(fake_sock(string.sub(freerdp, 1, i)))
      check(c == nil and type(err) == "string", "cut at " .. i)
    end
    c, err = rdp.read_confirm(fake_sock(unhex("0400001300")))
    check(c == nil and string.find(err, "not a TPKT", 1, true), "TPKT version: " .. tostring(err))
    c, err = rdp.read_confirm(fake_sock(unhex("0300ffff")))
    check(c == nil and string.find(err, "65535 bytes", 1, true), "huge TPKT: " .. tostring(err))
    c, err = rdp.parse_confirm(unhex("0ee000000000000203080002000000"))
    check(c == nil and string.find(err, "0xE0", 1, true), "a request is no confirm: " .. tostring(err))
    c, err = rdp.parse_confirm(unhex("0ed000000000000203090002000000"))
    check(c == nil and string.find(err, "length", 1, true), "negotiation length: " .. tostring(err))
    c, err = rdp.parse_confirm(unhex("0ed000000000000703080002000000"))
    check(c == nil and string.find(err, "type 7", 1, true), "negotiation type: " .. tostring(err))
    c, err = rdp.parse_confirm(unhex("40d000000000000203080002000000"))
    check(c == nil and string.find(err, "length indicator", 1, true), "length indicator: " .. tostring(err))
    for _, bad in ipairs({ "", "\0", string.rep("\255", 14), string.rep("\0", 40) }) do
      c, err = rdp.parse_confirm(bad)
      check(c == nil and type(err) == "string", "garbage " .. hex(bad))
    end

    -- A TSRequest carrying a NEGOTIATE, as Windows' client sends it.
    local req = rdp.ts_request(ntlm.negotiate())
    eq(hex(string.sub(req, 1, 16)), "3037a003020106a130302e302ca02a04", "TSRequest head")
    eq(rdp.nego_token(req), ntlm.negotiate(), "round trip")
    eq(rdp.nego_token(rdp.ts_request("x", 2)), "x", "version 2")
    -- Read whole off a stream, then one byte short.
    local got = rdp.receive_ts_request(fake_sock(req .. "trailing"))
    eq(got, req, "receive")
    got, err = rdp.receive_ts_request(fake_sock(string.sub(req, 1, -2)))
    check(got == nil and string.find(err, "closed after", 1, true), "cut TSRequest: " .. tostring(err))

    -- A TSRequest with only an errorCode (MS-CSSP version 3+).
    local refused = ber.sequence{ ber.context(0, ber.integer(6), true), ber.context(4, ber.integer(-1073741715), true) }
    got, err = rdp.nego_token(refused)
    check(got == nil and err == "CredSSP error 0xC000006D", "errorCode: " .. tostring(err))
    -- Neither token nor code; not a SEQUENCE; not BER; trailing bytes.
    got, err = rdp.nego_token(ber.sequence{ ber.context(0, ber.integer(6), true) })
    check(got == nil and string.find(err, "without a negoToken", 1, true), "no token: " .. tostring(err))
    got, err = rdp.nego_token(ber.octets("x"))
    check(got == nil and string.find(err, "not a SEQUENCE", 1, true), "octets: " .. tostring(err))
    got, err = rdp.nego_token("\48\200")
    check(got == nil and string.find(err, "TSRequest", 1, true), "not BER: " .. tostring(err))
    got, err = rdp.nego_token(req .. "\0")
    check(got == nil and string.find(err, "bytes after", 1, true), "trailing: " .. tostring(err))
    -- A negoToken that is no OCTET STRING.
    local odd = ber.sequence{ ber.context(1, ber.sequence{ ber.sequence{ ber.context(0, ber.integer(1), true) } }, true) }
    got = rdp.nego_token(odd)
    check(got == nil, "token of the wrong type")
    got, err = rdp.nego_token(nil)
    check(got == nil and err == "no TSRequest", "nil")

    -- Every cut of a TSRequest decodes to nil, why.
    for i = 0, #req - 1 do
      got, err = rdp.nego_token(string.sub(req, 1, i))
      check(got == nil and type(err) == "string", "TSRequest cut at " .. i)
    end
    return "ok " .. n
  end,
}
