-- ciphers_test: unit tests of lib/ciphers.lua (ssl-enum-ciphers' grades,
-- layout and weak configurations), run offline with
-- `moonscan plugins test tests/lua/ciphers_test.lua --plugin-dir plugins`.

local ciphers = require "ciphers"

local passed = 0
local function check(cond, what)
  assert(cond, what)
  passed += 1
end

local ECDHE_GCM = { name = "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", kx = "ecdhe", group = "x25519", kx_bits = 253,
  au = "rsa", enc = "aes", enc_bits = 128, mode = "gcm" }
local RSA_3DES = { name = "TLS_RSA_WITH_3DES_EDE_CBC_SHA", kx = "rsa", kx_bits = 2048, au = "rsa", enc = "tripledes",
  enc_bits = 168, mode = "cbc" }
local DHE_1024 = { name = "TLS_DHE_RSA_WITH_AES_256_CBC_SHA", kx = "dhe", kx_bits = 1024, au = "rsa", enc = "aes",
  enc_bits = 256, mode = "cbc" }
local NULL = { name = "TLS_RSA_WITH_NULL_SHA", kx = "rsa", kx_bits = 2048, au = "rsa", enc = "null", enc_bits = 0 }

return {
  id = "ciphers-test",
  description = "Unit tests of the ciphers library.",
  categories = { "safe" },
  ports = { 443 },
  run = function()
    check(ciphers.grade(ECDHE_GCM) == "A", "ECDHE with AES-128-GCM is A")
    check(ciphers.grade(RSA_3DES) == "C", "3DES is at most C")
    check(ciphers.grade(NULL) == "F", "NULL is F")
    check(ciphers.grade(DHE_1024) == "A", "DHE 1024 with AES-256: 0.43*80 + 57 = 91.4, A")
    check(ciphers.rsa_equivalent(ECDHE_GCM) == 3072 and ciphers.rsa_equivalent({ kx_bits = 0 }) == nil, "EC bits as RSA bits")
    check(ciphers.kex_info(ECDHE_GCM) == "ecdh_x25519" and ciphers.kex_info(DHE_1024) == "dh 1024"
      and ciphers.kex_info(RSA_3DES) == "rsa 2048", "nmap's kex_info")
    check(ciphers.worse(nil, "B") == "B" and ciphers.worse("B", "A") == "B" and ciphers.worse("A", "C") == "C", "the worse grade")

    local found = { versions = {
      { name = "TLSv1.2", preference = "server", suites = { ECDHE_GCM, RSA_3DES } },
      { name = "TLSv1.0", preference = "client", suites = { RSA_3DES, DHE_1024 } },
    } }
    local s = ciphers.summary(found, { key_type = "rsa", key_bits = 2048 })
    check(s.least == "C" and s.names[1] == "TLSv1.2" and s.fs and s.modern and not s.cbc_only_tls10, "the summary's flags")
    check(s.out["TLSv1.2"].ciphers[1].name == ECDHE_GCM.name, "the server's order kept")
    check(s.out["TLSv1.0"].ciphers[1].name == DHE_1024.name, "no server order: by name")
    check(#s.weak.tripledes == 2 and s.weak.tripledes[1] == "TLSv1.2 " .. RSA_3DES.name, "3DES noted per version")
    check(s.weak.small_kx[1] == "TLSv1.0 " .. DHE_1024.name, "a small DH exchange")
    check(s.out["TLSv1.0"].warnings[1] == "64-bit block cipher 3DES vulnerable to SWEET32 attack"
      and s.out["TLSv1.0"].warnings[2] == "Key exchange (dh 1024) of lower strength than certificate key", "warnings, sorted")
    s.out["least strength"] = s.least
    local text = ciphers.text(s.out)
    check(string.find(text, "\n  TLSv1.0: \n    ciphers: \n      " .. DHE_1024.name .. " (dh 1024) - A", 1, true) == 1,
      "nmap's layout, oldest version first")
    check(string.sub(text, -20) == "\n  least strength: C", "the least strength last")

    local leaf = { key_type = "rsa", key_bits = 1024, signature_algorithm = "sha1WithRSAEncryption",
      not_after = "2000-01-01T00:00:00Z", self_signed = true, subject = "CN=a", issuer = "CN=a", san = { "DNS:*.example.com" } }
    local f = ciphers.certificate_findings({ leaf }, "www.example.com")
    check(#f == 4 and f[1][2] == "Certificate rsa key of 1024 bits" and f[2][1] == "medium" and f[3][1] == "high"
      and f[4][2] == "Self-signed certificate", "a weak, old, self-signed leaf; the wildcard matches")
    f = ciphers.certificate_findings({ leaf }, "a.b.example.com")
    check(f[5][2] == "Certificate does not match host name a.b.example.com", "a wildcard covers one label")
    f = ciphers.certificate_findings({ { error = "unparsable" } }, "x")
    check(#f == 0, "an unparsable leaf says nothing")
    return "ok " .. passed
  end,
}
