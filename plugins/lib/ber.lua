-- ber: ASN.1 Basic Encoding Rules (X.690) as LDAP (RFC 4511) and SNMP
-- (RFC 3416) use them: INTEGER, ENUMERATED, BOOLEAN, NULL, OCTET STRING,
-- OBJECT IDENTIFIER, SEQUENCE and SET, with application, context and
-- private tags, and definite lengths in short or long form.
--
--   local ber = require "ber"
--   local bytes = ber.sequence{ ber.integer(1), ber.octets("public") }
--   local tree, next_pos = ber.decode(bytes)         -- or nil, why
--   tree[2].value                                    --> "public"
--   local raw, err = ber.receive(sock, 65536)        -- one whole TLV from a stream
--
-- Encoders return strings. An `id` argument overrides the identifier (an
-- implicit tag): a byte value such as 0x87, or what ber.id(class,
-- constructed, number) returns.
--
-- The decoder gives a tree of nodes: { class = "universal" | "application"
-- | "context" | "private", constructed = bool, tag = number, id = first
-- identifier byte, data = content bytes (primitive nodes), value = the
-- universal types decoded (INTEGER and ENUMERATED as numbers, BOOLEAN,
-- OCTET STRING as is, OID as "1.3.6.1"; NULL gives value == nil) }, and a
-- constructed node's children as its array part (node[1], node[2], ...).
-- Decoding is strict and bounded: a length past its enclosing element, the
-- indefinite form, a length in more than 4 bytes, a tag number past 2^28,
-- nesting deeper than MAX_DEPTH, more than MAX_ELEMENTS elements, or a
-- malformed universal value gives nil and why, never an error.

local ber = {}

ber.MAX_DEPTH = 32
ber.MAX_ELEMENTS = 10000

-- Identifier classes (the two top bits) and universal tag numbers.
ber.UNIVERSAL, ber.APPLICATION, ber.CONTEXT, ber.PRIVATE = 0, 1, 2, 3
local CLASS_NAMES = { [0] = "universal", "application", "context", "private" }
ber.BOOLEAN, ber.INTEGER, ber.OCTET_STRING, ber.NULL, ber.OID = 1, 2, 4, 5, 6
ber.ENUMERATED, ber.SEQUENCE, ber.SET = 10, 16, 17

local EXACT = 2 ^ 53 -- integers past this are not exact as Luau numbers

---------------------------------------------------------------- encoding

-- The identifier bytes of a tag: class (0-3), constructed, number.
function ber.id(class, constructed, number)
  local first = class * 64 + (constructed and 32 or 0)
  if number < 31 then
    return string.char(first + number)
  end
  local bytes = { string.char(number % 128) }
  number = number // 128
  while number > 0 do
    table.insert(bytes, 1, string.char(128 + number % 128))
    number = number // 128
  end
  return string.char(first + 31) .. table.concat(bytes)
end

