-- ntp-test: unit tests of lib/ntp.lua on nmap's ntp-info requests, the
-- lab chronyd's answer to the time request (capture/ntpcap.py; chrony does
-- not answer mode 6), a hand-made ntpd READVAR answer, and variable lists
-- whose parse nmap's own grammar gave (capture/kv_oracle.nse), offline.
local ntp = require "ntp"

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

-- nmap 7.93's two requests, byte for byte (ntp-info.nse).
local NMAP_TIME = "d30004fa000100000001000000000000000000000000000000000000000000000000000000000000ffffffffffffff00"
local NMAP_READVAR = "160200010000000000000000"
-- chrony on 198.18.0.2: version 2, mode 4, stratum 10, precision -25, refid 127.127.1.1.
local CHRONY_TIME = "140a04e700000000000000007f7f0101eeb0dc6ed48df974ffffffffffffff00eeb0dc6fe5d3a09beeb0dc6fe5d9e7d4"

-- ntpd-style system variables (ntpq -c rv), as one control answer carries them.
local VARS = 'version="ntpd 4.2.8p15@1.3728-o Wed Sep 23 11:46:38 UTC 2020 (1)",\r\n'
  .. 'processor="x86_64", system="Linux/5.10.0-20-amd64", leap=00, stratum=2,\r\n'
  .. "precision=-24, rootdelay=1.082, rootdisp=21.537, refid=192.0.2.1,\r\n"
  .. "reftime=e7b1c2a4.1c6a4f00  Fri, Feb 17 2023 10:00:04.110,\r\n"
  .. "clock=e7b1c2d0.5b1e1d2b  Fri, Feb 17 2023 10:00:48.356, peer=12345, tc=10,\r\n"
  .. "mintc=3, offset=-0.217, frequency=-11.246, sys_jitter=0.180,\r\n"
  .. "clk_jitter=0.158, clk_wander=0.012\r\n"
-- What nmap's grammar made of VARS (the oracle's output), in order.
local VARS_PARSED = {
  { "version", "ntpd 4.2.8p15@1.3728-o Wed Sep 23 11:46:38 UTC 2020 (1)" }, { "processor", "x86_64" },
  { "system", "Linux/5.10.0-20-amd64" }, { "leap", "00" }, { "stratum", "2" }, { "precision", "-24" },
  { "rootdelay", "1.082" }, { "rootdisp", "21.537" }, { "refid", "192.0.2.1" },
  { "reftime", "e7b1c2a4.1c6a4f00  Fri" }, { "Feb", " 17 2023 10:00:48.356" },
  { "clock", "e7b1c2d0.5b1e1d2b  Fri" }, { "peer", "12345" }, { "tc", "10" }, { "mintc", "3" },
  { "offset", "-0.217" }, { "frequency", "-11.246" }, { "sys_jitter", "0.180" }, { "clk_jitter", "0.158" },
  { "clk_wander", "0.012\r\n" },
}

