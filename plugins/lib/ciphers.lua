-- ciphers: what ssl-enum-ciphers makes of ctx:tls_enum's result, as nmap's
-- script of that name: each suite's grade and key exchange, the versions'
-- table and text in nmap's layout, and the weak configurations found.
--
--   local ciphers = require "ciphers"
--   local found = ctx:tls_enum{}
--   local s = ciphers.summary(found, cert)   -- s.out: nmap's table
--   ciphers.text(s.out)                      -- nmap's text of it
--
-- Grades (nmap's scale, A best to F): a suite scores on its key exchange
-- (RSA-equivalent bits: <512 20, <1024 40, <2048 80, <4096 90, else 100;
-- anonymous 0) and its cipher (0 bits 0, <128 20, <256 80, else 100), 43%
-- and 57%; 80 and up is A, 65 B, 50 C, 35 D, 20 E, below F. NULL,
-- anonymous and export suites are F; RC4, DES and 3DES at most C. The
-- least strength is the worst grade of any suite.

local ciphers = {}

-- Elliptic-curve bits to RSA-equivalent bits (NIST SP 800-57); nil when
-- the size is unknown (explicit curves, groups moonscan does not know).
function ciphers.rsa_equivalent(suite)
  local bits = suite.kx_bits or 0
  if bits == 0 then
    return nil
  end
  if suite.group and not suite.group:find("^ffdhe") then
    if bits >= 512 then return 15360 end
    if bits >= 384 then return 7680 end
    if bits >= 253 then return 3072 end
    if bits >= 224 then return 2048 end
    if bits >= 160 then return 1024 end
    return 512
  end
  return bits
end

-- A suite's grade, "A" to "F".
function ciphers.grade(suite)
  if suite.enc == "null" or suite.au == "null" or suite.export then
    return "F"
  end
  local kex = ciphers.rsa_equivalent(suite)
  local kx_score
  if kex == nil then kx_score = 80 -- unknown size: neither credited nor blamed
  elseif kex == 0 then kx_score = 0
  elseif kex < 512 then kx_score = 20
  elseif kex < 1024 then kx_score = 40
  elseif kex < 2048 then kx_score = 80
  elseif kex < 4096 then kx_score = 90
  else kx_score = 100 end
  local bits = suite.enc_bits or 0
  if suite.enc == "tripledes" then bits = 112 end
  local enc_score
  if bits == 0 then enc_score = 0
  elseif bits < 128 then enc_score = 20
  elseif bits < 256 then enc_score = 80
  else enc_score = 100 end
  local score = 0.43 * kx_score + 0.57 * enc_score
  local letter
  if score >= 80 then letter = "A"
  elseif score >= 65 then letter = "B"
  elseif score >= 50 then letter = "C"
  elseif score >= 35 then letter = "D"
  elseif score >= 20 then letter = "E"
  else letter = "F" end
  local weak = suite.enc == "rc4" or suite.enc == "des" or suite.enc == "tripledes" or suite.enc == "rc2"
  if weak and letter < "C" then
    letter = "C"
  end
  return letter
end

-- nmap's names of the groups whose IANA names differ (tls.lua's ELLIPTIC_CURVES).
local NMAP_GROUPS = { x25519 = "ecdh_x25519", x448 = "ecdh_x448" }

-- nmap's kex_info: "secp256r1", "ecdh_x25519", "dh 1024", "rsa 2048".
function ciphers.kex_info(suite)
  if suite.group then
    return NMAP_GROUPS[suite.group] or suite.group
  end
  if suite.kx == "dhe" or suite.kx == "dh" then
    return "dh " .. (suite.kx_bits or 0)
  end
  if suite.kx == "rsa" then
    return "rsa " .. (suite.kx_bits or 0)
  end
  return suite.kx or "unknown"
end

