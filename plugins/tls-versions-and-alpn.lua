-- tls-versions-and-alpn: which TLS versions (1.2, 1.3) the server accepts,
-- the cipher it picks with each, and the ALPN protocols it supports (by
-- offering a list and removing each protocol the server picks, as nmap's
-- tls-alpn does). moonscan's TLS speaks 1.2 and 1.3 only: older versions
-- are not tested.
local TLS_PORTS = { 443, 465, 636, 853, 993, 995, 4443, 8443, 9443 }
-- The protocols nmap's tls-alpn offers.
local ALPN = { "h2", "spdy/3", "spdy/2", "spdy/1", "http/1.1", "http/1.0", "http/0.9" }

return {
  id = "tls-versions-and-alpn",
  description = "Lists the TLS versions (1.2, 1.3) and ALPN protocols a TLS server supports.",
  categories = { "default", "discovery", "safe" },
  ports = TLS_PORTS,
  portrule = function(port)
    return port.tls == true or port.tunnel == "ssl"
  end,
  run = function(ctx)
    local versions, ciphers = {}, {}
    for _, v in ipairs({ "1.2", "1.3" }) do
      local sock = ctx:connect{ tls = { versions = { v }, alpn = {} } }
      if sock then
        local info = sock:tls()
        sock:close()
        versions[#versions + 1] = "TLSv" .. v
        ciphers["TLSv" .. v] = info and info.cipher or nil
      end
    end
    if #versions == 0 then
      return nil, "no TLS 1.2 or 1.3 handshake succeeded"
    end
    local offered = table.clone(ALPN)
    local alpn = {}
    for _ = 1, #ALPN do
      local sock = ctx:connect{ tls = { alpn = offered } }
      if not sock then
        break
      end
      local info = sock:tls()
      sock:close()
      local chosen = info and info.alpn
      if not chosen then
        break
      end
      alpn[#alpn + 1] = chosen
      local rest = {}
      for _, p in ipairs(offered) do
        if p ~= chosen then
          rest[#rest + 1] = p
        end
      end
      if #rest == #offered or #rest == 0 then
        break
      end
      offered = rest
    end
    if #versions == 1 and versions[1] == "TLSv1.2" then
      ctx:finding{ severity = "info", title = "TLS 1.3 not supported", data = { versions = versions } }
    end
    local said = "TLS " .. table.concat(versions, ", ") .. (#alpn > 0 and ("; ALPN " .. table.concat(alpn, ", ")) or "; no ALPN")
    return { versions = versions, ciphers = ciphers, alpn = alpn, tested = { "TLSv1.2", "TLSv1.3" } }, said
  end,
}
