-- tls-alpn: the application protocols a TLS server accepts through ALPN,
-- as nmap's tls-alpn finds them: offer a list of protocols, note the one
-- the server picks, take it off the list and ask again, until the server
-- picks none (or the handshake fails). The result is the list of the
-- protocols picked, in the order they were picked (nginx without HTTP/2:
-- http/1.1, http/1.0, http/0.9).
--
-- Only TLS from the first byte: ALPN cannot be offered through a STARTTLS
-- exchange here.

local MAX_ROUNDS = 15
local rules = require "rules"
local TLS_PORTS = rules.TLS_PORTS

-- The protocols nmap's tls-alpn offers, in its order.
local PROTOCOLS = {
  "http/0.9", "http/1.0", "http/1.1", "spdy/1", "spdy/2", "spdy/3",
  "stun.turn", "stun.nat-discovery", "h2", "h2c", "webrtc", "c-webrtc",
  "ftp", "imap", "pop3", "managesieve", "coap", "xmpp-client", "xmpp-server",
  "acme-tls/1", "mqtt", "dot", "ntske/1", "sunrpc", "h3", "smb", "irc",
  "nntp", "nnsp", "doq", "grpc-exp",
}

return {
  id = "tls-alpn",
  description = "Lists the ALPN protocols a TLS server accepts, in the order it picks them, as nmap's tls-alpn does.",
  categories = { "default", "discovery", "safe" },
  ports = TLS_PORTS,
  portrule = rules.tls,
  run = function(ctx)
    if ctx.tunnel == "starttls" then
      return nil, "TLS comes through STARTTLS here; ALPN is not offered that way"
    end
    local offered = table.clone(PROTOCOLS)
    local chosen = {}
    local why = "the server picked none of the protocols offered"
    -- nmap asks until the list is empty; a run has 16 sockets at most, so
    -- at most MAX_ROUNDS handshakes here (no real server picks that many).
    for _ = 1, MAX_ROUNDS do
      if #offered == 0 then
        break
      end
      local sock, err = ctx:connect{ tls = { alpn = offered } }
      if not sock then
        why = "handshake failed with " .. #offered .. " protocols offered: " .. tostring(err)
        break
      end
      local info = sock:tls()
      sock:close()
      local picked = info and info.alpn
      if not picked or picked == "" then
        break
      end
      local at = table.find(offered, picked)
      if not table.find(chosen, picked) then
        chosen[#chosen + 1] = picked
      end
      if not at then
        why = "the server picked " .. picked .. ", which was not offered"
        break
      end
      table.remove(offered, at)
    end
    if #chosen == 0 then
      return nil, why
    end
    return chosen
  end,
}
