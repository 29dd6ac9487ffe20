-- Unit tests of lib/pgsql.lua on fixed bytes: what the lab's PostgreSQL
-- (198.18.0.3:5432) answered on 2026-11-25 to an SSLRequest and to startup
-- packets for protocols 3.65535, 4.0 and 2.0 (captured with a python
-- socket inside `ip netns exec msscan`), made-up answers of other servers
-- (trust, SCRAM, MD5, PostgreSQL 18), and every truncation of them plus
-- pseudo-random garbage, which must never raise an error.
local pgsql = require "pgsql"

local LAB_SSL = "S"
local LAB_3_65535 = "v\x00\x00\x00\x0C\x00\x03\x00\x00\x00\x00\x00\x00E\x00\x00\x00\x9ESFATAL\x00VFATAL\x00C28000\x00Mno pg_hba.conf "
  .. "entry for host \"198.18.0.1\", user \"moonscan\", database \"moonscan\", no encryption\x00Fauth.c\x00L544\x00"
  .. "RClientAuthentication\x00\x00"
local LAB_4_0 = "E\x00\x00\x00\x83SFATAL\x00VFATAL\x00C0A000\x00Munsupported frontend protocol 4.0: server supports 3.0 "
  .. "to 3.0\x00Fpostmaster.c\x00L2222\x00RProcessStartupPacket\x00\x00"
local LAB_2_0 = "EFATAL:  unsupported frontend protocol 2.0: server supports 3.0 to 3.0\x0A\x00"

-- A socket that replays `data` (then says "closed").
local function fake(data)
  local s = { data = data }
  function s:recv_exact(n)
    if #self.data < n then
      return nil, "closed after " .. #self.data .. " of " .. n .. " bytes"
    end
    local out = string.sub(self.data, 1, n)
    self.data = string.sub(self.data, n + 1)
    return out
  end
  function s:recv(max)
    if self.data == "" then
      return nil, "closed"
    end
    local out = string.sub(self.data, 1, max)
    self.data = string.sub(self.data, max + 1)
    return out
  end
  return s
end

