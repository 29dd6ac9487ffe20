-- rules: one-line portrules, as nmap's shortport gives NSE scripts.
--
--   local rules = require "rules"
--   portrule = rules.port_or_service({ 21, 990 }, { "ftp", "ftps" }),
--   portrule = rules.tls,            -- any port that speaks TLS
--
-- A portrule gets the port table (number, protocol, service, tunnel, tls).

local rules = {}

-- The ports where TLS is usual from the first byte (HTTPS, SMTPS, NNTPS,
-- LDAPS, DNS over TLS, FTPS, TELNETS, IMAPS, IRCS, POP3S, SIPS, ...).
rules.TLS_PORTS = { 443, 465, 563, 636, 853, 989, 990, 992, 993, 994, 995, 4443, 5061, 8443, 9443 }

local function set(list)
  local s = {}
  for _, v in ipairs(list or {}) do
    s[v] = true
  end
  return s
end

-- A rule true on one of `ports` or of the detected `services` (names as
-- service detection gives them), for `protocol` ("tcp", the default).
function rules.port_or_service(ports, services, protocol)
  local p, s, proto = set(ports), set(services), protocol or "tcp"
  return function(port)
    if port.protocol ~= proto then
      return false
    end
    return p[port.number] == true or (port.service ~= nil and s[port.service] == true)
  end
end

-- True on a port whose service speaks TLS from the first byte (not one
-- that starts in the clear and upgrades with STARTTLS).
function rules.tls(port)
  return port.tunnel == "ssl" or (port.tls == true and port.tunnel ~= "starttls")
end

return rules