-- The result as nmap prints it: one line per suite, `NAME (kex_info) - GRADE`.
ciphers.VERSION_ORDER = { "SSLv2", "SSLv3", "TLSv1.0", "TLSv1.1", "TLSv1.2", "TLSv1.3" }
function ciphers.text(out)
  local lines = { "" }
  local function add(indent, text)
    lines[#lines + 1] = string.rep("  ", indent) .. text
  end
  -- A titled list of a version's table (nothing when it has none).
  local function add_list(title, list)
    if list then
      add(2, title)
      for _, item in ipairs(list) do
        add(3, item)
      end
    end
  end
  for _, name in ipairs(ciphers.VERSION_ORDER) do
    local v = out[name]
    if v then
      add(1, name .. ": ")
      add(2, "ciphers: ")
      for _, c in ipairs(v.ciphers or {}) do
        add(3, c.name .. " (" .. c.kex_info .. ") - " .. c.strength)
      end
      add_list("compressors: ", v.compressors)
      add(2, "cipher preference: " .. tostring(v["cipher preference"]))
      add_list("warnings: ", v.warnings)
    end
  end
  add(1, "least strength: " .. out["least strength"])
  return table.concat(lines, "\n")
end

-- The worse of two grades (nil: none yet).
function ciphers.worse(a, b)
  if a == nil then return b end
  if b > a then return b end
  return a
end

-- What the versions and suites of `found` (ctx:tls_enum's result) say,
-- with `cert` the leaf certificate (its key compared with the key
-- exchanges): { out = nmap's table by version name, least = the worst
-- grade, names = the versions in order, weak = kind -> { "VERSION SUITE" }
-- (null, anon, export, rc4, des, tripledes, small_kx), cbc_only_tls10,
-- fs (a forward-secret exchange accepted), modern (TLS 1.2 or 1.3) }.
function ciphers.summary(found, cert)
  local cert_bits = cert and cert.key_bits or 0
  -- DH and RSA sizes compare with RSA and DSA keys only (EC bits are not alike).
  local cert_rsa = cert ~= nil and (cert.key_type == "rsa" or cert.key_type == "dsa")
  local out, least = {}, nil
  local names, cbc_only_tls10, fs, modern = {}, true, false, false
  local weak = { null = {}, anon = {}, export = {}, rc4 = {}, des = {}, tripledes = {}, small_kx = {} }
  for _, v in ipairs(found.versions) do
    names[#names + 1] = v.name
    if v.name == "TLSv1.2" or v.name == "TLSv1.3" then
      modern = true
    end
    if v.name ~= "TLSv1.0" and v.name ~= "SSLv3" then
      cbc_only_tls10 = false
    end
    local list, warnings = {}, {}
    for _, s in ipairs(v.suites) do
      local g = ciphers.grade(s)
      least = ciphers.worse(least, g)
      list[#list + 1] = { name = s.name, kex_info = ciphers.kex_info(s), strength = g }
      if s.kx == "ecdhe" or s.kx == "dhe" or v.name == "TLSv1.3" then
        fs = true
      end
      local function note(kind, text)
        weak[kind][#weak[kind] + 1] = v.name .. " " .. s.name
        warnings[text] = true
      end
      if s.enc == "null" then note("null", "Ciphersuite uses no encryption (NULL)") end
      if s.au == "null" then note("anon", "Anonymous key exchange, score capped at F") end
      if s.export then note("export", "Export key exchange") end
      if s.enc == "rc4" then note("rc4", "Broken cipher RC4 is deprecated by RFC 7465") end
      if s.enc == "des" then note("des", "Insecure cipher DES") end
      if s.enc == "tripledes" then note("tripledes", "64-bit block cipher 3DES vulnerable to SWEET32 attack") end
      if (s.kx == "dhe" or s.kx == "dh" or s.kx == "rsa") and (s.kx_bits or 0) > 0 and s.kx_bits < 2048 then
        if s.kx ~= "rsa" and cert_rsa and s.kx_bits < cert_bits then
          note("small_kx", "Key exchange (" .. ciphers.kex_info(s) .. ") of lower strength than certificate key")
        else
          note("small_kx", "Weak key exchange (" .. ciphers.kex_info(s) .. ")")
        end
      end
    end
    -- As nmap: in the server's order when it has one, else by name.
    if v.preference ~= "server" then
      table.sort(list, function(a, b) return a.name < b.name end)
    end
    local w = {}
    for text in pairs(warnings) do w[#w + 1] = text end
    table.sort(w)
    local entry = { ciphers = list, compressors = { "NULL" }, ["cipher preference"] = v.preference }
    if #w > 0 then entry.warnings = w end
    out[v.name] = entry
  end
  return { out = out, least = least, names = names, weak = weak, cbc_only_tls10 = cbc_only_tls10, fs = fs, modern = modern }
end

-- The findings about a certificate chain (leaf first): a small RSA or DSA
-- key, an MD5 or SHA-1 signature, expiry, self-signed, a broken chain, and
-- a leaf that does not match host `name` (if given), in that order: a
-- list of { severity, title, data }.
function ciphers.certificate_findings(chain, name)
  local found = {}
  local function finding(severity, title, data)
    found[#found + 1] = { severity, title, data }
  end
  local leaf = chain[1]
  if leaf and not leaf.error then
    if (leaf.key_type == "rsa" or leaf.key_type == "dsa") and leaf.key_bits > 0 and leaf.key_bits < 2048 then
      finding("medium", "Certificate " .. leaf.key_type .. " key of " .. leaf.key_bits .. " bits", { key_bits = leaf.key_bits })
    end
    local sig = string.lower(leaf.signature_algorithm or "")
    if sig:find("md5", 1, true) then
      finding("high", "Certificate signed with MD5 (" .. leaf.signature_algorithm .. ")", {})
    elseif sig:find("sha1", 1, true) then
      finding("medium", "Certificate signed with SHA-1 (" .. leaf.signature_algorithm .. ")", {})
    end
    local now = os.date("!%Y-%m-%dT%H:%M:%SZ", os.time())
    if leaf.not_after < now then
      finding("high", "Certificate expired on " .. leaf.not_after, { not_after = leaf.not_after })
    end
    if leaf.self_signed then
      finding("low", "Self-signed certificate", { subject = leaf.subject })
    end
    -- Each certificate must be issued by the next one.
    for i = 1, #chain - 1 do
      if chain[i].issuer ~= chain[i + 1].subject then
        finding("medium", "Certificate chain is broken: certificate " .. i .. " is not issued by the next", {
          issuer = chain[i].issuer,
          next_subject = chain[i + 1].subject,
        })
        break
      end
    end
    -- The name the scan knows for the host.
    if name and name ~= "" then
      local want = string.lower(name)
      local matched = false
      for _, san in ipairs(leaf.san or {}) do
        local ip = string.lower(san):match("^ip:(.+)$")
        if ip and ip == want then matched = true end
        local dns = string.lower(san):match("^dns:(.+)$")
        if dns then
          if dns == want then matched = true end
          local suffix = dns:match("^%*(%..+)$")
          if suffix and want:sub(-#suffix) == suffix and not want:sub(1, -#suffix - 1):find("%.") then
            matched = true
          end
        end
      end
      if not matched then
        finding("medium", "Certificate does not match host name " .. name, { san = leaf.san or {} })
      end
    end
  end
  return found
end

return ciphers
