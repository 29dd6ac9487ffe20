-- xmpp-test: unit tests of lib/xmpp.lua (an XMPP stream's opening read
-- tag by tag, as nmap's xmpp-info reads it) on fixed bytes, offline.
-- Run: moonscan plugins test libtests/xmpp_test.lua --plugin-dir plugins
local xmpp = require "xmpp"

-- A stream socket over fixed bytes: recv_until(">") and recv, as the host's.
local function stream(bytes)
  local pos = 1
  return {
    recv_until = function(_, pattern, max)
      assert(pattern == ">")
      local at = string.find(bytes, ">", pos, true)
      if at and at - pos + 1 <= max then
        local s = string.sub(bytes, pos, at)
        pos = at + 1
        return s
      end
      if #bytes - pos + 1 >= max then
        return nil, errors.new("protocol", "no match in the first " .. max .. " bytes") -- as sock:recv_until
      end
      return nil, "closed"
    end,
    recv = function(_, max)
      if pos > #bytes then
        return nil, "closed"
      end
      local s = string.sub(bytes, pos, pos + max - 1)
      pos += #s
      return s
    end,
  }
end

local HEAD = "<?xml version='1.0'?><stream:stream from='198.18.0.5' xmlns='jabber:client' version='1.0' "
  .. "xml:lang='en' xmlns:stream='http://etherx.jabber.org/streams' id='0b2a6c33-58a6-4a53-9d6d-0c2a8e5c1a7e'>"

return {
  id = "xmpp-test",
  description = "Unit tests of the xmpp library (stream features as nmap's xmpp-info reads them).",
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
    local function list(t)
      local out = {}
      for _, v in ipairs(t) do
        out[#out + 1] = type(v) == "table" and ("{text=" .. v.text .. "}") or v
      end
      return table.concat(out, "|")
    end

    eq(xmpp.stream_header("", "jabber:server"), "<?xml version='1.0'?><stream:stream "
      .. "xmlns:stream='http://etherx.jabber.org/streams' xmlns='jabber:server' xml:lang='ru-RU' to='' version='1.0'>",
      "header")

    -- Tags: start, end, empty, attributes (both quotes; empty values skipped), text before.
    local t = xmpp.parse_tag("<stream:stream from='a' id=\"b\" to=''>")
    eq(t.name, "stream:stream", "name")
    check(t.start and not t.finish, "start tag")
    eq(t.attrs.from, "a", "single quotes")
    eq(t.attrs.id, "b", "double quotes")
    eq(t.attrs.to, nil, "empty value")
    t = xmpp.parse_tag("PLAIN</mechanism>")
    check(not t.start and t.finish, "end tag")
    eq(t.contents, "PLAIN", "contents")
    t = xmpp.parse_tag("<required/>")
    check(t.start and t.finish, "empty tag")
    eq(xmpp.parse_tag("no tag here>"), nil, "no tag")
    eq(xmpp.parse_tag("<>"), nil, "no name")

    -- prosody, STARTTLS required (the lab's, asked for 198.18.0.5).
    local r = xmpp.read_features(stream(HEAD .. "<stream:features><starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'>"
      .. "<required/></starttls></stream:features>"), "198.18.0.5")
    eq(r.stream_id, "0b2a6c33-58a6-4a53-9d6d-0c2a8e5c1a7e", "stream id")
    eq(table.concat(r.xmpp.keys, ","), "lang,version", "xmpp keys")
    eq(r.xmpp.map.lang, "en", "lang")
    eq(r.xmpp.map["server name"], nil, "from is the name asked for")
    eq(list(r.features), "TLS (required)", "features")
    eq(#r.errors, 0, "no errors")

    -- prosody, a name it does not serve: the error, its text, the end, the close.
    r = xmpp.read_features(stream("<?xml version='1.0'?><stream:stream from='.' xmlns='jabber:client' version='1.0' "
      .. "xml:lang='en' xmlns:stream='http://etherx.jabber.org/streams' id='x'><stream:error><host-unknown "
      .. "xmlns='urn:ietf:params:xml:ns:xmpp-streams'/><text xmlns='urn:ietf:params:xml:ns:xmpp-streams'>This server "
      .. "does not serve .</text></stream:error></stream:stream>"), "")
    eq(list(r.errors), "host-unknown|{text=This server does not serve .}|stream:stream|(timeout)", "errors")
    eq(r.xmpp.map["server name"], ".", "server name")

    -- After TLS (ejabberd-like): mechanisms, compression, caps, XEPs, unknown.
    r = xmpp.read_features(stream("<?xml version='1.0'?><stream:stream xmlns='jabber:client' "
      .. "xmlns:stream='http://etherx.jabber.org/streams' xmlns:ack='http://www.xmpp.org/extensions/xep-0198.html#ns' "
      .. "id='1234567890' from='x.org' xml:lang='en'><stream:features>"
      .. "<c xmlns='http://jabber.org/protocol/caps' hash='sha-1' node='http://www.process-one.net/en/ejabberd/' ver='TQ2='/>"
      .. "<compression xmlns='http://jabber.org/features/compress'><method>zlib</method></compression>"
      .. "<mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><mechanism>SCRAM-SHA-1</mechanism>"
      .. "<mechanism>PLAIN</mechanism></mechanisms><register xmlns='http://jabber.org/features/iq-register'/>"
      .. "<sm xmlns='urn:xmpp:sm:3'/><auth xmlns='http://jabber.org/features/iq-auth'/><ver xmlns='urn:xmpp:features:rosterver'/>"
      .. "<limits xmlns='urn:xmpp:serverinfo'/></stream:features>"), "x.org")
    eq(list(r.xmpp.list), "Stream Management", "stream management")
    eq(r.xmpp.map.version, "(none)", "no version")
    eq(r.capabilities.map.node, "http://www.process-one.net/en/ejabberd/", "caps node")
    eq(r.capabilities.map.ver, "TQ2=", "caps ver")
    eq(list(r.compression_methods), "zlib", "compression")
    eq(list(r.auth_mechanisms), "SCRAM-SHA-1|PLAIN|Non-SASL", "mechanisms")
    eq(list(r.features), "In-Band Registration|Stream management v3|Roster Versioning", "features")
    eq(list(r.unknown), "limits", "unknown")
    eq(#r.errors, 0, "no errors")

    -- Garbage: a silent or closed server, 256 bytes without ">", a flood of tags.
    r = xmpp.read_features(stream(""), "")
    eq(list(r.errors), "(timeout)", "closed at once")
    r = xmpp.read_features(stream(string.rep("A", 300) .. "<x>"), "")
    eq(list(r.errors), "(timeout)", "no tag in 256 bytes")
    r = xmpp.read_features(stream(HEAD .. string.rep("<a/>", 2000)), "")
    eq(#r.errors, 0, "tag flood stops at the bound")
    r = xmpp.read_features(stream(HEAD .. "<stream:features/>"), "")
    eq(#r.features, 0, "empty features")

    -- factor: what a plain and a TLS stream share, and what each alone has.
    local function scan(lang, features, mechanisms)
      local t = { xmpp = xmpp.ordered(), capabilities = xmpp.ordered(), features = features,
        compression_methods = {}, auth_mechanisms = mechanisms, errors = {}, unknown = {} }
      xmpp.set(t.xmpp, "lang", lang)
      xmpp.set(t.xmpp, "version", "1.0")
      return t
    end
    local both, pre, post = xmpp.factor(scan("en", { "TLS (required)", "Server Dialback" }, {}),
      scan("de", { "Server Dialback" }, { "PLAIN", "SCRAM-SHA-1" }))
    eq(table.concat(both.keys, ","), "xmpp,capabilities,features", "both keys")
    eq(both.map.xmpp.map.version, "1.0", "both version")
    eq(list(both.map.features), "Server Dialback", "both features")
    eq(pre.map.xmpp.map.lang, "en", "pre lang")
    eq(post.map.xmpp.map.lang, "de", "post lang")
    eq(list(pre.map.features), "TLS (required)", "pre features")
    eq(table.concat(post.keys, ","), "xmpp,capabilities,auth_mechanisms", "post keys")

    -- render: nmap's format_table text, and plain data.
    local top = xmpp.ordered()
    table.insert(top.list, "Respects server name")
    xmpp.set(top, "pre_tls", pre)
    xmpp.set(top, "errors", { "host-unknown", { text = "no" } })
    local text, data = xmpp.render(top, "  ")
    eq(text, "\n  Respects server name\n  pre_tls: \n    xmpp: \n      lang: en\n    capabilities: "
      .. "\n    features: \n      TLS (required)\n  errors: \n    host-unknown\n    \n      text: no", "render text")
    eq(data[1], "Respects server name", "render list item")
    eq(data.pre_tls.xmpp.lang, "en", "render nested")
    eq(next(data.pre_tls.capabilities), nil, "render empty table")
    eq(data.errors[2].text, "no", "render record")

    return "ok " .. n
  end,
}
