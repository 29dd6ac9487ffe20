-- vnc: the opening of an RFB (VNC) session, RFC 6143 section 7.1: the
-- server's protocol version, the version a client answers with, and the
-- security types the server offers; and the VeNCrypt sub-negotiation
-- (security type 19) that lists its auth subtypes.
--
--   local vnc = require "vnc"
--   local hs, err = vnc.handshake(sock)   --> { version = "3.8", types = { 2 }, ... }
--   sock:send(string.char(vnc.VENCRYPT))  -- choose VeNCrypt (RFB 3.7 and later)
--   local subtypes, err = vnc.vencrypt(sock)  --> { 256, 258, ... }
--   vnc.named(hs.types, vnc.SECTYPES)     --> { { name = "VNC Authentication", type = 2 } }
--
-- The client answers as nmap's vnc library does: with the server's own
-- version when it is one nmap knows (3.3, 3.7, 3.8, Apple's 3.889), else
-- the highest known one below it. A server that refuses (no security
-- type) gives nil and its reason. Every read is bounded.

local vnc = {}

vnc.NONE = 1
vnc.VENCRYPT = 19

local MAX_REASON = 1024

-- Security type names, as nmap's vnc library has them.
vnc.SECTYPES = {
  [0] = "Invalid security type",
  [1] = "None",
  [2] = "VNC Authentication",
  [5] = "RA2",
  [6] = "RA2ne",
  [16] = "Tight",
  [17] = "Ultra",
  [18] = "TLS",
  [19] = "VeNCrypt",
  [20] = "GTK-VNC SASL",
  [21] = "MD5 hash authentication",
  [22] = "Colin Dean xvp",
  [30] = "Apple Remote Desktop",
  [35] = "Mac OS X security type",
  [0xfffffffa] = "UltraVNC MS Logon",
}

-- VeNCrypt auth subtype names.
vnc.VENCRYPT_SUBTYPES = {
  [256] = "Plain",
  [257] = "None, Anonymous TLS",
  [258] = "VNC auth, Anonymous TLS",
  [259] = "Plain, Anonymous TLS",
  [260] = "None, Server-authenticated TLS",
  [261] = "VNC auth, Server-authenticated TLS",
  [262] = "Plain, Server-authenticated TLS",
  [263] = "SASL, Server-authenticated TLS",
  [264] = "SASL, Anonymous TLS",
}

-- The versions nmap's library knows, in order.
local KNOWN = { "RFB 003.003", "RFB 003.007", "RFB 003.008", "RFB 003.889" }
local SHORT = { ["RFB 003.003"] = "3.3", ["RFB 003.007"] = "3.7", ["RFB 003.008"] = "3.8", ["RFB 003.889"] = "3.889" }

-- The server's reason for a refusal (a 4-byte length, then text).
local function reason(sock)
  local head = sock:recv_exact(4)
  if not head then
    return "server refused, without a reason"
  end
  local n = string.unpack(">I4", head)
  local text = ""
  if n > 0 then
    text = sock:recv_exact(math.min(n, MAX_REASON)) or "(reason cut short)"
  end
  return "server refused: " .. text
end

-- Reads the server's version, answers it, reads the security types:
-- { server = "RFB 003.008", version = "3.8", client = "RFB 003.008",
-- types = { ... } }, or nil, err.
function vnc.handshake(sock)
  local line, err = sock:recv_line(16)
  if not line then
    return nil, "no RFB version: " .. tostring(err)
  end
  if not string.match(line, "^RFB %d%d%d%.%d%d%d$") then
    return nil, "not a VNC port"
  end
  local client = line
  if not SHORT[line] then
    for _, v in ipairs(KNOWN) do
      if v >= line then
        break
      end
      client = v
    end
  end
  local hs = {
    server = line,
    version = SHORT[line] or string.match(line, "^RFB (%d+%.%d+)"),
    client = client,
    types = {},
  }
  local ok, serr = sock:send(client .. "\n")
  if not ok then
    return nil, "send: " .. tostring(serr)
  end
  if client == "RFB 003.003" then
    -- 3.3: the server picks the one type, a 4-byte number.
    local raw, rerr = sock:recv_exact(4)
    if not raw then
      return nil, "no security type: " .. tostring(rerr)
    end
    hs.types[1] = string.unpack(">I4", raw)
    if hs.types[1] == 0 then
      return nil, reason(sock)
    end
    return hs
  end
  local count, cerr = sock:recv_exact(1)
  if not count then
    return nil, "no security types: " .. tostring(cerr)
  end
  if string.byte(count) == 0 then
    return nil, reason(sock)
  end
  local raw, rerr = sock:recv_exact(string.byte(count))
  if not raw then
    return nil, "security types cut short: " .. tostring(rerr)
  end
  for i = 1, #raw do
    hs.types[i] = string.byte(raw, i)
  end
  return hs
end

-- After the client chose VeNCrypt: agrees on version 0.2 and reads the
-- auth subtypes the server offers (a list of numbers), or nil, err.
function vnc.vencrypt(sock)
  local v, err = sock:recv_exact(2)
  if not v then
    return nil, "no VeNCrypt version: " .. tostring(err)
  end
  local major, minor = string.byte(v, 1, 2)
  if major ~= 0 or minor ~= 2 then
    return nil, ("Unknown VeNCrypt version: %d.%d"):format(major, minor)
  end
  local ok, serr = sock:send("\0\2")
  if not ok then
    return nil, "send: " .. tostring(serr)
  end
  local ack = sock:recv_exact(1)
  if ack ~= "\0" then
    return nil, "Server refused VeNCrypt version 0.2"
  end
  local count = sock:recv_exact(1)
  if not count or string.byte(count) == 0 then
    return nil, "No VeNCrypt auth subtypes received"
  end
  local raw, rerr = sock:recv_exact(4 * string.byte(count))
  if not raw then
    return nil, "VeNCrypt subtypes cut short: " .. tostring(rerr)
  end
  local subtypes = {}
  for i = 1, #raw // 4 do
    subtypes[i] = string.unpack(">I4", raw, 4 * i - 3)
  end
  return subtypes
end

-- `types` as nmap's tables: { name = ..., type = n } each ("Unknown
-- security type" for a number `names` lacks).
function vnc.named(types, names)
  local out = {}
  for i, t in ipairs(types) do
    out[i] = { name = names[t] or "Unknown security type", type = t }
  end
  return out
end

-- Whether `list` holds `value`.
function vnc.has(list, value)
  return table.find(list, value) ~= nil
end

return vnc