-- A definite length: short form below 128, long form above.
function ber.length(n)
  assert(n >= 0 and n < 2 ^ 32 and n % 1 == 0, "ber.length: bad length")
  if n < 128 then
    return string.char(n)
  end
  local bytes = {}
  while n > 0 do
    table.insert(bytes, 1, string.char(n % 256))
    n = n // 256
  end
  return string.char(128 + #bytes) .. table.concat(bytes)
end

-- One element: identifier (a byte value or identifier bytes), length, content.
function ber.tlv(id, content)
  if type(id) == "number" then
    id = string.char(id)
  end
  return id .. ber.length(#content) .. content
end

-- The minimal two's complement bytes of an integer (|n| < 2^53).
local function int_bytes(n)
  assert(n % 1 == 0 and math.abs(n) <= EXACT, "ber.integer: not an exact integer")
  local bytes = {}
  if n >= 0 then
    repeat
      table.insert(bytes, 1, n % 256)
      n = n // 256
    until n == 0
    if bytes[1] >= 128 then
      table.insert(bytes, 1, 0)
    end
  else
    local m = -n - 1 -- the bytes of n are those of m inverted
    repeat
      table.insert(bytes, 1, 255 - m % 256)
      m = m // 256
    until m == 0
    if bytes[1] < 128 then
      table.insert(bytes, 1, 255)
    end
  end
  return string.char(table.unpack(bytes))
end

function ber.integer(n, id)
  return ber.tlv(id or 0x02, int_bytes(n))
end

function ber.enumerated(n, id)
  return ber.tlv(id or 0x0a, int_bytes(n))
end

function ber.boolean(b, id)
  return ber.tlv(id or 0x01, b and "\255" or "\0")
end

function ber.null(id)
  return ber.tlv(id or 0x05, "")
end

function ber.octets(s, id)
  return ber.tlv(id or 0x04, s)
end

-- An OBJECT IDENTIFIER from "1.3.6.1.2.1.1.1.0" or a list of arcs.
function ber.oid(oid, id)
  local arcs = oid
  if type(oid) == "string" then
    arcs = {}
    for arc in string.gmatch(oid, "[^.]+") do
      arcs[#arcs + 1] = assert(tonumber(arc), "ber.oid: bad arc")
    end
  end
  assert(#arcs >= 2 and arcs[1] <= 2 and (arcs[1] == 2 or arcs[2] < 40), "ber.oid: bad first arcs")
  local out = {}
  local function sub(v)
    assert(v >= 0 and v % 1 == 0 and v <= EXACT, "ber.oid: bad arc")
    local bytes = { v % 128 }
    v = v // 128
    while v > 0 do
      table.insert(bytes, 1, 128 + v % 128)
      v = v // 128
    end
    out[#out + 1] = string.char(table.unpack(bytes))
  end
  sub(arcs[1] * 40 + arcs[2])
  for i = 3, #arcs do
    sub(arcs[i])
  end
  return ber.tlv(id or 0x06, table.concat(out))
end

-- A SEQUENCE (or SET) of encoded elements: a list of strings, or one string.
function ber.sequence(parts, id)
  return ber.tlv(id or 0x30, type(parts) == "table" and table.concat(parts) or parts)
end

function ber.set(parts, id)
  return ber.tlv(id or 0x31, type(parts) == "table" and table.concat(parts) or parts)
end

-- [APPLICATION n] and [n] (context) elements around content already encoded.
function ber.application(n, content, constructed)
  return ber.tlv(ber.id(ber.APPLICATION, constructed, n), content)
end

function ber.context(n, content, constructed)
  return ber.tlv(ber.id(ber.CONTEXT, constructed, n), content)
end

---------------------------------------------------------------- decoding

-- A two's complement INTEGER's content as a number, or nil, why.
function ber.int_of(data)
  if #data == 0 then
    return nil, "empty INTEGER"
  end
  local negative = string.byte(data, 1) >= 128
  local v = 0
  for i = 1, #data do
    local b = string.byte(data, i)
    v = v * 256 + (negative and 255 - b or b)
    if v > EXACT then
      return nil, "INTEGER too large"
    end
  end
  return negative and -v - 1 or v
end

-- An INTEGER's content read as unsigned (SNMP's Counter, Gauge, TimeTicks,
-- Counter64 when it fits), or nil, why.
function ber.uint_of(data)
  if #data == 0 then
    return nil, "empty INTEGER"
  end
  local v = 0
  for i = 1, #data do
    v = v * 256 + string.byte(data, i)
    if v > EXACT then
      return nil, "INTEGER too large"
    end
  end
  return v
end

-- An OBJECT IDENTIFIER's content as "1.3.6.1...", or nil, why.
function ber.oid_of(data)
  if #data == 0 then
    return nil, "empty OID"
  end
  local arcs, v = {}, 0
  for i = 1, #data do
    local b = string.byte(data, i)
    v = v * 128 + b % 128
    if v > EXACT then
      return nil, "OID arc too large"
    end
    if b < 128 then
      if #arcs == 0 then
        local first = v < 80 and v // 40 or 2
        arcs[1], arcs[2] = first, v - first * 40
      else
        arcs[#arcs + 1] = v
      end
      v = 0
    elseif i == #data then
      return nil, "OID ends inside an arc"
    end
  end
  for i, a in ipairs(arcs) do
    arcs[i] = string.format("%d", a)
  end
  return table.concat(arcs, ".")
end

-- The length encoded at `pos` (first byte already known to be `l`):
-- length, position after it; or nil, why.
local function length_at(s, pos, stop)
  if pos > stop then
    return nil, "truncated: no length"
  end
  local l = string.byte(s, pos)
  pos += 1
  if l < 128 then
    return l, pos
  elseif l == 128 then
    return nil, "indefinite length not supported"
  end
  local n = l - 128
  if n > 4 then
    return nil, ("length in %d bytes"):format(n)
  end
  if pos + n - 1 > stop then
    return nil, "truncated: length cut short"
  end
  local len = 0
  for i = pos, pos + n - 1 do
    len = len * 256 + string.byte(s, i)
  end
  return len, pos + n
end

-- The header of the element at `pos`, which must end by `stop` (default:
-- the end of `s`): { class, constructed, tag, id, first, last } (`first`
-- and `last` bound the content), and the position after the element; or
-- nil, why.
function ber.header(s, pos, stop)
  pos = pos or 1
  stop = stop or #s
  if pos > stop then
    return nil, "truncated: no identifier"
  end
  local b = string.byte(s, pos)
  local h = { class = CLASS_NAMES[b // 64], constructed = (b // 32) % 2 == 1, tag = b % 32, id = b }
  pos += 1
  if h.tag == 31 then
    local tag = 0
    for i = 1, 5 do
      if i == 5 then
        return nil, "tag number too large"
      end
      if pos > stop then
        return nil, "truncated: tag cut short"
      end
      local c = string.byte(s, pos)
      pos += 1
      tag = tag * 128 + c % 128
      if c < 128 then
        break
      end
    end
    h.tag = tag
  end
  local len, after = length_at(s, pos, stop)
  if not len then
    return nil, after
  end
  if len > stop - after + 1 then
    return nil, ("length %d past the end of the input (%d bytes left)"):format(len, stop - after + 1)
  end
  h.first, h.last = after, after + len - 1
  return h, h.last + 1
end

local function decode_at(s, pos, stop, depth, count)
  if depth > ber.MAX_DEPTH then
    return nil, "nesting deeper than " .. ber.MAX_DEPTH
  end
  count.n += 1
  if count.n > ber.MAX_ELEMENTS then
    return nil, "more than " .. ber.MAX_ELEMENTS .. " elements"
  end
  local node, after = ber.header(s, pos, stop)
  if not node then
    return nil, after
  end
  if node.constructed then
    local p = node.first
    while p <= node.last do
      local child, next_pos = decode_at(s, p, node.last, depth + 1, count)
      if not child then
        return nil, next_pos
      end
      node[#node + 1] = child
      p = next_pos
    end
  else
    local data = string.sub(s, node.first, node.last)
    node.data = data
    if node.class == "universal" then
      local t, err = node.tag, nil
      if t == ber.INTEGER or t == ber.ENUMERATED then
        node.value, err = ber.int_of(data)
      elseif t == ber.BOOLEAN then
        if #data ~= 1 then
          err = "BOOLEAN of " .. #data .. " bytes"
        end
        node.value = data ~= "\0"
      elseif t == ber.NULL then
        if #data ~= 0 then
          err = "NULL with content"
        end
      elseif t == ber.OID then
        node.value, err = ber.oid_of(data)
      elseif t == ber.OCTET_STRING then
        node.value = data
      end
      if err then
        return nil, err
      end
    end
  end
  node.first, node.last = nil, nil
  return node, after
end

-- The element at `pos` (default 1) of `s`, decoded, and the position after
-- it (the caller decides what trailing bytes mean); or nil, why.
function ber.decode(s, pos)
  return decode_at(s, pos or 1, #s, 1, { n = 0 })
end

-- One whole element (identifier, length and content) read from a stream
-- socket (`recv_exact`), of at most `max` bytes in all (default 65536);
-- or nil, why.
function ber.receive(sock, max)
  max = max or 65536
  local head, err = sock:recv_exact(1)
  if not head then
    return nil, err
  end
  local function more(n)
    local got
    got, err = sock:recv_exact(n)
    if got then
      head ..= got
    end
    return got
  end
  if string.byte(head, 1) % 32 == 31 then
    -- High tag number: its bytes up to one below 128, at most 4.
    repeat
      if #head > 4 or not more(1) then
        return nil, err or "tag number too large"
      end
    until string.byte(head, #head) < 128
  end
  if not more(1) then
    return nil, err
  end
  local at = #head -- the length's first byte
  local l = string.byte(head, at)
  if l > 128 and l <= 132 and not more(l - 128) then
    return nil, err
  end
  local len, why = length_at(head, at, #head)
  if not len then
    return nil, why
  end
  if #head + len > max then
    return nil, ("element of %d bytes is over the limit of %d"):format(#head + len, max)
  end
  if len > 0 and not more(len) then
    return nil, err
  end
  return head
end


-- `bytes` as exactly one element (a whole message): its node, or nil, why.
function ber.decode_whole(bytes)
  local node, after = ber.decode(bytes)
  if not node then
    return nil, "not BER: " .. after
  end
  if after ~= #bytes + 1 then
    return nil, "bytes after the message"
  end
  return node
end

return ber
