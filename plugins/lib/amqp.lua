-- amqp: the start of an AMQP 0-8 / 0-9 / 0-9-1 connection (the protocol of
-- RabbitMQ, Qpid and others): the protocol header a client sends, and the
-- connection.start method the server answers with, carrying its version,
-- its properties (product, version, platform, capabilities ...), its SASL
-- mechanisms and its locales.
--
--   local amqp = require "amqp"
--   local start, err = amqp.connection_start(ctx)   -- connects, asks, closes
--   start.version      --> "0-9" (the server's major-minor, as nmap names it)
--   start.properties   --> { {key = "product", value = "RabbitMQ"}, ... }
--   start.mechanisms, start.locales --> "PLAIN AMQPLAIN", "en_US"
--
-- Property values as nmap's amqp library gives them: a string stays a
-- string, a boolean is "YES" or "NO", a nested table is a list of entries
-- in turn. Every other field type is read past (its size is known) but not
-- kept: nmap's library shows none of them. Everything read is bounded:
-- one frame of at most MAX_FRAME bytes, tables nested at most MAX_DEPTH deep.

local amqp = {}

local MAX_FRAME = 64 * 1024
local MAX_DEPTH = 8
local MAX_ENTRIES = 1024
local TIMEOUT = 5000

-- The protocol headers a client may open with, by version.
amqp.HEADERS = {
  ["0-8"] = "AMQP\1\1\8\0",
  ["0-9"] = "AMQP\0\0\9\0",
  ["0-9-1"] = "AMQP\0\0\9\1",
}

-- Server versions (major * 256 + minor in connection.start) nmap knows.
local VERSIONS = { [0x0800] = "0-8", [0x0009] = "0-9" }

-- Sizes of the fixed-size field types (AMQP 0-9-1 as RabbitMQ and the
-- errata define them); S, x, A and F carry a 4-byte length instead.
local FIXED = { t = 1, b = 1, B = 1, s = 2, u = 2, I = 4, i = 4, l = 8, f = 4, d = 8, D = 5, T = 8, V = 0 }

-- A 4-byte length and that many bytes at `pos` of `s`: the bytes and the
-- position after them, or nil, err.
local function longstr(s, pos, what)
  if pos + 3 > #s then
    return nil, what .. ": cut short before its length"
  end
  local n = string.unpack(">I4", s, pos)
  if pos + 3 + n > #s then
    return nil, what .. ": " .. n .. " bytes announced, " .. (#s - pos - 3) .. " there"
  end
  return string.sub(s, pos + 4, pos + 3 + n), pos + 4 + n
end

-- The entries of a field table's bytes, or nil, err.
local function parse_table(s, depth)
  if depth > MAX_DEPTH then
    return nil, "tables nested deeper than " .. MAX_DEPTH
  end
  local entries, pos = {}, 1
  while pos <= #s do
    if #entries >= MAX_ENTRIES then
      return nil, "more than " .. MAX_ENTRIES .. " entries"
    end
    local klen = string.byte(s, pos)
    local key = string.sub(s, pos + 1, pos + klen)
    local kind = string.sub(s, pos + klen + 1, pos + klen + 1)
    if #key < klen or kind == "" then
      return nil, "field cut short"
    end
    pos = pos + klen + 2
    local value, raw
    if FIXED[kind] then
      if pos + FIXED[kind] - 1 > #s then
        return nil, "value of " .. key .. " cut short"
      end
      if kind == "t" then
        value = string.byte(s, pos) == 1 and "YES" or "NO"
      end
      pos += FIXED[kind]
    elseif kind == "S" or kind == "x" or kind == "A" or kind == "F" then
      raw, pos = longstr(s, pos, "value of " .. key)
      if not raw then
        return nil, pos
      end
      if kind == "S" then
        value = raw
      elseif kind == "F" then
        local err
        value, err = parse_table(raw, depth + 1)
        if not value then
          return nil, err
        end
      end
    else
      return nil, ("unknown field type %q for %s"):format(kind, key)
    end
    if value then
      entries[#entries + 1] = { key = key, value = value }
    end
  end
  return entries
end

function amqp.parse_table(s)
  return parse_table(s, 1)
end

-- The payload of a connection.start method frame, parsed; or nil, err.
function amqp.parse_start(payload)
  if #payload < 6 then
    return nil, "connection.start cut short"
  end
  local method, major, minor = string.unpack(">I4BB", payload)
  if method ~= 0x000A000A then
    return nil, ("expected connection.start (0x000A000A) method, but was %x"):format(method)
  end
  local version = VERSIONS[major * 256 + minor]
  if not version then
    return nil, ("unsupported version (%x)"):format(major * 256 + minor)
  end
  local raw, pos = longstr(payload, 7, "server properties")
  if not raw then
    return nil, pos
  end
  local properties, err = amqp.parse_table(raw)
  if not properties then
    return nil, err
  end
  local mechanisms, locales
  mechanisms, pos = longstr(payload, pos, "mechanisms")
  if not mechanisms then
    return nil, pos
  end
  locales, pos = longstr(payload, pos, "locales")
  if not locales then
    return nil, pos
  end
  return { version = version, properties = properties, mechanisms = mechanisms, locales = locales }
end

-- Reads the server's answer to a protocol header: { start = parsed } or
-- { header = "AMQP...." } when the server asks for another version.
function amqp.read_start(sock)
  local head, err = sock:recv_exact(7)
  if not head then
    return nil, "no answer: " .. tostring(err)
  end
  if string.sub(head, 1, 4) == "AMQP" then
    local last = sock:recv_exact(1)
    if not last then
      return nil, "protocol header cut short"
    end
    return { header = head .. last }
  end
  local kind, channel, size = string.unpack(">BI2I4", head)
  if kind ~= 1 then
    return nil, ("expected a method frame (1), but was %d"):format(kind)
  end
  if channel ~= 0 or size < 6 or size > MAX_FRAME then
    return nil, ("not a connection.start frame (channel %d, %d bytes)"):format(channel, size)
  end
  local payload, perr = sock:recv_exact(size)
  if not payload then
    return nil, "frame cut short: " .. tostring(perr)
  end
  local start, serr = amqp.parse_start(payload)
  if not start then
    return nil, serr
  end
  return { start = start }
end

-- Connects (ctx:connect, plain or TLS as the port was found), sends the
-- header of `version` (default "0-9-1"), and reads connection.start; a
-- server that asks for another version nmap knows is asked once more in
-- that one. Returns the parsed start, or nil, err.
function amqp.connection_start(ctx, version)
  local header = amqp.HEADERS[version or "0-9-1"] or amqp.HEADERS["0-9-1"]
  for _ = 1, 2 do
    local sock, err = ctx:connect{ timeout = TIMEOUT }
    if not sock then
      return nil, "connect: " .. tostring(err)
    end
    local ok, serr = sock:send(header)
    if not ok then
      sock:close()
      return nil, "send: " .. tostring(serr)
    end
    local answer, rerr = amqp.read_start(sock)
    sock:close()
    if not answer then
      return nil, rerr
    end
    if answer.start then
      return answer.start
    end
    local known = false
    for _, h in pairs(amqp.HEADERS) do
      known = known or (h == answer.header and h ~= header)
    end
    if not known then
      local v = { string.byte(answer.header, 5, 8) }
      return nil, ("unsupported version (%d.%d.%d.%d)"):format(v[1], v[2], v[3], v[4])
    end
    header = answer.header
  end
  return nil, "server keeps asking for another version"
end

return amqp
