-- smb: the NEGOTIATE exchange of SMB, the first thing a client says, over
-- direct TCP (port 445): enough to tell which dialects a server accepts,
-- its message-signing mode and its clock, as nmap's smb and smb2 libraries
-- give them to smb-protocols, smb2-security-mode and smb2-time.
--
--   local smb = require "smb"
--   local r, err = smb.negotiate2(ctx, { 0x0302, 0x0311 }) -- SMB2/3 (MS-SMB2 2.2.3)
--   -- r.status (0: accepted), r.dialect, r.security_mode, r.system_time, ...
--   local r1, err = smb.negotiate1(ctx)                    -- SMBv1, "NT LM 0.12"
--   -- r1.enabled: the server speaks SMBv1
--   local names, err = smb.list_dialects(ctx)              -- nmap's smb.list_dialects
--
-- Every message on direct TCP is framed by a 4-byte big-endian length
-- (the NetBIOS session header: a zero type byte, then 24 bits of length,
-- RFC 1002 4.3.1 / MS-SMB2 2.1). A reply is read with that length, at most
-- MAX_PACKET bytes, one socket timeout per read; each exchange has its own
-- connection, closed after the reply, as nmap opens one for each try. A
-- reply that is short, garbled or of the wrong protocol gives nil, "why".

local smb = {}

smb.PORT = 445
smb.MAX_PACKET = 64 * 1024 -- largest reply read (a NEGOTIATE reply is < 2 KiB)
smb.TIMEOUT = 5000 -- ms, per connect and per read

-- The SMB2/3 dialects nmap tries, oldest first.
smb.DIALECTS = { 0x0202, 0x0210, 0x0300, 0x0302, 0x0311 }

local KNOWN = {}
for _, d in ipairs(smb.DIALECTS) do
  KNOWN[d] = true
end

-- A dialect's name as nmap 7.93 prints it: the revision in hex, "202",
-- "210", "300", "302", "311" (its smb2.dialect_name means "2.0.2" but drops
-- the dots); nil for a dialect nmap does not know.
function smb.dialect_name(d)
  return KNOWN[d] and string.format("%x", d) or nil
end

local SMB2_MAGIC = "\254SMB"
local SMB1_MAGIC = "\255SMB"
local FILETIME_1970 = 11644473600 -- seconds from 1601-01-01 to 1970-01-01

