-- ntlm-test: unit tests of lib/ntlm.lua (MS-NLMP NEGOTIATE and CHALLENGE
-- messages, nmap's *-ntlm-info layout) on fixed bytes, offline.
-- Run: moonscan plugins test libtests/ntlm_test.lua --plugin-dir plugins
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

local function u16(s)
  return (string.gsub(s, ".", "%0\0"))
end

-- A CHALLENGE_MESSAGE laid out as Windows lays it out: header, Version,
-- target name, target info (AV_PAIRs, then MsvAvEOL).
local function challenge(name, pairs, version, flags)
  local info = {}
  for _, p in ipairs(pairs) do
    info[#info + 1] = string.pack("<I2s2", p[1], p[2])
  end
  info = table.concat(info) .. string.pack("<I2I2", 0, 0)
  local payload = 48 + (version and 8 or 0)
  return "NTLMSSP\0" .. string.pack("<I4I2I2I4I4", 2, #name, #name, payload, flags or 0xE28A8235)
    .. "\1\2\3\4\5\6\7\8" .. string.rep("\0", 8) .. string.pack("<I2I2I4", #info, #info, payload + #name)
    .. (version or "") .. name .. info
end

return {
  id = "ntlm-test",
  description = "Unit tests of the ntlm library (NTLM NEGOTIATE and CHALLENGE messages).",
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

    -- NEGOTIATE: the bytes of a Windows 10 client's (as nmap sends them).
    eq(hex(ntlm.negotiate()), "4e544c4d5353500001000000b78208e2000000000000000000000000000000000a0063450000000f",
      "negotiate")

    -- MS-NLMP 4.2.4.3's CHALLENGE (NTLMv2 example): target "Server",
    -- NetBIOS domain "Domain" and computer "Server", Version 6.0.6000.
    local spec = unhex([[
      4e544c4d53535000 02000000 0c000c00 38000000 33828ae2 0123456789abcdef
      0000000000000000 24002400 44000000 06007017 0000000f
      530065007200760065007200
      02000c0044006f006d00610069006e00 01000c00530065007200760065007200 00000000]])
    local c = assert(ntlm.parse_challenge(spec))
    eq(c.target_name, "Server", "spec target")
    eq(c.netbios_domain_name, "Domain", "spec domain")
    eq(c.netbios_computer_name, "Server", "spec computer")
    eq(c.os_major, 6, "spec major")
    eq(c.os_minor, 0, "spec minor")
    eq(c.os_build, 6000, "spec build")
    eq(c.flags, 0xE28A8233, "spec flags")
    eq(hex(c.challenge), "0123456789abcdef", "spec challenge")
    eq(c.timestamp, nil, "spec has no timestamp")
    local out, text = ntlm.info(c)
    eq(text, "\n  Target_Name: Server\n  NetBIOS_Domain_Name: Domain\n  NetBIOS_Computer_Name: Server"
      .. "\n  Product_Version: 6.0.6000", "spec text")
    eq(out.Target_Name, "Server", "spec table")
    eq(out.Product_Version, "6.0.6000", "spec version")

    -- A Windows Server 2019 answer: DNS names, a FILETIME, a flags pair.
    local ft = string.pack("<I4I4", 2717045760, 31292565) -- 2026-11-25T04:30:00Z
    local msg = challenge(u16("LAB"), {
      { 2, u16("LAB") }, { 1, u16("DC01") }, { 4, u16("lab.example") }, { 3, u16("dc01.lab.example") },
      { 5, u16("lab.example") }, { 6, "\0\0\0\0" }, { 7, ft },
    }, unhex("0a0063450000000f"))
    c = assert(ntlm.parse_challenge(ntlm.find("\48\130junk" .. msg)))
    eq(c.dns_computer_name, "dc01.lab.example", "fqdn")
    eq(c.dns_tree_name, "lab.example", "tree")
    eq(c.timestamp, 1795581000, "timestamp")
    out, text = ntlm.info(c)
    eq(text, table.concat({
      "\n  Target_Name: LAB", "\n  NetBIOS_Domain_Name: LAB", "\n  NetBIOS_Computer_Name: DC01",
      "\n  DNS_Domain_Name: lab.example", "\n  DNS_Computer_Name: dc01.lab.example",
      "\n  DNS_Tree_Name: lab.example", "\n  Product_Version: 10.0.17763",
      "\n  System_Time: 2026-11-25T04:30:00+00:00",
    }), "server text")
    eq(out.System_Time, "2026-11-25T04:30:00+00:00", "system time")
    -- The last 100 ns before the next second still count as this second.
    eq(ntlm.filetime_to_unix(2727045759, 31292565), 1795581000, "filetime rounding")

    -- No Version (payload right after the header), empty names left out.
    c = assert(ntlm.parse_challenge(challenge(u16("X"), { { 2, "" }, { 1, u16("PC") } })))
    eq(c.os_major, nil, "no version")
    out, text = ntlm.info(c)
    eq(text, "\n  Target_Name: X\n  NetBIOS_Computer_Name: PC", "empty domain left out")
    -- A Version field whose revision is not 15 is not read.
    c = assert(ntlm.parse_challenge(challenge("", {}, unhex("0a00634500000000"))))
    eq(c.os_major, nil, "odd revision")
    eq(c.target_name, nil, "no target name")

    -- UTF-16: non-ASCII, a surrogate pair, a lone surrogate, an odd byte.
    eq(ntlm.utf16to8(unhex("e900 3dd8 00de")), "\195\169\240\159\152\128", "utf16 pair")
    eq(ntlm.utf16to8(unhex("00d84100")), "\239\191\189A", "lone surrogate")
    eq(ntlm.utf16to8(unhex("410042")), "A", "odd length")

    -- Garbage: short, wrong signature, wrong type, offsets out of the message.
    local r, err = ntlm.parse_challenge("NTLMSSP\0")
    check(r == nil and string.find(err, "short"), "short: " .. tostring(err))
    r, err = ntlm.parse_challenge(string.rep("A", 64))
    check(r == nil and string.find(err, "signature"), "signature: " .. tostring(err))
    r, err = ntlm.parse_challenge(ntlm.negotiate())
    check(r == nil and string.find(err, "type 1"), "a NEGOTIATE: " .. tostring(err))
    local bad = string.sub(spec, 1, 12) .. string.pack("<I2I2I4", 12, 12, 0xFFFF0000) .. string.sub(spec, 21)
    r, err = ntlm.parse_challenge(bad)
    check(r == nil and string.find(err, "target name"), "name offset: " .. tostring(err))
    bad = string.sub(spec, 1, 40) .. string.pack("<I2I2I4", 0x400, 0x400, 68) .. string.sub(spec, 49)
    r, err = ntlm.parse_challenge(bad)
    check(r == nil and string.find(err, "target info"), "info length: " .. tostring(err))
    bad = challenge("", { { 1, u16("PC") } })
    bad = string.sub(bad, 1, 48) .. string.pack("<I2I2", 1, 200) .. string.sub(bad, 53)
    r, err = ntlm.parse_challenge(bad)
    check(r == nil and string.find(err, "cut short"), "pair length: " .. tostring(err))
    -- Cut before the target info fields: the name alone (Windows 9x).
    r, err = ntlm.parse_challenge(string.sub(spec, 1, 40))
    check(r == nil and string.find(err, "target name"), "cut: " .. tostring(err))
    c = assert(ntlm.parse_challenge(string.sub(spec, 1, 12) .. string.pack("<I2I2I4", 0, 0, 0) .. string.sub(spec, 21, 40)))
    eq(c.flags, 0xE28A8233, "header alone")
    eq(ntlm.find("no ntlm here"), nil, "find nothing")
    eq(ntlm.find(nil), nil, "find nil")
    -- Endless AV_PAIRs without EOL stop at the bound.
    local many = {}
    for i = 1, 200 do
      many[i] = { 9, "" }
    end
    check(ntlm.parse_challenge(challenge("", many)) ~= nil, "many pairs")

    return "ok " .. n
  end,
}