local function msg(kind, body)
  return kind .. string.pack(">I4", #body + 4) .. body
end

return {
  id = "pgsql-test",
  description = "Unit tests of the pgsql library module.",
  categories = { "safe" },
  ports = { 1 },
  run = function(ctx)
    local n = 0
    local function check(cond, what)
      assert(cond, what)
      n += 1
    end

    -- What is sent.
    check(pgsql.ssl_request() == "\0\0\0\8\4\210\22\47", "SSLRequest")
    check(pgsql.startup(3, 65535, { { "user", "moonscan" } }) == "\0\0\0\23\0\3\255\255user\0moonscan\0\0", "startup 3.65535")
    check(pgsql.startup(4, 0) == "\0\0\0\9\0\4\0\0\0", "startup 4.0, no parameters")
    check(LAB_SSL == "S", "the lab offers SSL")

    -- The lab's answer to 3.65535: NegotiateProtocolVersion, then the pg_hba refusal.
    local s = fake(LAB_3_65535)
    local kind, body = pgsql.read_message(s)
    check(kind == "v" and #body == 8, "NegotiateProtocolVersion read")
    local neg = pgsql.negotiate(body)
    check(neg.major == 3 and neg.minor == 0 and #neg.options == 0, "newest protocol 3.0 (sent as 0x00030000)")
    kind, body = pgsql.read_message(s)
    check(kind == "E", "then an ErrorResponse")
    local f = pgsql.fields(body)
    check(f.S == "FATAL" and f.V == "FATAL" and f.C == "28000", "severity and SQLSTATE")
    check(f.M == 'no pg_hba.conf entry for host "198.18.0.1", user "moonscan", database "moonscan", no encryption', "message")
    check(f.F == "auth.c" and f.L == "544" and f.R == "ClientAuthentication", "file, line, routine")
    local r, why = pgsql.read_message(s)
    check(r == nil and string.find(why, "no message", 1, true), "then the end")
    local seen = pgsql.after_startup(fake(LAB_3_65535))
    check(seen.negotiate.minor == 0 and seen.error.C == "28000" and seen.auth == nil and seen.ended == nil, "after_startup")

    -- The lab's answer to 4.0, and the old-style one to 2.0.
    seen = pgsql.after_startup(fake(LAB_4_0))
    check(seen.error.C == "0A000" and seen.error.F == "postmaster.c" and seen.error.R == "ProcessStartupPacket", "4.0 refused")
    local lo, hi = pgsql.supported_range(seen.error.M)
    check(lo == "3.0" and hi == "3.0", "range 3.0 to 3.0")
    kind, body, r = pgsql.read_message(fake(LAB_2_0))
    check(kind == "E" and r == "v2" and string.sub(body, 1, 6) == "FATAL:", "protocol 2 error read")
    f = pgsql.fields(body, true)
    check(f.S == "FATAL" and f.M == "unsupported frontend protocol 2.0: server supports 3.0 to 3.0", "protocol 2 error fields")
    seen = pgsql.after_startup(fake(LAB_2_0))
    check(seen.error_v2 == "v2" and pgsql.supported_range(seen.error.M) == "3.0", "after_startup, protocol 2 error")
    kind, body = pgsql.read_message(fake("EFATAL:  no NUL, then closed"))
    check(kind == "E" and body == "FATAL:  no NUL, then closed", "protocol 2 error without NUL")
    kind, body = pgsql.read_message(fake("E" .. string.rep("x", 5000)))
    check(kind == "E" and #body == 1024, "protocol 2 error bounded")

    -- Other servers: trust (then parameters and ReadyForQuery), SCRAM, MD5, an old one, PostgreSQL 18.
    local trust = msg("R", "\0\0\0\0") .. msg("S", "server_version\00016.4\0") .. msg("S", "TimeZone\0UTC\0")
      .. msg("K", "\0\0\0\1\0\0\0\2") .. msg("Z", "I") .. msg("S", "late\0x\0")
    seen = pgsql.after_startup(fake(trust))
    check(seen.auth.code == 0 and seen.auth.method == "none (trust)", "trust")
    check(seen.params.server_version == "16.4" and seen.params.TimeZone == "UTC" and seen.params.late == nil, "parameters to Z")
    seen = pgsql.after_startup(fake(msg("R", "\0\0\0\10SCRAM-SHA-256-PLUS\0SCRAM-SHA-256\0\0") .. msg("S", "x\0y\0")))
    check(seen.auth.method == "SASL" and #seen.auth.mechanisms == 2, "SASL: stops at the request")
    check(seen.auth.mechanisms[2] == "SCRAM-SHA-256" and next(seen.params) == nil, "SASL mechanisms")
    local a = pgsql.auth("\0\0\0\5abcd")
    check(a.code == 5 and a.method == "MD5 password" and a.mechanisms == nil, "MD5")
    check(pgsql.auth("\0\0\0\99").method == "code 99", "unknown code")
    seen = pgsql.after_startup(fake("EFATAL:  unsupported frontend protocol 3.65535: server supports 1.0 to 3.0\n\0"))
    lo, hi = pgsql.supported_range(seen.error.M)
    check(lo == "1.0" and hi == "3.0" and seen.negotiate == nil, "an old server")
    neg = pgsql.negotiate("\0\0\0\2\0\0\0\2_pq_.a\0_pq_.b\0")
    check(neg.major == 3 and neg.minor == 2 and neg.options[2] == "_pq_.b", "minor as documented, and options")

    -- Version families.
    local function fam(facts)
      local l, h = pgsql.version_family(facts)
      return l and h and pgsql.family_text(l, h) or (l or h) and pgsql.family_text(l, h) or nil
    end
    check(fam({ range_lo = "3.0", range_hi = "3.0", startup_file = "postmaster.c", negotiates = true, v_field = true }) == "14 to 16", "the lab: 14 to 16")
    check(fam({ range_lo = "3.0", range_hi = "3.0", startup_file = "backend_startup.c" }) == "17", "17")
    check(fam({ range_lo = "3.0", range_hi = "3.2", startup_file = "backend_startup.c" }) == "18 or later", "18")
    check(fam({ range_lo = "2.0", range_hi = "3.0", v_field = true }) == "9.6 to 13", "9.6 to 13")
    check(fam({ range_lo = "1.0", range_hi = "3.0" }) == "13 or earlier", "old")
    check(fam({ range_lo = "2.0", range_hi = "3.2" }) == "inconsistent", "inconsistent facts")
    check(fam({}) == nil and pgsql.version_family({ negotiates = false }) == nil, "nothing revealed")

    -- Bounds and malformed bodies.
    check(pgsql.read_message(fake("E\0\0\0\3")) == nil, "length below 4")
    check(pgsql.read_message(fake("D\0\1\0\0" .. string.rep("x", 100))) == nil, "64 KB message refused")
    check(pgsql.read_message(fake("D\0\0\0\4")) == "D", "empty body")
    check(pgsql.read_message(fake("D\0\0\0\20abc")) == nil, "body cut short")
    check(pgsql.fields("SFATAL\0Cabc") == nil, "field without NUL")
    check(pgsql.fields("SFATAL\0") == nil, "fields without the final NUL")
    check(pgsql.fields(string.rep("Sx\0", 40) .. "\0") == nil, "too many fields")
    check(pgsql.fields(nil) == nil and pgsql.fields("\0").S == nil, "no body, empty fields")
    check(pgsql.negotiate("\0\0\0") == nil and pgsql.negotiate("\0\3\0\0\0\0\0\2_pq_.a\0") == nil, "negotiate cut")
    check(pgsql.negotiate("\0\3\0\0\255\0\0\0") == nil, "too many options")
    check(pgsql.auth("\0\0") == nil, "auth cut")
    seen = pgsql.after_startup(fake(string.rep(msg("N", "SNOTICE\0\0"), 40)), 8)
    check(seen.ended == "too many messages", "message count bounded")
    seen = pgsql.after_startup(fake(""))
    check(seen.ended and seen.error == nil, "nothing at all")

    -- Every truncation of the captures and made-up answers, and garbage: no error.
    for _, full in ipairs({ LAB_3_65535, LAB_4_0, LAB_2_0, trust }) do
      for i = 0, #full - 1 do
        local ok, res = pcall(pgsql.after_startup, fake(string.sub(full, 1, i)))
        check(ok, "truncation at " .. i .. " raised " .. tostring(res))
      end
    end
    local x = 4242
    for _ = 1, 300 do
      local bytes = {}
      for j = 1, x % 70 do
        x = (x * 1103515245 + 12345) % 2147483648
        bytes[j] = string.char(x % 256)
      end
      local junk = table.concat(bytes)
      for _, first in ipairs({ "", "E", "E\0\0\0\20", "v\0\0\0\20", "R\0\0\0\20\0\0\0\10", "S\0\0\0\20" }) do
        local ok = pcall(function()
          pgsql.after_startup(fake(first .. junk))
          pgsql.fields(junk)
          pgsql.fields(junk, true)
          pgsql.negotiate(junk)
          pgsql.auth(junk)
          pgsql.supported_range(junk)
        end)
        check(ok, "garbage raised an error")
      end
    end
    return "ok " .. n
  end,
}
