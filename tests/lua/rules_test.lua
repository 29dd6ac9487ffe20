-- rules_test: unit tests of lib/rules.lua, run offline with
-- `moonscan plugins test tests/lua/rules_test.lua --plugin-dir plugins`.

local rules = require "rules"

local passed = 0
local function check(cond, what)
  assert(cond, what)
  passed += 1
end

local function port(t)
  t.protocol = t.protocol or "tcp"
  t.tls = t.tls or false
  return t
end

return {
  id = "rules-test",
  description = "Unit tests of the rules library.",
  categories = { "safe" },
  ports = { 80 },
  run = function()
    local ftp = rules.port_or_service({ 21, 990 }, { "ftp", "ftps" })
    check(ftp(port({ number = 21 })), "a listed port")
    check(ftp(port({ number = 2121, service = "ftp" })), "a listed service")
    check(not ftp(port({ number = 22, service = "ssh" })), "neither")
    check(not ftp(port({ number = 21, protocol = "udp" })), "TCP by default")
    local dns = rules.port_or_service({ 53 }, { "domain" }, "udp")
    check(dns(port({ number = 53, protocol = "udp" })), "UDP when asked")
    check(not dns(port({ number = 53 })), "not TCP when UDP is asked")
    check(not rules.port_or_service()(port({ number = 1 })), "no ports, no services: never")
    check(rules.tls(port({ number = 8443, tunnel = "ssl" })), "an ssl tunnel")
    check(rules.tls(port({ number = 443, tls = true })), "a TLS handshake seen")
    check(not rules.tls(port({ number = 25, tls = true, tunnel = "starttls" })), "STARTTLS is not TLS from the first byte")
    check(not rules.tls(port({ number = 80 })), "plain")
    local sorted = true
    for i = 2, #rules.TLS_PORTS do
      sorted = sorted and rules.TLS_PORTS[i - 1] < rules.TLS_PORTS[i]
    end
    check(sorted and #rules.TLS_PORTS > 10, "TLS_PORTS is a sorted list")
    return "ok " .. passed
  end,
}