-- `payload` framed with its 4-byte length.
local function frame(payload)
  return string.pack(">I4", #payload) .. payload
end

-- A NEGOTIATE request (MS-SMB2 2.2.3) offering `dialects`, framed. With
-- 3.1.1 among them it carries the two negotiate contexts a 3.1.1 server
-- wants: preauth integrity (SHA-512, a 32-byte salt) and encryption
-- (AES-128-GCM, AES-128-CCM), each 8-byte aligned from the header's start.
function smb.negotiate2_request(dialects, message_id)
  local header = SMB2_MAGIC
    .. string.pack("<I2I2I4I2I2I4I4I4I4I4I4I4I4", 64, 0, 0, 0, 0, 0, 0, message_id or 0, 0, 0, 0, 0, 0)
    .. string.rep("\0", 16) -- signature
  local list, has311 = {}, false
  for i, d in ipairs(dialects) do
    list[i] = string.pack("<I2", d)
    has311 = has311 or d == 0x0311
  end
  list = table.concat(list)
  local guid = "moonscan-smb-neg" -- ClientGuid: any 16 bytes
  local fixed = string.pack("<I2I2I2I2I4", 36, #dialects, 1, 0, 0) .. guid
  if not has311 then
    -- ClientStartTime: zero.
    return frame(header .. fixed .. string.rep("\0", 8) .. list)
  end
  local at = 64 + 36 + #list
  local pad = string.rep("\0", (8 - at % 8) % 8)
  local preauth = string.pack("<I2I2I2", 1, 32, 0x0001) .. string.rep("\0", 32)
  local ctx1 = string.pack("<I2I2I4", 0x0001, #preauth, 0) .. preauth
  ctx1 ..= string.rep("\0", (8 - #ctx1 % 8) % 8)
  local ciphers = string.pack("<I2I2I2", 2, 0x0002, 0x0001)
  local ctx2 = string.pack("<I2I2I4", 0x0002, #ciphers, 0) .. ciphers
  local offsets = string.pack("<I4I2I2", at + #pad, 2, 0)
  return frame(header .. fixed .. offsets .. list .. pad .. ctx1 .. ctx2)
end

-- An SMBv1 NEGOTIATE (MS-CIFS 2.2.4.52) offering only "NT LM 0.12",
-- framed, with nmap's header flags (canonical, caseless paths; 32-bit
-- status, long names, signatures, extended security).
function smb.negotiate1_request(pid)
  local header = SMB1_MAGIC
    .. string.pack("<BI4BI2I2", 0x72, 0, 0x18, 0x6845, 0)
    .. string.rep("\0", 8) -- signature
    .. string.pack("<I2I2I2I2I2", 0, 0, pid or 0xFEFF, 0, 1) -- reserved, tid, pid, uid, mid
  local dialects = "\2NT LM 0.12\0"
  return frame(header .. "\0" .. string.pack("<I2", #dialects) .. dialects)
end

-- One framed message read from `sock`: its payload (without the 4-byte
-- length), or nil, why. The length is the low 24 bits, as nmap reads it.
function smb.read_packet(sock, max)
  max = max or smb.MAX_PACKET
  local head, err = sock:recv_exact(4)
  if not head then
    return nil, "no reply: " .. tostring(err)
  end
  local n = string.unpack(">I4", head) % 0x1000000
  if n == 0 then
    return nil, "empty message"
  end
  if n > max then
    return nil, ("message of %d bytes, more than %d"):format(n, max)
  end
  local payload, perr = sock:recv_exact(n)
  if not payload then
    return nil, "reply cut short: " .. tostring(perr)
  end
  return payload
end

-- A FILETIME (100 ns ticks since 1601, as two 32-bit halves) in whole Unix
-- seconds, exact in Luau's doubles: ticks / 10^7 = (ticks / 2^7) / 78125.
function smb.filetime_seconds(lo, hi)
  local shifted_lo = lo // 128 -- hi * 2^25 + shifted_lo = ticks // 2^7
  -- hi * 2^25 = hi * (429 * 78125 + 38807)
  return hi * 429 + (hi * 38807 + shifted_lo) // 78125 - FILETIME_1970
end

-- Unix seconds as nmap's datetime.format_timestamp writes a UTC time:
-- "2024-05-01T12:34:56" (days to a civil date: H. Hinnant's algorithm).
function smb.format_time(t)
  local days = t // 86400
  local secs = t - days * 86400
  local z = days + 719468
  local era = z // 146097
  local doe = z - era * 146097
  local yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
  local doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
  local mp = (5 * doy + 2) // 153
  local day = doy - (153 * mp + 2) // 5 + 1
  local month = mp < 10 and mp + 3 or mp - 9
  local year = yoe + era * 400 + (month <= 2 and 1 or 0)
  return string.format("%d-%02d-%02dT%02d:%02d:%02d", year, month, day, secs // 3600, secs % 3600 // 60, secs % 60)
end

-- An SMB2 NEGOTIATE reply (MS-SMB2 2.2.4), the payload read_packet gives:
-- { status = NTSTATUS } and, when status is 0, dialect, security_mode,
-- capabilities, server_guid, max_transact/read/write, system_time and
-- start_time (Unix seconds; start_time nil when the server says 0, as
-- Samba does). nil, why for a reply that is not one, or is cut short.
function smb.parse_negotiate2(p)
  if type(p) ~= "string" or #p < 64 then
    return nil, "SMB2 header cut short"
  end
  local magic, size, _, status = string.unpack("<c4I2I2I4", p)
  if magic ~= SMB2_MAGIC or size ~= 64 then
    return nil, "not an SMB2 reply"
  end
  local r = { status = status }
  if status ~= 0 then
    return r
  end
  if #p < 64 + 64 then
    return nil, "SMB2 NEGOTIATE reply cut short"
  end
  local body_size, mode, dialect, _, guid, caps, mt, mr, mw, tlo, thi, slo, shi =
    string.unpack("<I2I2I2I2c16I4I4I4I4I4I4I4I4", p, 65)
  if body_size ~= 65 then
    return nil, "not an SMB2 NEGOTIATE reply (structure size " .. body_size .. ")"
  end
  r.security_mode, r.dialect, r.server_guid, r.capabilities = mode, dialect, guid, caps
  r.max_transact, r.max_read, r.max_write = mt, mr, mw
  r.system_time = smb.filetime_seconds(tlo, thi)
  if slo ~= 0 or shi ~= 0 then
    r.start_time = smb.filetime_seconds(slo, shi)
  end
  return r
end

-- An SMBv1 NEGOTIATE reply (MS-CIFS 2.2.4.52.2): { status, flags2,
-- dialect_index, enabled } and, for an NT LM 0.12 answer, security_mode,
-- capabilities, system_time. `enabled` as nmap decides: status 0, the
-- first (only) dialect chosen, the NT LM 0.12 words all there, and with
-- extended security a 16-byte server GUID. nil, why for a garbled reply.
function smb.parse_negotiate1(p)
  if type(p) ~= "string" or #p < 35 then
    return nil, "SMB header cut short"
  end
  local magic, command, status, _, flags2 = string.unpack("<c4BI4BI2", p)
  if magic == SMB2_MAGIC then
    return nil, "an SMB2 reply to an SMBv1 request"
  end
  if magic ~= SMB1_MAGIC or command ~= 0x72 then
    return nil, "not an SMB NEGOTIATE reply"
  end
  local words = string.byte(p, 33)
  local at = 34 + 2 * words -- the byte count
  if #p < at + 1 then
    return nil, "SMB NEGOTIATE reply cut short"
  end
  local count = string.unpack("<I2", p, at)
  if #p < at + 1 + count then
    return nil, "SMB NEGOTIATE data cut short"
  end
  local data = string.sub(p, at + 2, at + 1 + count)
  local r = { status = status, flags2 = flags2, enabled = false }
  if words >= 1 then
    r.dialect_index = string.unpack("<I2", p, 34)
  end
  if status ~= 0 or words < 12 or r.dialect_index ~= 0 then
    return r -- 0xFFFF: none of the dialects offered
  end
  local mode, _, _, _, _, _, caps = string.unpack("<BI2I2I4I4I4I4", p, 36)
  r.security_mode, r.capabilities = mode, caps
  if words >= 17 then
    local lo, hi = string.unpack("<I4I4", p, 36 + 21)
    r.system_time = smb.filetime_seconds(lo, hi)
  end
  if bit32.band(flags2, 0x0800) ~= 0 then
    r.enabled = #data >= 16
  else
    local key_length = words >= 17 and string.byte(p, 36 + 31) or 0
    r.enabled = #data >= key_length
  end
  return r
end

-- Sends `request` on a new connection to the scanned port and reads one
-- reply: its payload, or nil, why, and true when no connection opened.
function smb.exchange(ctx, request)
  local sock, err = ctx:connect{ timeout = smb.TIMEOUT }
  if not sock then
    return nil, "connect: " .. tostring(err), true
  end
  local ok, serr = sock:send(request)
  if not ok then
    sock:close()
    return nil, "send: " .. tostring(serr)
  end
  local payload, rerr = smb.read_packet(sock)
  sock:close()
  return payload, rerr
end

-- An SMB2 NEGOTIATE offering `dialects` (default: all five): the parsed
-- reply (status 0 when accepted), or nil, why, and true when no
-- connection opened.
function smb.negotiate2(ctx, dialects)
  local payload, err, unreached = smb.exchange(ctx, smb.negotiate2_request(dialects or smb.DIALECTS))
  if not payload then
    return nil, err, unreached
  end
  return smb.parse_negotiate2(payload)
end

-- An SMBv1 NEGOTIATE: the parsed reply (`enabled` when the server speaks
-- SMBv1), or nil, why, and true when no connection opened.
function smb.negotiate1(ctx)
  local payload, err, unreached = smb.exchange(ctx, smb.negotiate1_request())
  if not payload then
    return nil, err, unreached
  end
  return smb.parse_negotiate1(payload)
end

-- The dialects the server accepts, as nmap's smb.list_dialects finds them:
-- "NT LM 0.12" if the SMBv1 NEGOTIATE succeeds; then an SMB2 NEGOTIATE
-- offering all dialects gives the highest, and each older dialect is
-- offered alone on its own connection; the highest comes last. Returns the
-- names, and whether SMBv1 answered; nil, why when no connection opens.
function smb.list_dialects(ctx)
  local names = {}
  local v1, err, unreached = smb.negotiate1(ctx)
  if unreached then
    return nil, err
  end
  local smb1 = v1 ~= nil and v1.enabled
  if smb1 then
    names[1] = "NT LM 0.12"
  end
  local best = smb.negotiate2(ctx)
  if not best or best.status ~= 0 then
    return names, smb1
  end
  for _, d in ipairs(smb.DIALECTS) do
    if d == best.dialect then
      break
    end
    local r = smb.negotiate2(ctx, { d })
    if r and r.status == 0 then
      names[#names + 1] = smb.dialect_name(d)
    end
  end
  names[#names + 1] = smb.dialect_name(best.dialect)
  return names, smb1
end

return smb
