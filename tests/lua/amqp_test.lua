-- Unit tests of lib/amqp.lua on fixed bytes: a RabbitMQ-like
-- connection.start, every truncation of it, garbage, and the version retry
-- through a fake ctx and fake sockets. Prints "ok N" (N assertions).

local amqp = require "amqp"

-- Runs every check; returns how many passed (an assert stops it at the first failure).
local function tests()
  local n = 0
  local function check(cond, what)
    n += 1
    assert(cond, what)
  end

  local function field(key, kind, value)
    return string.pack(">s1", key) .. kind .. value
  end

  local caps = field("publisher_confirms", "t", "\1") .. field("basic.nack", "t", "\0")
  local props = field("capabilities", "F", string.pack(">s4", caps))
    .. field("port", "I", string.pack(">i4", 5672)) -- read past, not kept
    .. field("list", "A", string.pack(">s4", "S\0\0\0\1x")) -- read past, not kept
    .. field("product", "S", string.pack(">s4", "RabbitMQ"))
    .. field("version", "S", string.pack(">s4", "3.10.8"))
  local payload = string.pack(">I4BB", 0x000A000A, 0, 9) .. string.pack(">s4", props)
    .. string.pack(">s4", "PLAIN AMQPLAIN") .. string.pack(">s4", "en_US")
  local frame = string.pack(">BI2I4", 1, 0, #payload) .. payload .. "\206"

  -- The whole start, parsed.
  local s = amqp.parse_start(payload)
  check(s and s.version == "0-9", "version")
  check(#s.properties == 3, "three kept properties")
  check(s.properties[1].key == "capabilities" and type(s.properties[1].value) == "table", "nested table")
  check(s.properties[1].value[1].value == "YES" and s.properties[1].value[2].value == "NO", "booleans")
  check(s.properties[2].key == "product" and s.properties[2].value == "RabbitMQ", "string")
  check(s.properties[3].value == "3.10.8", "version property")
  check(s.mechanisms == "PLAIN AMQPLAIN" and s.locales == "en_US", "mechanisms and locales")

  -- Every truncation gives nil and a reason, never an error.
  for cut = 0, #payload - 1 do
    local ok, r, err = pcall(amqp.parse_start, string.sub(payload, 1, cut))
    check(ok and r == nil and type(err) == "string", "cut at " .. cut)
  end

  -- Garbage.
  local r, err = amqp.parse_table(field("k", "Z", "x"))
  check(r == nil and string.find(err, "unknown field type"), "unknown type")
  local deep = field("v", "t", "\1")
  for _ = 1, 12 do
    deep = field("t", "F", string.pack(">s4", deep))
  end
  r, err = amqp.parse_table(deep)
  check(r == nil and string.find(err, "deeper"), "too deep")
  r, err = amqp.parse_table(field("k", "S", "\255\255\255\255abc"))
  check(r == nil and string.find(err, "announced"), "long string past the end")
  r, err = amqp.parse_start(string.pack(">I4BB", 0x000A000B, 0, 9) .. string.rep("\0", 12))
  check(r == nil and string.find(err, "connection.start"), "wrong method")
  r, err = amqp.parse_start(string.pack(">I4BB", 0x000A000A, 1, 0) .. string.rep("\0", 12))
  check(r == nil and string.find(err, "unsupported version"), "unknown version")
  check(#amqp.parse_table("") == 0, "empty table")

  -- Fake sockets over fixed bytes.
  local function fake(bytes)
    local pos = 1
    return {
      sent = {},
      send = function(self, d)
        self.sent[#self.sent + 1] = d
        return true
      end,
      recv_exact = function(_, k)
        if pos + k - 1 > #bytes then
          return nil, "closed"
        end
        local out = string.sub(bytes, pos, pos + k - 1)
        pos += k
        return out
      end,
      close = function() end,
    }
  end

  local a = amqp.read_start(fake(frame))
  check(a and a.start and a.start.locales == "en_US", "read_start")
  a = amqp.read_start(fake("AMQP\0\0\9\0"))
  check(a and a.header == "AMQP\0\0\9\0", "version asked for")
  a, err = amqp.read_start(fake(string.pack(">BI2I4", 1, 0, 0x40000000)))
  check(a == nil and string.find(err, "not a connection.start"), "huge frame refused")
  a, err = amqp.read_start(fake(string.pack(">BI2I4", 3, 0, 10)))
  check(a == nil and string.find(err, "method frame"), "heartbeat frame refused")
  a, err = amqp.read_start(fake(string.sub(frame, 1, 20)))
  check(a == nil and string.find(err, "cut short"), "frame cut short")
  a, err = amqp.read_start(fake("SSH-2.0"))
  check(a == nil, "not AMQP")

  -- connection_start: a server that wants 0-9 is asked again in 0-9.
  local socks = { fake("AMQP\0\0\9\0"), fake(frame) }
  local ctx = {
    connect = function()
      return table.remove(socks, 1)
    end,
  }
  local first, second = socks[1], socks[2]
  s = amqp.connection_start(ctx)
  check(s and s.version == "0-9", "retried start")
  check(first.sent[1] == "AMQP\0\0\9\1" and second.sent[1] == "AMQP\0\0\9\0", "headers sent")
  socks = { fake("AMQP\0\0\1\0") }
  s, err = amqp.connection_start(ctx)
  check(s == nil and string.find(err, "unsupported version %(0.0.1.0%)"), "unknown header")
  socks = {}
  s, err = amqp.connection_start(ctx)
  check(s == nil and string.find(err, "connect"), "no connection")
  return n
end

return {
  id = "amqp-test",
  description = "Unit tests of lib/amqp.lua.",
  categories = { "safe" },
  ports = { 5672 },
  run = function()
    return "ok " .. tests()
  end,
}
