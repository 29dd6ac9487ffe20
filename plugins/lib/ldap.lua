-- ldap: LDAPv3 searches (RFC 4511) on the ber library, over a stream socket.
--
--   local ldap = require "ldap"
--   local entries, done = ldap.search(sock, 1, { base = "", scope = ldap.SCOPE.base })
--   entries[1].dn, entries[1].attributes[1].type, entries[1].attributes[1].values[1]
--   done.code, done.matched, done.message     -- the searchResDone
--
-- ldap.search sends one searchRequest and reads its answers, one
-- LDAPMessage at a time (each at most opts.max_message bytes, default
-- 256 KiB; at most opts.max_entries entries, default 1000): searchResEntry
-- messages become entries, searchResRef ones are skipped, searchResDone
-- ends it. The filter is a presence test, (attr=*), attr "objectClass"
-- unless opts.present names another. A message that is not well formed,
-- the server's Notice of Disconnection, or too many of anything gives
-- nil, why.

local ber = require "ber"

local ldap = {}

ldap.SCOPE = { base = 0, one = 1, sub = 2 }
ldap.DEREF = { never = 0, searching = 1, finding = 2, always = 3 }

-- Protocol operations ([APPLICATION n]).
local SEARCH_REQUEST, SEARCH_ENTRY, SEARCH_DONE, SEARCH_REF, EXTENDED_RESPONSE = 3, 4, 5, 19, 24

local MAX_MESSAGE = 256 * 1024
local MAX_ENTRIES = 1000

-- The bytes of a searchRequest with message id `id`. opts: base, scope,
-- deref, size_limit, time_limit, types_only, present, attributes (list).
function ldap.search_request(id, opts)
  local attrs = {}
  for i, a in ipairs(opts.attributes or {}) do
    attrs[i] = ber.octets(a)
  end
  local body = table.concat{
    ber.octets(opts.base or ""),
    ber.enumerated(opts.scope or ldap.SCOPE.base),
    ber.enumerated(opts.deref or ldap.DEREF.never),
    ber.integer(opts.size_limit or 0),
    ber.integer(opts.time_limit or 0),
    ber.boolean(opts.types_only or false),
    ber.octets(opts.present or "objectClass", ber.id(ber.CONTEXT, false, 7)), -- present filter
    ber.sequence(attrs),
  }
  return ber.sequence{ ber.integer(id), ber.application(SEARCH_REQUEST, body, true) }
end

local function is_octets(node)
  return node and node.class == "universal" and node.tag == ber.OCTET_STRING and not node.constructed
end

-- An LDAPMessage's bytes decoded: { id, op (the [APPLICATION] number), node
-- (the operation's node) }, or nil, why.
function ldap.decode_message(bytes)
  local msg, why = ber.decode_whole(bytes)
  if not msg then
    return nil, why
  end
  if msg.class ~= "universal" or msg.tag ~= ber.SEQUENCE or #msg < 2 then
    return nil, "not an LDAPMessage"
  end
  local id, op = msg[1], msg[2]
  if id.class ~= "universal" or id.tag ~= ber.INTEGER or op.class ~= "application" then
    return nil, "not an LDAPMessage"
  end
  return { id = id.value, op = op.tag, node = op }
end

-- A searchResEntry's node as { dn, attributes = { { type, values } } }, or nil, why.
function ldap.parse_entry(node)
  if not node.constructed or #node ~= 2 or not is_octets(node[1]) or not node[2].constructed then
    return nil, "malformed searchResEntry"
  end
  local entry = { dn = node[1].value, attributes = {} }
  for i, attr in ipairs(node[2]) do
    if #attr ~= 2 or not is_octets(attr[1]) or not attr[2].constructed then
      return nil, "malformed attribute " .. i
    end
    local values = {}
    for j, v in ipairs(attr[2]) do
      if not is_octets(v) then
        return nil, "malformed value of " .. attr[1].value
      end
      values[j] = v.value
    end
    entry.attributes[i] = { type = attr[1].value, values = values }
  end
  return entry
end

-- An LDAPResult (searchResDone and others) as { code, matched, message }, or nil, why.
function ldap.parse_result(node)
  local code = node[1]
  if not node.constructed or #node < 3 or code.tag ~= ber.ENUMERATED or code.class ~= "universal"
    or not is_octets(node[2]) or not is_octets(node[3]) then
    return nil, "malformed LDAPResult"
  end
  return { code = code.value, matched = node[2].value, message = node[3].value }
end

-- Sends a search and reads its entries and its searchResDone:
-- entries, done; or nil, why.
function ldap.search(sock, id, opts)
  local ok, err = sock:send(ldap.search_request(id, opts))
  if not ok then
    return nil, "send: " .. tostring(err)
  end
  local max_entries = opts.max_entries or MAX_ENTRIES
  local entries = {}
  -- Entries, references and at most a few stray messages, then the end.
  for _ = 1, max_entries + 64 do
    local bytes, rerr = ber.receive(sock, opts.max_message or MAX_MESSAGE)
    if not bytes then
      return nil, "reading a reply: " .. tostring(rerr)
    end
    local msg, merr = ldap.decode_message(bytes)
    if not msg then
      return nil, merr
    end
    if msg.id == 0 and msg.op == EXTENDED_RESPONSE then
      local r = ldap.parse_result(msg.node)
      return nil, "the server disconnects: " .. (r and r.message or "notice of disconnection")
    end
    if msg.id == id then
      if msg.op == SEARCH_ENTRY then
        local entry, eerr = ldap.parse_entry(msg.node)
        if not entry then
          return nil, eerr
        end
        if #entries >= max_entries then
          return nil, "more than " .. max_entries .. " entries"
        end
        entries[#entries + 1] = entry
      elseif msg.op == SEARCH_DONE then
        local done, derr = ldap.parse_result(msg.node)
        if not done then
          return nil, derr
        end
        return entries, done
      elseif msg.op ~= SEARCH_REF then
        return nil, "unexpected operation " .. msg.op
      end
    end
  end
  return nil, "no searchResDone"
end

-- The values of attribute `name` (case-insensitive) in `entries`, or nil.
function ldap.values(entries, name)
  name = string.lower(name)
  for _, e in ipairs(entries) do
    for _, a in ipairs(e.attributes) do
      if string.lower(a.type) == name then
        return a.values
      end
    end
  end
  return nil
end

return ldap
