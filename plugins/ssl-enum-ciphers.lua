-- ssl-enum-ciphers: every protocol version (SSLv2 detected, SSLv3 to TLS 1.3)
-- and cipher suite the server accepts, in its order of preference, with the
-- key exchange of each and a grade, laid out as nmap's script of the same
-- name; then findings for weak configurations. Uses ClientHellos and
-- ServerHellos only (ctx:tls_enum), through STARTTLS where the service
-- found its certificate that way. The grades, nmap's layout and what is
-- weak are lib/ciphers.lua's.
local ciphers = require "ciphers"
local rules = require "rules"
local TLS_PORTS = rules.TLS_PORTS

return {
  id = "ssl-enum-ciphers",
  description = "Enumerates the SSL/TLS versions and cipher suites a server accepts, in its order of preference, grades each, and reports weak configurations.",
  categories = { "discovery", "intrusive" },
  args = { "ssl-enum-ciphers.hostname", "tls.servername" },
  ports = TLS_PORTS,
  portrule = function(port)
    return port.tls == true or port.tunnel == "ssl" or port.tunnel == "starttls"
  end,
  run = function(ctx)
    local starttls = ctx.tls and ctx.tls.starttls or nil
    local found, err = ctx:tls_enum{ starttls = starttls }
    if not found then
      return nil, err
    end
    local first = found.tls or ctx.tls
    local summary = ciphers.summary(found, first and first.chain and first.chain[1])
    local out, least, names, weak = summary.out, summary.least, summary.names, summary.weak
    if found.sslv2 then
      out["SSLv2"] = { ciphers = {}, ["cipher preference"] = "indeterminate", warnings = { "SSLv2 supported" } }
      least = "F"
    end
    if #names == 0 and not found.sslv2 then
      return nil, "the server accepted no SSL/TLS ClientHello"
    end
    out["least strength"] = least or "F"

    -- Weak configurations.
    local function finding(severity, title, data)
      ctx:finding{ severity = severity, title = title, data = data }
    end
    if found.sslv2 then finding("high", "SSLv2 is enabled", {}) end
    for _, n in ipairs(names) do
      if n == "SSLv3" then finding("high", "SSLv3 is enabled", {}) end
      if n == "TLSv1.0" or n == "TLSv1.1" then finding("medium", n .. " is enabled", {}) end
    end
    local kinds = {
      { "null", "high", "NULL (unencrypted) cipher suites accepted" },
      { "anon", "high", "Anonymous (unauthenticated) cipher suites accepted" },
      { "export", "high", "Export-grade cipher suites accepted" },
      { "rc4", "medium", "RC4 cipher suites accepted" },
      { "des", "high", "DES cipher suites accepted" },
      { "tripledes", "medium", "3DES cipher suites accepted (SWEET32)" },
      { "small_kx", "medium", "Key exchange under 2048 bits (DH or RSA)" },
    }
    for _, k in ipairs(kinds) do
      if #weak[k[1]] > 0 then
        finding(k[2], k[3], { suites = weak[k[1]] })
      end
    end
    if summary.cbc_only_tls10 then
      local cbc = {}
      for _, v in ipairs(found.versions) do
        for _, s in ipairs(v.suites) do
          if s.mode == "cbc" then cbc[#cbc + 1] = v.name .. " " .. s.name end
        end
      end
      if #cbc > 0 then
        finding("medium", "CBC cipher suites with TLS 1.0 or older only (BEAST)", { suites = cbc })
      end
    end
    if #names > 0 and not summary.fs then
      finding("medium", "No forward secrecy: no ECDHE or DHE key exchange accepted", {})
    end
    if #names > 0 and not summary.modern then
      finding("medium", "Neither TLS 1.2 nor TLS 1.3 is accepted", { versions = names })
    end

    -- The certificate the hellos carried (or the one service detection read),
    -- and the name the scan knows for the host (script-arg
    -- ssl-enum-ciphers.hostname, or nmap's tls.servername).
    local tls = found.tls or ctx.tls
    local name = ctx.args["ssl-enum-ciphers.hostname"] or ctx.args["tls.servername"]
    for _, f in ipairs(ciphers.certificate_findings(tls and tls.chain or {}, name)) do
      finding(f[1], f[2], f[3])
    end
    -- The script result: nmap's table and text (the findings above are moonscan's own).
    return out, ciphers.text(out)
  end,
}
