-- xmpp-info: what an XMPP server announces before login (stream
-- attributes, TLS, SASL mechanisms, compression, XEP features, entity
-- capabilities, stream errors), as nmap's xmpp-info shows it.
--
-- Opens three streams as nmap does (lib xmpp reads each): one to a wrong
-- name (".", script arg xmpp-info.alt_server_name), one to the server's
-- name (script arg xmpp-info.server_name; else "": nmap takes the
-- target's name, "" for an address scanned with -n, and a plugin is not
-- told the name the target was given by), and one after
-- STARTTLS (unless xmpp-info.no_starttls). Different error counts on the
-- first two mean "Respects server name", none on both "Ignores server
-- name". With TLS, the plain and TLS results are split as nmap splits them:
-- info (the same in both), pre_tls and post_tls; without, info is the
-- plain result and "STARTTLS Failed" is said.
-- Limits: sock:starttls names the address in its own stream header, so
-- STARTTLS is tried only when the plain stream offered it, and a server
-- that wants one name across the restart refuses a different one after it.
-- nmap lists the "info" of a failed STARTTLS in Lua's hash order (it
-- changes from run to run); here it is in the order of nmap's scan table.

local xmpp = require "xmpp"

local TIMEOUT = 3000

-- One stream: nmap's scan table, or nil, why (no connection, no STARTTLS).
local function scan(ctx, server_name, xmlns, tls)
  local sock, err = ctx:connect{ timeout = TIMEOUT }
  if not sock then
    return nil, "connect: " .. tostring(err)
  end
  if tls then
    local ok, terr = sock:starttls(xmlns == "jabber:client" and "xmpp" or "xmpp-server")
    if not ok then
      sock:close()
      return nil, tostring(terr)
    end
  end
  local ok, serr = sock:send(xmpp.stream_header(server_name, xmlns))
  local r = ok and xmpp.read_features(sock, server_name)
  sock:close()
  return r or nil, serr
end

return {
  id = "xmpp-info",
  description = "Reads an XMPP server's stream features (TLS, SASL mechanisms, compression, XEPs, capabilities) before and after STARTTLS, as nmap's xmpp-info does.",
  categories = { "default", "safe", "discovery", "version" },
  args = { "xmpp-info.server_name", "xmpp-info.alt_server_name", "xmpp-info.no_starttls" },
  ports = { 5222, 5269 },
  services = { "jabber", "xmpp-client", "xmpp-server" },
  run = function(ctx)
    local name = ctx.args["xmpp-info.server_name"] or ""
    local xmlns = ctx.service == "xmpp-client" and "jabber:client" or "jabber:server"
    local alt, err = scan(ctx, ctx.args["xmpp-info.alt_server_name"] or ".", xmlns)
    local plain, perr = scan(ctx, name, xmlns)
    if not alt or not plain then
      return nil, tostring(err or perr)
    end
    local tls
    if not ctx.args["xmpp-info.no_starttls"] then
      -- nmap's STARTTLS names the server; the host's names the address.
      local offered = plain.features[#plain.features] or ""
      tls = string.find(offered, "^TLS") and scan(ctx, name, xmlns, true) or false
    end

    local r = xmpp.ordered()
    if #alt.errors == 0 and #plain.errors == 0 then
      table.insert(r.list, "Ignores server name")
    elseif #alt.errors ~= #plain.errors then
      table.insert(r.list, "Respects server name")
    end
    if not tls then
      if tls == false then
        table.insert(r.list, "STARTTLS Failed")
      end
      local info = xmpp.ordered()
      xmpp.set(info, "stream_id", plain.stream_id)
      for _, k in ipairs({ "xmpp", "features", "capabilities", "compression_methods", "auth_mechanisms", "errors", "unknown" }) do
        xmpp.set(info, k, plain[k])
      end
      xmpp.set(r, "info", info)
    else
      local i, p, t = xmpp.factor(plain, tls)
      xmpp.set(r, "info", i)
      xmpp.set(r, "pre_tls", p)
      xmpp.set(r, "post_tls", t)
    end
    local text, data = xmpp.render(r, "  ")
    return data, text
  end,
}
