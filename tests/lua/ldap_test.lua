-- ldap-test: unit tests of lib/ldap.lua on messages captured from the lab's
-- slapd (nmap's ldap-rootdse exchange), offline.
local ldap = require "ldap"
local ber = require "ber"

local function unhex(h)
  return (string.gsub(h, "%s", ""):gsub("%x%x", function(x)
    return string.char(tonumber(x, 16))
  end))
end

local function hex(s)
  return (string.gsub(s, ".", function(c)
    return string.format("%02x", string.byte(c))
  end))
end

-- nmap's first search (no attributes), and slapd's answer.
local REQ1 = "3025020101632004000a01000a0100020100020100010100870b6f626a656374636c6173733000"
local ENTRY1 = "3030020101642b040030273025040b6f626a656374436c61737331160403746f70040f4f70656e4c444150726f6f74445345"
local DONE1 = "300c02010165070a010004000400"
-- The root DSE's namingContexts and supportedLDAPVersion, as slapd sent them (message 2).
local ENTRY2 = "305602010264510400304d302e040e6e616d696e67436f6e7465787473311c041a64633d6c61622c64633d6d"
  .. "6f6f6e7363616e2c64633d74657374301b0414737570706f727465644c44415056657273696f6e3103040133"
local DONE2 = "300c02010265070a010004000400"
-- A searchResDone with resultCode 32 (noSuchObject) and a message.
local DONE_ERR = ber.sequence{ ber.integer(1), ber.application(5, ber.enumerated(32) .. ber.octets("dc=x") .. ber.octets("no such object"), true) }
-- The Notice of Disconnection (RFC 4511 section 4.4.1).
local NOTICE = ber.sequence{ ber.integer(0), ber.application(24, ber.enumerated(52) .. ber.octets("") .. ber.octets("going away")
  .. ber.octets("1.3.6.1.4.1.1466.20036", 0x8a), true) }

-- A stream socket over fixed bytes: records what is sent.
local function fake_sock(bytes)
  local pos = 1
  local s = { sent = {} }
  function s.send(_, data)
    s.sent[#s.sent + 1] = data
    return true
  end
  function s.recv_exact(_, n)
    if pos + n - 1 > #bytes then
      pos = #bytes + 1
      return nil, "closed"
    end
    local out = string.sub(bytes, pos, pos + n - 1)
    pos += n
    return out
  end
  return s
end

local ATTRS = { "_domainControllerFunctionality", "configurationNamingContext", "currentTime", "defaultNamingContext",
  "dnsHostName", "domainFunctionality", "dsServiceName", "forestFunctionality", "highestCommittedUSN",
  "isGlobalCatalogReady", "isSynchronized", "ldap-get-baseobject", "ldapServiceName", "namingContexts",
  "rootDomainNamingContext", "schemaNamingContext", "serverName", "subschemaSubentry",
  "supportedCapabilities", "supportedControl", "supportedLDAPPolicies", "supportedLDAPVersion",
  "supportedSASLMechanisms", "altServer", "supportedExtension" }

return {
  id = "ldap-test",
  description = "Unit tests of the ldap library (searchRequest, searchResEntry, searchResDone on ber).",
  categories = { "safe" },
  ports = { 1 },
  run = function(ctx)
    local n = 0
    local function check(cond, what)
      n += 1
      if not cond then
        error("check " .. n .. " failed: " .. tostring(what), 2)
      end
    end
    local function eq(got, want, what)
      check(got == want, (what or "") .. ": got " .. tostring(got) .. ", want " .. tostring(want))
    end

    -- The requests nmap sends, byte for byte.
    eq(hex(ldap.search_request(1, { present = "objectclass" })), REQ1, "first search")
    local req2 = ldap.search_request(2, { present = "objectclass", attributes = ATTRS })
    eq(#req2, 542, "second search length")
    eq(hex(string.sub(req2, 1, 12)), "3082021a0201026382021304", "second search head")
    local d = ber.decode(ldap.search_request(7, { base = "dc=x", scope = ldap.SCOPE.sub }))
    eq(d[1].value, 7, "message id")
    eq(d[2].tag, 3, "searchRequest")
    eq(d[2][1].value, "dc=x", "base")
    eq(d[2][2].value, 2, "scope")
    eq(d[2][7].class, "context", "filter class")
    eq(d[2][7].tag, 7, "present filter")
    eq(d[2][7].data, "objectClass", "filter attribute")

    -- Messages decoded.
    local m = ldap.decode_message(unhex(ENTRY1))
    eq(m.id, 1, "entry id")
    eq(m.op, 4, "searchResEntry")
    local e, err = ldap.parse_entry(m.node)
    check(e, err)
    eq(e.dn, "", "root dn")
    eq(e.attributes[1].type, "objectClass", "attribute type")
    eq(#e.attributes[1].values, 2, "two values")
    eq(e.attributes[1].values[2], "OpenLDAProotDSE", "value")
    local done = ldap.parse_result(ldap.decode_message(unhex(DONE1)).node)
    eq(done.code, 0, "success")
    eq(done.message, "", "no message")

    -- A whole search over a stream.
    local sock = fake_sock(unhex(ENTRY1 .. DONE1))
    local entries, res = ldap.search(sock, 1, { present = "objectclass" })
    check(entries, res)
    eq(hex(sock.sent[1]), REQ1, "sent the request")
    eq(#entries, 1, "one entry")
    eq(res.code, 0, "done")
    eq(ldap.values(entries, "namingcontexts"), nil, "no namingContexts")
    eq(ldap.values(entries, "OBJECTCLASS")[1], "top", "values, any case")
    sock = fake_sock(unhex(ENTRY2 .. DONE2))
    entries, res = ldap.search(sock, 2, { attributes = ATTRS })
    check(entries, res)
    eq(ldap.values(entries, "namingContexts")[1], "dc=lab,dc=moonscan,dc=test", "namingContexts")
    eq(ldap.values(entries, "supportedLDAPVersion")[1], "3", "version")
    -- Other message ids and references are skipped.
    local ref = ber.sequence{ ber.integer(1), ber.application(19, ber.octets("ldap://x/"), true) }
    local other = string.gsub(unhex(ENTRY2), "^(....)\2", "%1\9")
    sock = fake_sock(other .. ref .. unhex(ENTRY1 .. DONE1))
    entries, res = ldap.search(sock, 1, {})
    check(entries, res)
    eq(#entries, 1, "skipped id 2 and the reference")
    -- An error result comes back as the done, with the entries so far.
    sock = fake_sock(unhex(ENTRY1) .. DONE_ERR)
    entries, res = ldap.search(sock, 1, {})
    check(entries, res)
    eq(#entries, 1, "entries before the error")
    eq(res.code, 32, "error code")
    eq(res.message, "no such object", "error message")

    -- Failures: nil, why; never an error.
    local function fails(bytes, opts, what)
      local ok, got, why = pcall(ldap.search, fake_sock(bytes), 1, opts or {})
      check(ok, what .. ": raised " .. tostring(got))
      check(got == nil and type(why) == "string", what .. ": accepted")
      return why
    end
    local why = fails(NOTICE, nil, "notice of disconnection")
    check(string.find(why, "going away", 1, true), why)
    fails(unhex(ENTRY1), nil, "no searchResDone")
    fails("", nil, "nothing")
    fails("HTTP/1.0 400 Bad Request\r\n\r\n", nil, "not LDAP")
    why = fails(unhex(ENTRY1 .. DONE1), { max_message = 20 }, "message over the limit")
    check(string.find(why, "limit", 1, true), why)
    fails("\48\132\127\255\255\255", nil, "huge length")
    fails(unhex(ENTRY1 .. ENTRY1 .. ENTRY1 .. DONE1), { max_entries = 2 }, "too many entries")
    local forever = string.rep(ref, 2000)
    fails(forever, { max_entries = 10 }, "endless references")
    local full = unhex(ENTRY2 .. DONE2)
    for i = 0, #full - 1 do
      local ok, got = pcall(ldap.search, fake_sock(string.sub(full, 1, i)), 2, {})
      check(ok and got == nil, "truncated to " .. i)
    end
    math.randomseed(11)
    for _ = 1, 300 do
      local b = { string.byte(full, 1, -1) }
      for _ = 1, 3 do
        b[math.random(1, #b)] = math.random(0, 255)
      end
      local ok, got = pcall(ldap.search, fake_sock(string.char(table.unpack(b))), 2, {})
      check(ok, "mutated reply raised " .. tostring(got))
    end
    -- Malformed operations.
    local bad_entry = ber.sequence{ ber.integer(1), ber.application(4, ber.octets("") .. ber.octets("x"), true) }
    fails(bad_entry .. unhex(DONE1), nil, "attributes not a sequence")
    local bad_value = ber.sequence{ ber.integer(1), ber.application(4, ber.octets("")
      .. ber.sequence{ ber.sequence{ ber.octets("cn"), ber.set{ ber.integer(1) } } }, true) }
    fails(bad_value .. unhex(DONE1), nil, "value not a string")
    local bad_done = ber.sequence{ ber.integer(1), ber.application(5, ber.enumerated(0), true) }
    fails(bad_done, nil, "short LDAPResult")
    fails(ber.sequence{ ber.integer(1), ber.application(1, "", true) }, nil, "a bindResponse")

    return "ok " .. n
  end,
}
