-- ssl-cert: the server's certificate as nmap's ssl-cert shows it (its table
-- and text), and findings for what is wrong with it.
-- Uses the chain service detection kept (ctx.tls); without -sV it does its
-- own TLS handshake on the usual TLS ports.
local rules = require "rules"
local TLS_PORTS = rules.TLS_PORTS

local function now_rfc3339(offset_days)
  return os.date("!%Y-%m-%dT%H:%M:%SZ", os.time() + (offset_days or 0) * 86400)
end

-- nmap's name line: the usual attributes, in nmap's order, as k=v/k=v.
local function name_line(fields)
  local parts = {}
  for _, k in ipairs({ "commonName", "organizationName", "stateOrProvinceName", "countryName" }) do
    if fields[k] then
      parts[#parts + 1] = k .. "=" .. fields[k]
    end
  end
  return table.concat(parts, "/")
end

-- A certificate date as nmap writes it: no zone.
local function nmap_date(d)
  return (d or ""):gsub("Z$", "")
end

-- nmap's ssl-cert table and text for the leaf; the text grows with the
-- verbosity as nmap's (a plugin named in --script gets one more level).
local function nmap_result(leaf, verbosity)
  local result = {
    subject = leaf.subject_fields,
    issuer = leaf.issuer_fields,
    pubkey = leaf.pubkey,
    sig_algo = leaf.sig_algo,
    validity = { notBefore = nmap_date(leaf.not_before), notAfter = nmap_date(leaf.not_after) },
    md5 = leaf.md5,
    sha1 = leaf.sha1,
    pem = leaf.pem,
  }
  if leaf.extensions and #leaf.extensions > 0 then
    result.extensions = leaf.extensions
  end
  local lines = { "Subject: " .. name_line(leaf.subject_fields or {}) }
  for _, e in ipairs(leaf.extensions or {}) do
    if e.name == "X509v3 Subject Alternative Name" then
      lines[#lines + 1] = "Subject Alternative Name: " .. e.value
    end
  end
  if verbosity > 0 then
    lines[#lines + 1] = "Issuer: " .. name_line(leaf.issuer_fields or {})
    lines[#lines + 1] = "Public Key type: " .. tostring(leaf.pubkey and leaf.pubkey.type)
    lines[#lines + 1] = "Public Key bits: " .. tostring(leaf.pubkey and leaf.pubkey.bits)
    lines[#lines + 1] = "Signature Algorithm: " .. tostring(leaf.sig_algo)
  end
  lines[#lines + 1] = "Not valid before: " .. result.validity.notBefore
  lines[#lines + 1] = "Not valid after:  " .. result.validity.notAfter
  if verbosity > 0 then
    lines[#lines + 1] = "MD5:   " .. tostring(leaf.md5)
    lines[#lines + 1] = "SHA-1: " .. tostring(leaf.sha1)
  end
  if verbosity > 1 then
    lines[#lines + 1] = leaf.pem
  end
  return result, table.concat(lines, "\n")
end

return {
  id = "ssl-cert",
  description = "Reports the TLS certificate chain: subject, issuer, SANs, validity, key; flags expired, expiring, self-signed and weak certificates.",
  categories = { "default", "discovery", "safe" },
  references = { "https://www.rfc-editor.org/rfc/rfc5280" },
  remediation = "Serve a certificate from a trusted CA, valid now, with an RSA key of 2048 bits or more (or ECDSA) and a SHA-256 or stronger signature.",
  tags = { "tls", "x509" },
  ports = TLS_PORTS,
  portrule = function(port)
    return port.tls == true or port.tunnel == "ssl"
  end,
  run = function(ctx)
    local tls = ctx.tls
    if not tls then
      local sock, err = ctx:connect{ tls = true }
      if not sock then
        return nil, err
      end
      tls = sock:tls()
      sock:close()
    end
    if not tls or not tls.chain or #tls.chain == 0 then
      return nil, "no certificate"
    end
    local leaf = tls.chain[1]
    if leaf.error then
      ctx:finding{ severity = "medium", title = "Certificate cannot be parsed", data = { error = leaf.error, sha256 = leaf.sha256 } }
      return
    end
    local now = now_rfc3339(0)
    if leaf.not_after < now then
      ctx:finding{ severity = "high", title = "Certificate expired on " .. leaf.not_after, data = { not_after = leaf.not_after }, cwe = { "CWE-298" } }
    elseif leaf.not_after < now_rfc3339(30) then
      ctx:finding{ severity = "medium", title = "Certificate expires within 30 days, on " .. leaf.not_after, data = { not_after = leaf.not_after } }
    end
    if leaf.not_before > now then
      ctx:finding{ severity = "medium", title = "Certificate not valid before " .. leaf.not_before, data = { not_before = leaf.not_before } }
    end
    if leaf.self_signed then
      ctx:finding{ severity = "low", title = "Self-signed certificate", data = { subject = leaf.subject }, cwe = { "CWE-295" } }
    end
    if (leaf.key_type == "rsa" or leaf.key_type == "dsa") and leaf.key_bits > 0 and leaf.key_bits < 2048 then
      ctx:finding{ severity = "medium", title = "Weak " .. leaf.key_type .. " key of " .. leaf.key_bits .. " bits", data = { key_bits = leaf.key_bits }, cwe = { "CWE-326" } }
    end
    local sig = string.lower(leaf.signature_algorithm or "")
    if sig:find("md5", 1, true) or sig:find("sha1", 1, true) then
      ctx:finding{ severity = "medium", title = "Weak signature algorithm " .. leaf.signature_algorithm, data = { signature_algorithm = leaf.signature_algorithm }, cwe = { "CWE-327" } }
    end
    return nmap_result(leaf, ctx.verbosity or 0)
  end,
}
