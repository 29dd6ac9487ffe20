-- xmpp: an XMPP stream's opening (RFC 6120) read the way nmap's xmpp-info
-- reads it, tag by tag.
--
--   local xmpp = require "xmpp"
--   sock:send(xmpp.stream_header("example.org", "jabber:client"))
--   local r = xmpp.read_features(sock, "example.org")
--   -- r.stream_id, r.xmpp (ordered), r.features, r.capabilities (ordered),
--   -- r.compression_methods, r.auth_mechanisms, r.errors, r.unknown
--
-- Tags are read one at a time: up to the next ">" within 256 bytes (256
-- bytes without one are taken as they are, as nmap's pattern_limit does),
-- at most MAX_TAGS of them, and parsed as nmap's xmpp.XML.parse_tag does:
-- text before "<", the name, quoted attributes (empty values skipped),
-- start and finish. Reading stops at the end of <stream:features> or at
-- the first read that fails (closed or timed out), which nmap records as
-- the error "(timeout)". What is seen inside <stream:features> becomes
-- nmap's lists: TLS (required), compression methods, SASL mechanisms,
-- XEP features by name, entity capabilities, stream errors and unknown
-- features.
--
-- Ordered tables (r.xmpp, r.capabilities) are { keys = {...}, map = {...},
-- list = {...} }: nmap's output tables, whose keys keep their order.
-- xmpp.factor splits a plain and a TLS scan table as nmap's xmpp-info
-- does; xmpp.render gives NSE's text of these tables, and plain data.

local xmpp = {}

local MAX_TAG = 256
local MAX_TAGS = 1000

function xmpp.ordered()
  return { keys = {}, map = {}, list = {} }
end

function xmpp.set(t, k, v)
  if v == nil then
    return
  end
  if t.map[k] == nil then
    t.keys[#t.keys + 1] = k
  end
  t.map[k] = v
end

-- nmap's stream header: its attributes, in its order, and xml:lang ru-RU.
function xmpp.stream_header(server_name, xmlns)
  return "<?xml version='1.0'?><stream:stream xmlns:stream='http://etherx.jabber.org/streams' xmlns='"
    .. xmlns .. "' xml:lang='ru-RU' to='" .. server_name .. "' version='1.0'>"
end

-- One tag's text as a table { name, attrs, start, finish, contents }, or nil.
function xmpp.parse_tag(s)
  local contents, slash, name = string.match(s, "([^<]*)<(/?)([?:%w-]+)")
  if not name then
    return nil
  end
  local attrs = {}
  for k, v in string.gmatch(s, "%s([%w:]+)='([^']+)'") do
    attrs[k] = v
  end
  for k, v in string.gmatch(s, "%s([%w:]+)=\"([^\"]+)\"") do
    attrs[k] = v
  end
  return {
    name = name,
    attrs = attrs,
    start = slash == "",
    finish = slash ~= "" or string.sub(s, -2) == "/>",
    contents = contents,
  }
end

-- The next tag from `sock`, or nil (read failed, or no tag in the bytes).
function xmpp.read_tag(sock)
  local data, err = sock:recv_until(">", MAX_TAG)
  if not data and err.kind == "protocol" then -- no ">" in the bytes allowed
    data = sock:recv(MAX_TAG)
  end
  return data and xmpp.parse_tag(data)
end

local KNOWN = {
  starttls = true, compression = true, mechanisms = true, register = true, dialback = true,
  session = true, auth = true, bind = true, c = true, sm = true, amp = true, ver = true,
}

-- XEP features named by their element, as nmap names them.
local NAMED = {
  ver = "Roster Versioning", dialback = "Server Dialback", session = "IM Session Establishment",
  bind = "Resource Binding", amp = "Advanced Message Processing", register = "In-Band Registration",
}

-- Reads the server's stream header and features (after our header was
-- sent) and returns nmap's scan table (see the header).
function xmpp.read_features(sock, server_name)
  local r = {
    xmpp = xmpp.ordered(), capabilities = xmpp.ordered(), features = {}, compression_methods = {},
    auth_mechanisms = {}, errors = {}, unknown = {},
  }
  local stack = { "" }
  -- True if the open elements end with stream:features, then `...`.
  local function inside(...)
    local path = { "stream:features", ... }
    for n = 1, #path do
      if path[#path - n + 1] ~= stack[#stack - n + 1] then
        return false
      end
    end
    return true
  end
  local starttls, required, in_error, got_text
  for _ = 1, MAX_TAGS do
    local tag = xmpp.read_tag(sock)
    if not tag then
      table.insert(r.errors, "(timeout)")
      break
    end
    local name, attrs = tag.name, tag.attrs
    if name == "stream:features" and tag.finish then
      break
    end
    if inside() and not KNOWN[name] then
      table.insert(r.unknown, name)
    end
    if name == "stream:stream" and tag.start then
      if attrs["xmlns:ack"] == "http://www.xmpp.org/extensions/xep-0198.html#ns" then
        table.insert(r.xmpp.list, "Stream Management")
      end
      if attrs["xml:lang"] then
        xmpp.set(r.xmpp, "lang", attrs["xml:lang"])
      end
      if attrs.from and attrs.from ~= server_name then
        xmpp.set(r.xmpp, "server name", attrs.from)
      end
      r.stream_id = attrs.id
      xmpp.set(r.xmpp, "version", attrs.version or "(none)")
    end
    if name == "sm" and tag.start and inside() then
      -- nmap's pattern wants "urn:xmpp:sm:" and a dot (and fails without);
      -- the version number is what XEP-0198 puts there.
      local v = string.match(attrs.xmlns or "", "^urn:xmpp:sm:(%d+)")
      table.insert(r.features, "Stream management v" .. (v or "?"))
    end
    if name == "starttls" and inside() then
      starttls = true
    elseif name == "address" and tag.finish and inside() then
      table.insert(r.features, "MY IP: " .. tag.contents)
    elseif NAMED[name] and inside() then
      table.insert(r.features, NAMED[name])
    elseif name == "auth" and inside() then
      table.insert(r.auth_mechanisms, "Non-SASL")
    elseif name == "required" and inside("starttls") then
      required = true
    elseif name == "method" and inside("compression", "method") then
      if tag.finish then
        table.insert(r.compression_methods, tag.contents)
      end
    elseif name == "mechanism" and inside("mechanisms", "mechanism") then
      if tag.finish then
        table.insert(r.auth_mechanisms, tag.contents)
      end
    elseif name == "c" and inside() and attrs.node then
      xmpp.set(r.capabilities, "node", attrs.node)
      xmpp.set(r.capabilities, "ver", attrs.ver)
    end
    if name == "stream:error" then
      if tag.start then
        in_error = true
      elseif not got_text then
        if tag.contents ~= "" then
          table.insert(r.errors, { text = tag.contents })
        end
        in_error = false
      end
    elseif in_error then
      if name == "text" then
        if tag.finish then
          got_text = true
          table.insert(r.errors, { text = tag.contents })
        end
      else
        table.insert(r.errors, name)
      end
    end
    if tag.start and not tag.finish then
      stack[#stack + 1] = name
    elseif not tag.start and tag.finish and #stack > 1 then
      stack[#stack] = nil
    end
  end
  if starttls then
    table.insert(r.features, required and "TLS (required)" or "TLS")
  end
  return r
end

local LISTS = { "features", "compression_methods", "auth_mechanisms", "errors", "unknown" }

-- nmap's factor() of two scan tables (plain, then after TLS): what both
-- share and what only each has, as ordered tables: xmpp and capabilities
-- always, each list when not empty. nmap lists the items common to both in
-- Lua's hash order; here they keep the first table's order.
function xmpp.factor(t1, t2)
  local both, only1, only2 = xmpp.ordered(), xmpp.ordered(), xmpp.ordered()
  for _, cat in ipairs({ "xmpp", "capabilities" }) do
    local b, o1, o2 = xmpp.ordered(), xmpp.ordered(), xmpp.ordered()
    local a, c = t1[cat], t2[cat]
    for i, v in ipairs(a.list) do
      table.insert(c.list[i] == v and b.list or o1.list, v)
    end
    for i = #a.list + 1, #c.list do
      table.insert(o2.list, c.list[i])
    end
    for _, k in ipairs(a.keys) do
      local v, w = a.map[k], c.map[k]
      if w == v then
        xmpp.set(b, k, v)
      else
        xmpp.set(o1, k, v)
        xmpp.set(o2, k, w)
      end
    end
    for _, k in ipairs(c.keys) do
      if a.map[k] == nil then
        xmpp.set(o2, k, c.map[k])
      end
    end
    xmpp.set(both, cat, b)
    xmpp.set(only1, cat, o1)
    xmpp.set(only2, cat, o2)
  end
  for _, cat in ipairs(LISTS) do
    local in2, b, o1, o2 = {}, {}, {}, {}
    for _, v in ipairs(t2[cat]) do
      in2[v] = true
    end
    local in1 = {}
    for _, v in ipairs(t1[cat]) do
      in1[v] = true
      table.insert(in2[v] and b or o1, v)
    end
    for _, v in ipairs(t2[cat]) do
      if not in1[v] then
        table.insert(o2, v)
      end
    end
    xmpp.set(both, cat, #b > 0 and b or nil)
    xmpp.set(only1, cat, #o1 > 0 and o1 or nil)
    xmpp.set(only2, cat, #o2 > 0 and o2 or nil)
  end
  return both, only1, only2
end

-- An ordered table, a list, a { text = ... } record or a string as NSE's
-- text (nmap's format_table: list items first, then keys; `indent` for
-- this level) and as plain data for the structured result.
function xmpp.render(node, indent)
  if type(node) ~= "table" then
    return tostring(node), node
  end
  local list, keys, map = node, {}, node
  if node.keys then
    list, keys, map = node.list, node.keys, node.map
  elseif node.text then
    list, keys = {}, { "text" }
  end
  local out, data = {}, {}
  for i, v in ipairs(list) do
    local t, d = xmpp.render(v, indent .. "  ")
    out[#out + 1] = "\n" .. indent .. t
    data[i] = d
  end
  for _, k in ipairs(keys) do
    local t, d = xmpp.render(map[k], indent .. "  ")
    out[#out + 1] = "\n" .. indent .. k .. ": " .. t
    data[k] = d
  end
  return table.concat(out), data
end

return xmpp
