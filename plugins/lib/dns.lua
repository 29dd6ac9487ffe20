-- dns: DNS messages (RFC 1035 section 4) with EDNS(0) (RFC 6891): a query
-- built, an answer parsed, and one exchanged over UDP or TCP.
--
--   local dns = require "dns"
--   local q = dns.encode_query{ id = 7, name = "version.bind", type = dns.TYPE.TXT,
--                               class = dns.CLASS.CH }
--   local msg, err = dns.decode(datagram)          -- or nil, why
--   msg.answers[1].txt[1]                          --> "9.18.49-Debian"
--   local msg, err = dns.exchange(sock, q, { tcp = false })
--   dns.nsid(msg)                                  --> "ns1.example" or nil
--
-- A query may carry an OPT record: edns = { udp_size = 4096, dnssec_ok =
-- true, options = { { code = dns.OPT_NSID, data = "" } } }.
--
-- A decoded message is { id, qr, opcode, aa, tc, rd, ra, rcode, questions
-- = { { name, type, class } }, answers, authority, additional }; a record
-- is { name, type, class, ttl, data = the raw RDATA }, and also txt (its
-- character-strings) for a well-formed TXT and opt = { udp_size,
-- ext_rcode, version, dnssec_ok, options = { { code, data } } } for a
-- well-formed OPT. Names are dotted, without the final dot ("" is the
-- root). Parsing is bounded: a name follows at most MAX_POINTERS
-- compression pointers, each pointing before the one it follows, and is at most
-- 255 bytes; anything cut short or malformed gives nil and why.

local datagram = require "datagram"

local dns = {}

dns.TYPE = { A = 1, NS = 2, CNAME = 5, SOA = 6, PTR = 12, MX = 15, TXT = 16, AAAA = 28, SRV = 33, OPT = 41 }
dns.CLASS = { IN = 1, CH = 3 }
dns.OPT_NSID = 3 -- the NSID option code (RFC 5001)
dns.MAX_POINTERS = 16
local MAX_NAME = 255

---------------------------------------------------------------- building

-- A name in wire form, or nil, why.
function dns.encode_name(name)
  local parts = {}
  for label in string.gmatch(name, "[^.]+") do
    if #label > 63 then
      return nil, "label longer than 63 bytes"
    end
    parts[#parts + 1] = string.pack("s1", label)
  end
  local wire = table.concat(parts) .. "\0"
  if #wire > MAX_NAME then
    return nil, "name longer than 255 bytes"
  end
  return wire
end

-- The RDATA of an OPT record: its options, each code, length, data.
function dns.encode_options(options)
  local parts = {}
  for i, o in ipairs(options or {}) do
    parts[i] = string.pack(">I2s2", o.code, o.data or "")
  end
  return table.concat(parts)
end

-- A query's bytes: q = { id, name, type, class (default IN), rd (default
-- true), edns (optional, see above) }; or nil, why.
function dns.encode_query(q)
  local qname, err = dns.encode_name(q.name)
  if not qname then
    return nil, err
  end
  local flags = q.rd == false and 0 or 0x0100
  local opt = ""
  if q.edns then
    local e = q.edns
    local ttl = e.dnssec_ok and 0x8000 or 0 -- extended rcode 0, version 0, DO bit
    opt = "\0" .. string.pack(">I2I2I4s2", dns.TYPE.OPT, e.udp_size or 4096, ttl, dns.encode_options(e.options))
  end
  local header = string.pack(">I2I2I2I2I2I2", q.id or 0, flags, 1, 0, 0, q.edns and 1 or 0)
  return header .. qname .. string.pack(">I2I2", q.type or dns.TYPE.A, q.class or dns.CLASS.IN) .. opt
end

---------------------------------------------------------------- parsing

