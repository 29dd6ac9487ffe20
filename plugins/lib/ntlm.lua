-- ntlm: NTLM messages (MS-NLMP) as the *-ntlm-info scripts need them: a
-- NEGOTIATE to send, the server's CHALLENGE read back, and nmap's layout of
-- what a CHALLENGE tells about the server.
--
--   local ntlm = require "ntlm"
--   sock:send(wrap(ntlm.negotiate()))                 -- NEGOTIATE_MESSAGE
--   local c, err = ntlm.parse_challenge(ntlm.find(blob))
--   local out, text = ntlm.info(c)                   -- nmap's Target_Name ... System_Time
--
-- A CHALLENGE_MESSAGE (MS-NLMP 2.2.1.2) is "NTLMSSP\0", type 2, the target
-- name's length/space/offset, flags, the 8-byte server challenge, 8
-- reserved bytes, the target info's length/space/offset, an optional
-- 8-byte Version, then the payload the offsets point into. The target
-- info is a list of AV_PAIRs (id, length, value; UTF-16LE names, the
-- FILETIME timestamp) ended by MsvAvEOL. Every offset and length is
-- checked against the message; anything malformed gives nil, why.

local ntlm = {}

local SIGNATURE = "NTLMSSP\0"
local MAX_PAIRS = 64

-- NEGOTIATE flags of a Windows 10 client: UNICODE, OEM, REQUEST_TARGET,
-- SIGN, SEAL, LM_KEY, NTLM, ALWAYS_SIGN, EXTENDED_SESSIONSECURITY, VERSION,
-- 128, KEY_EXCH, 56.
ntlm.NEGOTIATE_FLAGS = 0xE20882B7

-- A NEGOTIATE_MESSAGE without domain or workstation, with a Version
-- (10.0 build 17763, NTLM revision 15).
function ntlm.negotiate(flags)
  return SIGNATURE .. string.pack("<I4I4I2I2I4I2I2I4BBI2BBBB", 1, flags or ntlm.NEGOTIATE_FLAGS,
    0, 0, 0, 0, 0, 0, 10, 0, 17763, 0, 0, 0, 15)
end

-- The NTLM message inside a wrapper (SPNEGO, CredSSP, base64-decoded
-- HTTP): from its signature to the end, or nil.
function ntlm.find(blob)
  local at = blob and string.find(blob, SIGNATURE, 1, true)
  return at and string.sub(blob, at) or nil
end

