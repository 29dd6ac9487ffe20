-- ntp: the two NTP questions nmap's ntp-info asks: a client time request
-- (mode 3, RFC 5905) and a control READVAR (mode 6, opcode 2, RFC 1305
-- appendix B / RFC 9327), their answers decoded, and the variable list
-- parsed.
--
--   local ntp = require "ntp"
--   sock:send(ntp.TIME_REQUEST)
--   local t, err = ntp.decode_time(datagram)   --> t.receive (Unix seconds), t.stratum...
--   sock:send(ntp.readvar_request(1))
--   local c, err = ntp.decode_control(datagram, 1) --> c.data "version=\"ntpd ...\", ..."
--   ntp.variables(c.data)                       --> { { "version", "ntpd ..." }, ... }
--
-- Each decoder checks lengths, mode and the answer's fields and gives nil,
-- why for anything else.

local ntp = {}

-- Seconds between the NTP era 0 (1900) and the Unix epoch.
local UNIX_OFFSET = 2208988800
local MAX_VARS = 512

-- nmap's time request, byte for byte: version 2, mode 3 (client), with its
-- odd fields (stratum 0, poll 4, precision -6, root delay 1.0, root
-- dispersion 1.0, reference id 0xffffffff ...).
ntp.TIME_REQUEST = "\211\0\4\250\0\1\0\0\0\1\0\0" .. string.rep("\0", 28) .. "\255\255\255\255\255\255\255\0"

-- A 64-bit NTP timestamp at `pos` as Unix seconds (0 stays 0: "not set").
local function timestamp(d, pos)
  local sec, frac = string.unpack(">I4I4", d, pos)
  if sec == 0 and frac == 0 then
    return 0
  end
  return sec - UNIX_OFFSET + frac / 2 ^ 32
end

-- A server's answer (mode 4) to a time request: { leap, version, mode,
-- stratum, poll, precision, root_delay, root_dispersion (seconds), refid
-- (4 bytes), reference, originate, receive, transmit (Unix seconds) }; or
-- nil, why.
function ntp.decode_time(d)
  if #d < 48 then
    return nil, "NTP answer of " .. #d .. " bytes, not 48 or more"
  end
  local b1, stratum, poll, precision, delay, disp = string.unpack(">BBbbi4I4", d)
  local t = {
    leap = b1 // 64,
    version = (b1 // 8) % 8,
    mode = b1 % 8,
    stratum = stratum,
    poll = poll,
    precision = precision,
    root_delay = delay / 65536,
    root_dispersion = disp / 65536,
    refid = string.sub(d, 13, 16),
    reference = timestamp(d, 17),
    originate = timestamp(d, 25),
    receive = timestamp(d, 33),
    transmit = timestamp(d, 41),
  }
  if t.mode ~= 4 then
    return nil, "NTP mode " .. t.mode .. ", not 4 (server)"
  end
  return t
end

-- A READVAR (opcode 2) control request for the system variables
-- (association 0), version 2 as nmap sends it.
function ntp.readvar_request(sequence)
  return string.pack(">BBI2I2I2I2I2", 0x16, 0x02, sequence or 1, 0, 0, 0, 0)
end

-- A control answer (mode 6, response bit set, same sequence when given):
-- { opcode, error, more, sequence, status, assoc, offset, data }; or nil, why.
function ntp.decode_control(d, sequence)
  if #d < 12 then
    return nil, "control answer of " .. #d .. " bytes, shorter than its header"
  end
  local b1, b2, seq, status, assoc, offset, count = string.unpack(">BBI2I2I2I2I2", d)
  if b1 % 8 ~= 6 then
    return nil, "NTP mode " .. b1 % 8 .. ", not 6 (control)"
  end
  if b2 < 0x80 then
    return nil, "a control request, not an answer"
  end
  if sequence and seq ~= sequence then
    return nil, "an answer to another request"
  end
  if 12 + count > #d then
    return nil, "control data count past the datagram's end"
  end
  return {
    opcode = b2 % 32,
    error = (b2 // 64) % 2 == 1,
    more = (b2 // 32) % 2 == 1,
    sequence = seq,
    status = status,
    assoc = assoc,
    offset = offset,
    data = string.sub(d, 13, 12 + count),
  }
end

-- A quoted value at `pos` (just after the opening quote), as nmap's
-- lpeg-utility escaped_quote reads it: \\ and \" stand for \ and ", any
-- other \x stays. The value and the position after the closing quote, or
-- nil when no closing quote comes.
local function quoted(s, pos)
  local out = {}
  while pos <= #s do
    local c = string.sub(s, pos, pos)
    if c == '"' then
      return table.concat(out), pos + 1
    elseif c == "\\" then
      local nxt = string.sub(s, pos + 1, pos + 1)
      if nxt == "" then
        return nil
      end
      out[#out + 1] = (nxt == "\\" or nxt == '"') and nxt or c .. nxt
      pos += 2
    else
      out[#out + 1] = c
      pos += 1
    end
  end
  return nil
end

-- A READVAR variable list as nmap's ntp-info reads it: { key, value }
-- pairs in order, a key seen again keeping its first place and taking the
-- last value. Each item: white space, a key of letters, digits, "_-.", an
-- optional "=", then a quoted value or everything up to the next comma,
-- then an optional comma; the list stops at the first thing that is not
-- an item (nmap's grammar does the same).
function ntp.variables(data)
  local list, index, pos = {}, {}, 1
  while #list < MAX_VARS do
    pos = string.find(data, "[^%s]", pos) or #data + 1
    local key = string.match(data, "^[%w_%-%.]+", pos)
    if not key then
      break
    end
    pos += #key
    if string.sub(data, pos, pos) == "=" then
      pos += 1
    end
    local value, after
    if string.sub(data, pos, pos) == '"' then
      value, after = quoted(data, pos + 1)
    end
    if not value then
      after = string.find(data, ",", pos, true) or #data + 1
      value = string.sub(data, pos, after - 1)
    end
    pos = after
    if string.sub(data, pos, pos) == "," then
      pos += 1
    end
    if index[key] then
      list[index[key]][2] = value
    else
      list[#list + 1] = { key, value }
      index[key] = #list
    end
  end
  return list
end

return ntp
