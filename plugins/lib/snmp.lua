-- snmp: SNMPv1 and v2c GetRequest and GetResponse (RFC 1157, RFC 3416) on
-- the ber library, over a datagram socket (ctx:udp, lib datagram).
--
--   local snmp = require "snmp"
--   local bytes = snmp.get_request("public", 28428, { "1.3.6.1.2.1.1.1.0" })
--   local resp, err = snmp.decode_response(datagram)
--   local resp, err = snmp.get(sock, "public", { "1.3.6.1.2.1.1.1.0" }, { id = 7 })
--   resp.varbinds[1].value                   --> "Linux host 6.1 ..."
--
-- A response is { version (0 = v1, 1 = v2c), community, id, error_status,
-- error_index, varbinds = { { oid = "1.3...", type = "...", value = ... } } }.
-- Types and values: "integer", "counter32", "gauge32", "timeticks",
-- "uinteger32", "counter64" (numbers; a Counter64 past 2^53 gives its hex as
-- "0x..."), "octets" and "opaque" (strings), "oid" ("1.3..."), "ipaddress"
-- ("a.b.c.d"), "null", "noSuchObject", "noSuchInstance", "endOfMibView"
-- (no value). Anything else fails the decode: nil, why.

local ber = require "ber"
local datagram = require "datagram"

local snmp = {}

snmp.V1, snmp.V2C = 0, 1
local GET_REQUEST, RESPONSE = 0, 2 -- context-class PDU tags

-- Application-class value types (RFC 2578 section 7.1).
local APP_TYPES = {
  [0] = "ipaddress", [1] = "counter32", [2] = "gauge32", [3] = "timeticks",
  [4] = "opaque", [6] = "counter64", [7] = "uinteger32",
}
-- The v2c exceptions in a varbind (RFC 3416 section 3).
local EXCEPTIONS = { [0] = "noSuchObject", [1] = "noSuchInstance", [2] = "endOfMibView" }

-- The bytes of a GetRequest for `oids` (dotted strings).
function snmp.get_request(community, id, oids, version)
  local binds = {}
  for i, oid in ipairs(oids) do
    binds[i] = ber.sequence{ ber.oid(oid), ber.null() }
  end
  local pdu = ber.integer(id) .. ber.integer(0) .. ber.integer(0) .. ber.sequence(binds)
  return ber.sequence{ ber.integer(version or snmp.V1), ber.octets(community), ber.context(GET_REQUEST, pdu, true) }
end

-- A varbind's value node: type, value; or nil, why.
local function value_of(node)
  if node.constructed then
    return nil, "constructed value"
  end
  if node.class == "universal" then
    if node.tag == ber.INTEGER then
      return "integer", node.value
    elseif node.tag == ber.OCTET_STRING then
      return "octets", node.value
    elseif node.tag == ber.OID then
      return "oid", node.value
    elseif node.tag == ber.NULL then
      return "null", nil
    end
  elseif node.class == "application" then
    local t = APP_TYPES[node.tag]
    if t == "ipaddress" then
      if #node.data ~= 4 then
        return nil, "IpAddress of " .. #node.data .. " bytes"
      end
      return t, string.format("%d.%d.%d.%d", string.byte(node.data, 1, 4))
    elseif t == "opaque" then
      return t, node.data
    elseif t then
      local v, err = ber.uint_of(node.data)
      if not v and t == "counter64" and #node.data <= 9 then
        local h = string.gsub(node.data, ".", function(c)
          return string.format("%02x", string.byte(c))
        end)
        return t, "0x" .. h
      end
      if not v then
        return nil, err
      end
      return t, v
    end
  elseif node.class == "context" and EXCEPTIONS[node.tag] and node.data == "" then
    return EXCEPTIONS[node.tag], nil
  end
  return nil, ("unknown value type (%s %d)"):format(node.class, node.tag)
end

local function is(node, class, tag, constructed)
  return node and node.class == class and node.tag == tag and node.constructed == constructed
end

-- A GetResponse datagram decoded, or nil, why.
function snmp.decode_response(bytes)
  local msg, why = ber.decode_whole(bytes)
  if not msg then
    return nil, why
  end
  if not is(msg, "universal", ber.SEQUENCE, true) or #msg ~= 3 then
    return nil, "not an SNMP message"
  end
  local version, community, pdu = msg[1], msg[2], msg[3]
  if not is(version, "universal", ber.INTEGER, false) or (version.value ~= snmp.V1 and version.value ~= snmp.V2C) then
    return nil, "not an SNMPv1 or v2c message"
  end
  if not is(community, "universal", ber.OCTET_STRING, false) then
    return nil, "no community string"
  end
  if not is(pdu, "context", RESPONSE, true) then
    return nil, ("not a GetResponse (PDU %s %d)"):format(pdu.class, pdu.tag)
  end
  if #pdu ~= 4 or not is(pdu[4], "universal", ber.SEQUENCE, true) then
    return nil, "malformed GetResponse"
  end
  for i = 1, 3 do
    if not is(pdu[i], "universal", ber.INTEGER, false) then
      return nil, "malformed GetResponse header"
    end
  end
  local resp = {
    version = version.value,
    community = community.value,
    id = pdu[1].value,
    error_status = pdu[2].value,
    error_index = pdu[3].value,
    varbinds = {},
  }
  for i, vb in ipairs(pdu[4]) do
    if not is(vb, "universal", ber.SEQUENCE, true) or #vb ~= 2 or not is(vb[1], "universal", ber.OID, false) then
      return nil, "malformed varbind " .. i
    end
    local t, v = value_of(vb[2])
    if not t then
      return nil, "varbind " .. i .. ": " .. v
    end
    resp.varbinds[i] = { oid = vb[1].value, type = t, value = v }
  end
  return resp
end

-- Sends a GetRequest on datagram socket `sock` and returns the response
-- with the same request id. opts: version, id, tries (sends, default 2),
-- max_replies (datagrams read per send, default 4). Or nil, why.
function snmp.get(sock, community, oids, opts)
  opts = opts or {}
  local id = opts.id or 1
  local request = snmp.get_request(community, id, oids, opts.version)
  return datagram.exchange(sock, request, function(d)
    local resp, err = snmp.decode_response(d)
    if resp and resp.id ~= id then
      return nil, "a response to another request"
    end
    return resp, err
  end, { tries = opts.tries, max_replies = opts.max_replies or 4 })
end

return snmp