-- UTF-16LE as UTF-8 (unpaired surrogates become U+FFFD).
function ntlm.utf16to8(s)
  local out, i, n = {}, 1, #s - #s % 2
  while i < n do
    local u = string.unpack("<I2", s, i)
    i += 2
    if u >= 0xD800 and u <= 0xDBFF and i < n then
      local lo = string.unpack("<I2", s, i)
      if lo >= 0xDC00 and lo <= 0xDFFF then
        u = 0x10000 + (u - 0xD800) * 0x400 + (lo - 0xDC00)
        i += 2
      else
        u = 0xFFFD
      end
    elseif u >= 0xD800 and u <= 0xDFFF then
      u = 0xFFFD
    end
    out[#out + 1] = utf8.char(u)
  end
  return table.concat(out)
end

-- A FILETIME (100 ns since 1601-01-01, as two 32-bit halves) in Unix seconds.
function ntlm.filetime_to_unix(lo, hi)
  -- hi * 2^32 // 10^7 without leaving exact doubles: 2^32 = 429 * 10^7 + 4967296.
  return hi * 429 + (hi * 4967296 + lo) // 10000000 - 11644473600
end

-- The bytes `len` at `offset` (0-based, from the message start) point to, or nil.
local function field(msg, len, offset)
  if offset + len > #msg then
    return nil
  end
  return string.sub(msg, offset + 1, offset + len)
end

local AV_NAMES = {
  [1] = "netbios_computer_name", [2] = "netbios_domain_name", [3] = "dns_computer_name",
  [4] = "dns_domain_name", [5] = "dns_tree_name",
}

-- A CHALLENGE_MESSAGE as a table: flags, challenge (8 bytes), target_name,
-- os_major/os_minor/os_build (when a Version is there), the AV_PAIR names
-- above and timestamp (Unix seconds); or nil, why.
function ntlm.parse_challenge(msg)
  if type(msg) ~= "string" or #msg < 32 then
    return nil, "too short for a CHALLENGE message"
  end
  if string.sub(msg, 1, 8) ~= SIGNATURE then
    return nil, "no NTLMSSP signature"
  end
  local mtype, name_len, _, name_off, flags, challenge = string.unpack("<I4I2I2I4I4c8", msg, 9)
  if mtype ~= 2 then
    return nil, "not a CHALLENGE message (type " .. mtype .. ")"
  end
  local c = { flags = flags, challenge = challenge }
  if name_len > 0 then
    local name = field(msg, name_len, name_off)
    if not name then
      return nil, "target name out of the message"
    end
    c.target_name = ntlm.utf16to8(name)
  end
  if #msg < 48 then
    return c -- no target info (Windows 9x and the like)
  end
  local info_len, _, info_off = string.unpack("<I2I2I4", msg, 41)
  -- A Version sits between the header and a payload that starts past it.
  if #msg >= 56 and info_off >= 56 and (name_len == 0 or name_off >= 56) then
    local major, minor, build, tail = string.unpack("<BBI2c4", msg, 49)
    if tail == "\0\0\0\15" then
      c.os_major, c.os_minor, c.os_build = major, minor, build
    end
  end
  if info_len == 0 then
    return c
  end
  local info = field(msg, info_len, info_off)
  if not info then
    return nil, "target info out of the message"
  end
  local pos = 1
  for _ = 1, MAX_PAIRS do
    if pos + 3 > #info then
      break -- no MsvAvEOL: what came is kept
    end
    local id, len = string.unpack("<I2I2", info, pos)
    local value = string.sub(info, pos + 4, pos + 3 + len)
    if id == 0 then
      break
    elseif #value < len then
      return nil, "AV_PAIR " .. id .. " cut short"
    end
    if AV_NAMES[id] then
      c[AV_NAMES[id]] = ntlm.utf16to8(value)
    elseif id == 7 and len == 8 then
      local lo, hi = string.unpack("<I4I4", value)
      if lo > 0 or hi > 0 then
        c.timestamp = ntlm.filetime_to_unix(lo, hi)
      end
    end
    pos += 4 + len
  end
  return c
end

-- nmap's *-ntlm-info table of a parsed CHALLENGE (empty names left out)
-- and its text, in nmap's order.
local LAYOUT = {
  { "Target_Name", "target_name" }, { "NetBIOS_Domain_Name", "netbios_domain_name" },
  { "NetBIOS_Computer_Name", "netbios_computer_name" }, { "DNS_Domain_Name", "dns_domain_name" },
  { "DNS_Computer_Name", "dns_computer_name" }, { "DNS_Tree_Name", "dns_tree_name" },
}

function ntlm.info(c)
  local out, lines = {}, {}
  local function add(key, value)
    out[key] = value
    lines[#lines + 1] = "\n  " .. key .. ": " .. value
  end
  for _, l in ipairs(LAYOUT) do
    local v = c[l[2]]
    -- nmap shows Target_Name even when empty; the others only when not.
    if v and (v ~= "" or l[1] == "Target_Name") then
      add(l[1], v)
    end
  end
  if c.os_major then
    add("Product_Version", string.format("%d.%d.%d", c.os_major, c.os_minor, c.os_build))
  end
  if c.timestamp then
    local ok, t = pcall(os.date, "!%Y-%m-%dT%H:%M:%S", c.timestamp)
    add("System_Time", ok and type(t) == "string" and (t .. "+00:00") or ("Invalid timestamp: " .. c.timestamp))
  end
  return out, table.concat(lines)
end

return ntlm