return {
  id = "ntp-test",
  description = "Unit tests of the ntp library (time and READVAR requests, their answers, variable lists).",
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
    local function same_list(got, want, what)
      eq(#got, #want, what .. ": count")
      for i = 1, math.min(#got, #want) do
        eq(got[i][1], want[i][1], what .. ": key " .. i)
        eq(got[i][2], want[i][2], what .. ": value of " .. want[i][1])
      end
    end

    -- The requests.
    eq(hex(ntp.TIME_REQUEST), NMAP_TIME, "time request")
    eq(hex(ntp.readvar_request(1)), NMAP_READVAR, "READVAR request")
    eq(#ntp.readvar_request(513), 12, "READVAR length")

    -- chrony's answer.
    local t, err = ntp.decode_time(unhex(CHRONY_TIME))
    check(t, err)
    eq(t.leap, 0, "leap")
    eq(t.version, 2, "version")
    eq(t.mode, 4, "mode")
    eq(t.stratum, 10, "stratum")
    eq(t.poll, 4, "poll")
    eq(t.precision, -25, "precision")
    eq(t.root_delay, 0, "root delay")
    eq(hex(t.refid), "7f7f0101", "refid")
    eq(math.floor(t.receive), 1795579375, "receive seconds")
    check(math.abs(t.receive - 1795579375.8977604) < 1e-6, "receive fraction")
    eq(os.date("!%Y-%m-%dT%H:%M:%S", math.floor(t.receive)), "2026-11-25T04:02:55", "receive as nmap formats it")
    check(t.transmit >= t.receive, "transmit after receive")
    check(math.abs(t.reference - 1795579374.8302913) < 1e-6, "reference")
    eq(t.originate, 0xffffffff - 2208988800 + 0xffffff00 / 2 ^ 32, "originate echoes ours")
    local zero = ntp.decode_time(string.sub(unhex(CHRONY_TIME), 1, 24) .. string.rep("\0", 8) .. string.sub(unhex(CHRONY_TIME), 33))
    eq(zero.originate, 0, "an unset timestamp is 0")

    -- Not a time answer.
    local function refused(f, bytes, what)
      local ok, got, why = pcall(f, bytes)
      check(ok, what .. ": raised " .. tostring(got))
      check(got == nil and type(why) == "string", what .. ": accepted")
    end
    local full = unhex(CHRONY_TIME)
    for i = 0, 47 do
      refused(ntp.decode_time, string.sub(full, 1, i), "time answer cut to " .. i)
    end
    refused(ntp.decode_time, unhex(NMAP_TIME), "our own request (mode 3)")
    refused(ntp.decode_time, "\22" .. string.sub(full, 2), "mode 6")

    -- A control answer: response bit, READVAR, sequence 1, the variables.
    local answer = string.pack(">BBI2I2I2I2s2", 0x16, 0x82, 1, 0x0618, 0, 0, VARS)
    local c
    c, err = ntp.decode_control(answer, 1)
    check(c, err)
    eq(c.opcode, 2, "opcode")
    eq(c.error, false, "error bit")
    eq(c.more, false, "more bit")
    eq(c.status, 0x0618, "status")
    eq(c.data, VARS, "data")
    same_list(ntp.variables(c.data), VARS_PARSED, "ntpd variables")
    check(ntp.decode_control(answer, 2) == nil, "another sequence refused")
    check(ntp.decode_control(answer) ~= nil, "any sequence when none is given")
    eq(ntp.decode_control(answer .. "\0\0\0\0").data, VARS, "padding after the data ignored")
    c = ntp.decode_control(string.pack(">BBI2I2I2I2s2", 0x16, 0xe2, 1, 0, 0, 0, "x=1"))
    check(c and c.error and c.more, "error and more bits")
    refused(ntp.decode_control, unhex(NMAP_READVAR), "our own request")
    refused(ntp.decode_control, full, "a mode 4 answer")
    refused(ntp.decode_control, string.sub(answer, 1, 11), "header cut")
    refused(ntp.decode_control, string.sub(answer, 1, 40), "data cut")
    refused(ntp.decode_control, "", "empty")

    -- Variable lists as nmap's grammar reads them (capture/kv_oracle.nse).
    same_list(ntp.variables('a="q\\"uo\\\\te\\x", b, c d,e="open, f=1'), {
      { "a", 'q"uo\\te\\x' }, { "b", "" }, { "c", " d" }, { "e", '"open' }, { "f", "1" },
    }, "quotes and escapes")
    same_list(ntp.variables('a="x" ,b=1'), { { "a", "x" } }, "stops at a space before a comma")
    same_list(ntp.variables("k=1,k=2,j=3"), { { "k", "2" }, { "j", "3" } }, "a key again")
    same_list(ntp.variables(" = nokey, x=1"), {}, "no key")
    same_list(ntp.variables(""), {}, "empty")
    same_list(ntp.variables('a="never closed'), { { "a", '"never closed' } }, "unclosed quote")
    same_list(ntp.variables('a="ends in \\'), { { "a", '"ends in \\' } }, "escape at the end")
    local many = string.rep("k=v,", 5000)
    eq(#ntp.variables(many), 1, "one key many times")
    local distinct = {}
    for i = 1, 1000 do
      distinct[i] = "k" .. i .. "=" .. i
    end
    eq(#ntp.variables(table.concat(distinct, ",")), 512, "at most 512 variables")
    math.randomseed(123)
    for _ = 1, 200 do
      local b = {}
      for i = 1, math.random(0, 80) do
        b[i] = math.random(0, 255)
      end
      local s = string.char(table.unpack(b))
      local ok, e = pcall(ntp.variables, s)
      check(ok, "garbage variables raised " .. tostring(e))
      ok, e = pcall(ntp.decode_control, s)
      check(ok, "garbage control raised " .. tostring(e))
      ok, e = pcall(ntp.decode_time, s .. full)
      check(ok, "garbage time raised " .. tostring(e))
    end

    return "ok " .. n
  end,
}
