-- ssl-cert: the server's whole certificate chain, and what is wrong with it.
-- Uses the chain service detection kept (ctx.tls); without -sV it does its
-- own TLS handshake on the usual TLS ports.
local TLS_PORTS = { 443, 465, 563, 636, 853, 989, 990, 992, 993, 994, 995, 4443, 5061, 8443, 9443 }

local function now_rfc3339(offset_days)
  return os.date("!%Y-%m-%dT%H:%M:%SZ", os.time() + (offset_days or 0) * 86400)
end

local function summary(c)
  return {
    subject = c.subject,
    issuer = c.issuer,
    san = c.san,
    not_before = c.not_before,
    not_after = c.not_after,
    serial = c.serial,
    key_type = c.key_type,
    key_bits = c.key_bits,
    curve = c.curve,
    signature_algorithm = c.signature_algorithm,
    sha256 = c.sha256,
    self_signed = c.self_signed,
  }
end

return {
  id = "ssl-cert",
  description = "Reports the TLS certificate chain: subject, issuer, SANs, validity, key; flags expired, expiring, self-signed and weak certificates.",
  categories = { "default", "discovery", "safe" },
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
    local chain = {}
    for i, c in ipairs(tls.chain) do
      if i > 1 then
        chain[#chain + 1] = { subject = c.subject, issuer = c.issuer, not_after = c.not_after, sha256 = c.sha256 }
      end
    end
    local data = summary(leaf)
    data.chain_length = #tls.chain
    data.chain = chain
    ctx:finding{ severity = "info", title = "Subject: " .. leaf.subject, data = data }

    local now = now_rfc3339(0)
    if leaf.not_after < now then
      ctx:finding{ severity = "high", title = "Certificate expired on " .. leaf.not_after, data = { not_after = leaf.not_after } }
    elseif leaf.not_after < now_rfc3339(30) then
      ctx:finding{ severity = "medium", title = "Certificate expires within 30 days, on " .. leaf.not_after, data = { not_after = leaf.not_after } }
    end
    if leaf.not_before > now then
      ctx:finding{ severity = "medium", title = "Certificate not valid before " .. leaf.not_before, data = { not_before = leaf.not_before } }
    end
    if leaf.self_signed then
      ctx:finding{ severity = "low", title = "Self-signed certificate", data = { subject = leaf.subject } }
    end
    if (leaf.key_type == "rsa" or leaf.key_type == "dsa") and leaf.key_bits > 0 and leaf.key_bits < 2048 then
      ctx:finding{ severity = "medium", title = "Weak " .. leaf.key_type .. " key of " .. leaf.key_bits .. " bits", data = { key_bits = leaf.key_bits } }
    end
    local sig = string.lower(leaf.signature_algorithm or "")
    if sig:find("md5", 1, true) or sig:find("sha1", 1, true) then
      ctx:finding{ severity = "medium", title = "Weak signature algorithm " .. leaf.signature_algorithm, data = { signature_algorithm = leaf.signature_algorithm } }
    end
  end,
}