-- The name at `pos` of `msg`: the dotted name and the position after it
-- (after the first pointer, if any); or nil, why.
function dns.read_name(msg, pos)
  local labels, wire, hops, after, bound = {}, 1, 0, nil, nil
  while true do
    local len = string.byte(msg, pos)
    if not len then
      return nil, "truncated name"
    end
    if len >= 0xc0 then
      local lo = string.byte(msg, pos + 1)
      if not lo then
        return nil, "truncated compression pointer"
      end
      local target = (len - 0xc0) * 256 + lo + 1
      hops += 1
      if hops > dns.MAX_POINTERS then
        return nil, "more than " .. dns.MAX_POINTERS .. " compression pointers"
      end
      -- Each pointer points before the last one's target: no loop.
      if target >= (bound or pos) then
        return nil, "compression pointer does not point backwards"
      end
      after = after or pos + 2
      pos, bound = target, target
    elseif len >= 0x40 then
      return nil, ("unknown label type 0x%02x"):format(len)
    elseif len == 0 then
      return table.concat(labels, "."), after or pos + 1
    else
      wire += len + 1
      if wire > MAX_NAME then
        return nil, "name longer than 255 bytes"
      end
      if pos + len > #msg then
        return nil, "truncated label"
      end
      labels[#labels + 1] = string.sub(msg, pos + 1, pos + len)
      pos += len + 1
    end
  end
end

-- A TXT RDATA's character-strings, or nil, why.
function dns.txt(rdata)
  local out, pos = {}, 1
  while pos <= #rdata do
    local len = string.byte(rdata, pos)
    if pos + len > #rdata then
      return nil, "TXT string past the record's end"
    end
    out[#out + 1] = string.sub(rdata, pos + 1, pos + len)
    pos += len + 1
  end
  return out
end

-- An OPT RDATA's options, or nil, why.
function dns.options(rdata)
  local out, pos = {}, 1
  while pos <= #rdata do
    if pos + 3 > #rdata then
      return nil, "EDNS option header cut short"
    end
    local code, len = string.unpack(">I2I2", rdata, pos)
    if pos + 3 + len > #rdata then
      return nil, "EDNS option past the record's end"
    end
    out[#out + 1] = { code = code, data = string.sub(rdata, pos + 4, pos + 3 + len) }
    pos += 4 + len
  end
  return out
end

-- One resource record at `pos`: the record and the position after it.
local function read_record(msg, pos)
  local name, after = dns.read_name(msg, pos)
  if not name then
    return nil, after
  end
  if after + 9 > #msg then
    return nil, "truncated record header"
  end
  local rtype, class, ttl, rdlen = string.unpack(">I2I2I4I2", msg, after)
  local first = after + 10
  if first + rdlen - 1 > #msg then
    return nil, "record data past the message's end"
  end
  local rec = { name = name, type = rtype, class = class, ttl = ttl, data = string.sub(msg, first, first + rdlen - 1) }
  if rtype == dns.TYPE.TXT then
    rec.txt = dns.txt(rec.data)
  elseif rtype == dns.TYPE.OPT then
    local options = dns.options(rec.data)
    if options then
      rec.opt = {
        udp_size = class,
        ext_rcode = ttl // 0x1000000,
        version = (ttl // 0x10000) % 256,
        dnssec_ok = (ttl // 0x8000) % 2 == 1,
        options = options,
      }
    end
  end
  return rec, first + rdlen
end

-- A whole message decoded (see the top), or nil, why. Bytes after the
-- counted records are ignored.
function dns.decode(msg)
  if type(msg) ~= "string" or #msg < 12 then
    return nil, "shorter than a DNS header"
  end
  local id, flags, qd, an, ns, ar = string.unpack(">I2I2I2I2I2I2", msg)
  local m = {
    id = id,
    qr = flags >= 0x8000,
    opcode = (flags // 0x800) % 16,
    aa = (flags // 0x400) % 2 == 1,
    tc = (flags // 0x200) % 2 == 1,
    rd = (flags // 0x100) % 2 == 1,
    ra = (flags // 0x80) % 2 == 1,
    rcode = flags % 16,
    questions = {},
  }
  local pos = 13
  for i = 1, qd do
    local name, after = dns.read_name(msg, pos)
    if not name then
      return nil, "question " .. i .. ": " .. after
    end
    if after + 3 > #msg then
      return nil, "question " .. i .. ": truncated"
    end
    local qtype, qclass = string.unpack(">I2I2", msg, after)
    m.questions[i] = { name = name, type = qtype, class = qclass }
    pos = after + 4
  end
  for _, section in ipairs{ { "answers", an }, { "authority", ns }, { "additional", ar } } do
    local list = {}
    for i = 1, section[2] do
      local rec, after = read_record(msg, pos)
      if not rec then
        return nil, section[1] .. " record " .. i .. ": " .. after
      end
      list[i] = rec
      pos = after
    end
    m[section[1]] = list
  end
  return m
end

-- The NSID (RFC 5001) in a decoded message: the data of the NSID option
-- of its first OPT record that has options, or nil.
function dns.nsid(m)
  for _, rec in ipairs(m.additional or {}) do
    if rec.opt and #rec.opt.options > 0 then
      for _, o in ipairs(rec.opt.options) do
        if o.code == dns.OPT_NSID then
          return o.data
        end
      end
      return nil
    end
  end
  return nil
end

---------------------------------------------------------------- exchange

-- Sends query bytes `q` and returns the decoded answer with the same id.
-- Over UDP (a ctx:udp socket, lib datagram): opts.tries sends (default 2),
-- reading a few datagrams after each. Over TCP (opts.tcp, a ctx:connect
-- socket): the message and the answer each after a two-byte length.
-- Or nil, why.
function dns.exchange(sock, q, opts)
  opts = opts or {}
  local id = string.unpack(">I2", q)
  local function ours(bytes)
    local m, err = dns.decode(bytes)
    if m and (m.id ~= id or not m.qr) then
      return nil, "an answer to another query"
    end
    return m, err
  end
  if not opts.tcp then
    return datagram.exchange(sock, q, ours, { tries = opts.tries })
  end
  local ok, err = sock:send(string.pack(">s2", q))
  if not ok then
    return nil, "send: " .. tostring(err)
  end
  local head, herr = sock:recv_exact(2)
  if not head then
    return nil, tostring(herr)
  end
  local len = string.unpack(">I2", head)
  if len < 12 then
    return nil, "answer shorter than a DNS header"
  end
  local body, berr = sock:recv_exact(len)
  if not body then
    return nil, tostring(berr)
  end
  return ours(body)
end

return dns
