-- mysql: the MySQL/MariaDB client/server protocol, as far as a scanner
-- needs it: packets, the server's greeting (the protocol 10 handshake), a
-- login with an empty password, and the OK/ERR packet that answers it.
--
--   local mysql = require "mysql"
--   local p, seq, short = mysql.split(ctx.banner)     -- a packet in bytes at hand
--   local p, seq, short = mysql.read_packet(sock)     -- a packet off a socket
--   local g, why = mysql.decode_greeting(p)          -- { protocol, version, ... }
--   local r, why = mysql.login(sock, g, "root")       -- r.ok, or r.error_code
--
-- A packet is a 3-byte little-endian payload length, a sequence byte and
-- the payload; one longer than `max` (default MAX_PACKET) is refused.
-- Every function returns nil, why on bytes that are not what it reads (cut
-- short, garbage); none raises an error on what a server sends. Strings
-- (version, salt, messages) are the server's bytes; `printable` escapes
-- them as nmap shows them.

local text = require "text"

local mysql = {}

mysql.MAX_PACKET = 8192
local MAX_MESSAGE = 300 -- bytes of an error message kept
local MAX_PLUGIN = 64 -- bytes of an auth plugin name kept

-- nmap's names of the capability flags (the lower 16 bits), bit by bit,
-- and of the upper 16 bits it knows ([sic]: "Statments").
mysql.CAPABILITIES = {
  "LongPassword", "FoundRows", "LongColumnFlag", "ConnectWithDatabase",
  "DontAllowDatabaseTableColumn", "SupportsCompression", "ODBCClient", "SupportsLoadDataLocal",
  "IgnoreSpaceBeforeParenthesis", "Speaks41ProtocolNew", "InteractiveClient", "SwitchToSSLAfterHandshake",
  "IgnoreSigpipes", "SupportsTransactions", "Speaks41ProtocolOld", "Support41Auth",
}
mysql.EXT_CAPABILITIES = {
  [1] = "SupportsMultipleStatments", [2] = "SupportsMultipleResults", [4] = "SupportsAuthPlugins",
}

local CLIENT_SECURE_CONNECTION = 0x8000 -- Support41Auth: a 20-byte scramble
local CLIENT_PROTOCOL_41 = 0x0200 -- Speaks41ProtocolNew
local EXT_PLUGIN_AUTH = 0x8 -- CLIENT_PLUGIN_AUTH, in the upper 16 bits

-- The names of the capability bits set in `caps` and `ext` (the lower and
-- upper 16 bits), in bit order, as nmap's mysql-info lists them.
function mysql.capability_names(caps, ext)
  local out = {}
  for i = 1, 16 do
    if bit32.btest(caps or 0, bit32.lshift(1, i - 1)) then
      out[#out + 1] = mysql.CAPABILITIES[i]
    end
  end
  for i = 1, 16 do
    local name = mysql.EXT_CAPABILITIES[i]
    if name and bit32.btest(ext or 0, bit32.lshift(1, i - 1)) then
      out[#out + 1] = name
    end
  end
  return out
end

-- Bytes as nmap prints them (text.printable, here for the plugins' sake).
mysql.printable = text.printable

-- Splits the first packet off `raw`: its payload, sequence number, and
-- true when the payload is cut short (fewer bytes than its header says).
function mysql.split(raw, max)
  if type(raw) ~= "string" or #raw < 5 then
    return nil, "shorter than a packet header"
  end
  local len, seq = string.unpack("<I3B", raw)
  if len == 0 or len > (max or mysql.MAX_PACKET) then
    return nil, "packet length " .. len .. " is out of bounds"
  end
  local p = string.sub(raw, 5, 4 + len)
  return p, seq, #p < len
end

-- Reads one packet from `sock` (a header, then at most `max` bytes): the
-- payload, its sequence number, and true when the connection ended or
-- stalled inside it (what came is returned).
function mysql.read_packet(sock, max)
  local head, err = sock:recv_exact(4)
  if not head then
    return nil, "no packet: " .. tostring(err)
  end
  local len, seq = string.unpack("<I3B", head)
  if len == 0 or len > (max or mysql.MAX_PACKET) then
    return nil, "packet length " .. len .. " is out of bounds"
  end
  local body = sock:recv_exact(len) or sock:recv(len)
  if not body or body == "" then
    return nil, "packet cut short: no payload"
  end
  return body, seq, #body < len
end

-- Sends `payload` as one packet with sequence number `seq`.
function mysql.send_packet(sock, payload, seq)
  return sock:send(string.pack("<I3B", #payload, seq) .. payload)
end

-- An ERR packet's payload (0xFF, a 2-byte code, "#" and a 5-character
-- SQLSTATE in protocol 4.1, the message): { error_code, sqlstate, message }.
function mysql.decode_error(p)
  if string.byte(p, 1) ~= 0xFF then
    return nil, "not an error packet"
  elseif #p < 3 then
    return nil, "error packet cut short"
  end
  local out = { error_code = string.unpack("<I2", p, 2) }
  local msg = string.sub(p, 4)
  if string.sub(msg, 1, 1) == "#" then
    out.sqlstate, msg = string.sub(msg, 2, 6), string.sub(msg, 7)
  end
  out.message = string.sub(msg, 1, MAX_MESSAGE)
  return out
end

local function greeting(p)
  local out = { protocol = string.byte(p, 1) }
  if out.protocol ~= 10 and out.protocol ~= 9 then
    return nil, "protocol version " .. out.protocol .. " (only 9 and 10 are decoded)"
  end
  local pos
  out.version, pos = string.unpack("z", p, 2)
  if #out.version > 255 then
    return nil, "version string too long"
  end
  out.thread_id, pos = string.unpack("<I4", p, pos)
  if out.protocol == 9 then
    return out
  end
  out.salt, out.capabilities, pos = string.unpack("<c8xI2", p, pos)
  if pos < #p then
    local auth_len, _
    out.charset, out.status, out.ext_capabilities, auth_len, _, pos = string.unpack("<BI2I2Bc10", p, pos)
    if bit32.btest(out.capabilities, CLIENT_SECURE_CONNECTION) then
      -- The rest of the scramble, then a NUL (as nmap reads it: at least 12 bytes).
      local more
      more, pos = string.unpack("c" .. (math.max(13, auth_len - 8) - 1) .. "x", p, pos)
      out.salt ..= more
    end
    if bit32.btest(out.ext_capabilities, EXT_PLUGIN_AUTH) then
      out.auth_plugin = string.sub((string.unpack("z", p, pos)), 1, MAX_PLUGIN)
    end
  end
  return out
end

-- The greeting's payload decoded: { protocol, version, thread_id, and for
-- protocol 10: salt, capabilities, and when the server sent them charset,
-- status, ext_capabilities, auth_plugin }. A greeting that is an error
-- (a refused host) gives { protocol = 255, error_code, sqlstate, message }.
function mysql.decode_greeting(p)
  if type(p) ~= "string" or p == "" then
    return nil, "empty greeting"
  end
  if string.byte(p, 1) == 0xFF then
    local e, why = mysql.decode_error(p)
    if e then
      e.protocol = 0xFF
    end
    return e, why
  end
  local ok, out, why = pcall(greeting, p)
  if not ok then
    return nil, "greeting cut short or malformed: " .. string.gsub(tostring(out), "^.-:%d+: ", "")
  end
  return out, why
end

-- Client capabilities of a login, as nmap's mysql library sends them
-- (LongPassword, LongColumnFlag, SupportsLoadDataLocal, Speaks41ProtocolNew,
-- InteractiveClient, SupportsTransactions, Support41Auth; multiple
-- statements and results); CLIENT_PLUGIN_AUTH is added to name the plugin.
local LOGIN_CAPS = 0x0003A685
local CLIENT_PLUGIN_AUTH = 0x00080000
local LATIN1 = 8 -- latin1_swedish_ci, the character set nmap asks for

-- The HandshakeResponse41 payload of `user` with an empty password (for
-- mysql_native_password, an empty scramble). With `plugin_auth` (the
-- server offers CLIENT_PLUGIN_AUTH) it names mysql_native_password.
function mysql.handshake_response(user, plugin_auth)
  local caps = plugin_auth and LOGIN_CAPS + CLIENT_PLUGIN_AUTH or LOGIN_CAPS
  local p = string.pack("<I4I4Bc23zs1", caps, 16777216, LATIN1, string.rep("\0", 23), user, "")
  return plugin_auth and p .. "mysql_native_password\0" or p
end

-- A server's answer to a login or command: { ok = true, affected_rows,
-- insert_id, status, warnings } for OK, { ok = false, error_code,
-- sqlstate, message } for ERR, { switch = true, plugin, data } for an
-- AuthSwitchRequest (0xFE).
function mysql.decode_result(p)
  if type(p) ~= "string" or p == "" then
    return nil, "empty packet"
  end
  local kind = string.byte(p, 1)
  if kind == 0xFF then
    local e, why = mysql.decode_error(p)
    if e then
      e.ok = false
    end
    return e, why
  end
  if kind == 0xFE then
    local nul = string.find(p, "\0", 2, true)
    local plugin = string.sub(p, 2, (nul or #p + 1) - 1)
    return { switch = true, plugin = string.sub(plugin, 1, MAX_PLUGIN), data = nul and string.sub(p, nul + 1) or "" }
  end
  if kind ~= 0 then
    return nil, string.format("not an OK or ERR packet (0x%02X)", kind)
  end
  -- Length-encoded integers: one byte below 0xFB, or 0xFC/0xFD/0xFE and 2/3/8 bytes.
  local pos, values = 2, {}
  for i = 1, 2 do
    local b = string.byte(p, pos)
    local size = ({ [0xFC] = 2, [0xFD] = 3, [0xFE] = 8 })[b or 0]
    if not b or b == 0xFB or b == 0xFF then
      return nil, "OK packet cut short or malformed"
    end
    if size then
      if #p < pos + size then
        return nil, "OK packet cut short"
      end
      values[i] = size == 8 and string.unpack("<I4", p, pos + 1) + 2 ^ 32 * string.unpack("<I4", p, pos + 5)
        or string.unpack("<I" .. size, p, pos + 1)
      pos += size + 1
    else
      values[i] = b
      pos += 1
    end
  end
  local out = { ok = true, affected_rows = values[1], insert_id = values[2] }
  if #p >= pos + 3 then
    out.status, out.warnings = string.unpack("<I2I2", p, pos)
  end
  return out
end

-- What an empty password answers an AuthSwitchRequest to `plugin` with
-- (the SHA-256 plugins send one NUL byte, the others nothing); nil for a
-- plugin whose exchange is not a single packet.
local EMPTY_AUTH = {
  [""] = "", mysql_native_password = "", mysql_old_password = "", mysql_clear_password = "\0",
  caching_sha2_password = "\0", sha256_password = "\0",
}

-- Logs `user` in with an empty password on a socket whose greeting `g`
-- was just read: the server's decoded answer (r.ok is true when the login
-- succeeded), or nil, why. A switch to another plugin is followed once.
function mysql.login(sock, g, user)
  -- A HandshakeResponse41 needs Speaks41ProtocolNew. (A server without
  -- Support41Auth reads the scramble to a NUL: for an empty one, the same byte.)
  if not bit32.btest(g.capabilities or 0, CLIENT_PROTOCOL_41) then
    return nil, "the server does not speak the 4.1 protocol"
  end
  local plugin_auth = bit32.btest(g.ext_capabilities or 0, EXT_PLUGIN_AUTH)
  local ok, err = mysql.send_packet(sock, mysql.handshake_response(user, plugin_auth), 1)
  local p, seq, r, why
  for _ = 1, 2 do
    if not ok then
      return nil, "send: " .. tostring(err)
    end
    p, seq = mysql.read_packet(sock)
    if not p then
      return nil, seq
    end
    r, why = mysql.decode_result(p)
    if not (r and r.switch) then
      return r, why
    end
    local answer = EMPTY_AUTH[r.plugin]
    if not answer then
      return nil, "authentication switch to " .. mysql.printable(r.plugin)
    end
    ok, err = mysql.send_packet(sock, answer, (seq + 1) % 256)
  end
  return nil, "a second authentication switch"
end

return mysql
