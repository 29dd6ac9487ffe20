-- ssh2: the clear-text start of an SSH-2 connection (RFC 4253): version
-- exchange, binary packets before any key is agreed, and KEXINIT with its
-- name-lists (RFC 4251 section 5).
--
--   local ssh2 = require "ssh2"
--   local version, err = ssh2.exchange_versions(sock, "SSH-2.0-moonscan")
--   local kind, payload = ssh2.next_message(sock)     -- skips IGNORE/DEBUG
--   local kex = ssh2.parse_kexinit(payload)           -- kex.kex_algorithms, ...
--   ssh2.name_list(kex.kex_algorithms)                --> { "curve25519-sha256", ... }
--   sock:send(ssh2.packet(ssh2.kexinit{ kex_algorithms = "...", ... }))
--   ssh2.weak{ kex_algorithms = { ... }, mac_algorithms = { ... } }  -- weak ones offered
--   ssh2.bubble_babble(sha1)                          -- a key's fingerprint as `ssh-keygen -B`
--   ssh2.random_art(md5, "RSA", 2048)                 -- OpenSSH's random art, in nmap's frame
--
-- Every read is bounded: version lines of 255 bytes and 16 lines before
-- the version, packets of MAX_PACKET bytes, 16 IGNORE/DEBUG messages in a
-- row. What is not well formed gives nil, why.

local text = require "text"

local ssh2 = {}

ssh2.MAX_PACKET = 35000 -- RFC 4253 section 6.1: what every implementation handles
local MAX_LINE = 255 -- RFC 4253 section 4.2
local MAX_PRE_LINES = 16
local MAX_SKIPPED = 16
local MAX_NAMES = 1024

ssh2.MSG_DISCONNECT, ssh2.MSG_IGNORE, ssh2.MSG_DEBUG = 1, 2, 4
ssh2.MSG_KEXINIT, ssh2.MSG_KEX_ECDH_INIT, ssh2.MSG_KEX_ECDH_REPLY = 20, 30, 31

-- The ten name-lists of KEXINIT, in their order.
ssh2.KEXINIT_LISTS = {
  "kex_algorithms", "server_host_key_algorithms",
  "encryption_algorithms_client_to_server", "encryption_algorithms_server_to_client",
  "mac_algorithms_client_to_server", "mac_algorithms_server_to_client",
  "compression_algorithms_client_to_server", "compression_algorithms_server_to_client",
  "languages_client_to_server", "languages_server_to_client",
}

-- The uint32-length-prefixed string at `pos` of `buf` and the position
-- after it, or nil when `buf` is too short.
function ssh2.string_at(buf, pos)
  if pos < 1 or pos + 3 > #buf then
    return nil
  end
  local len = string.unpack(">I4", buf, pos)
  if len > #buf - (pos + 3) then
    return nil
  end
  return string.sub(buf, pos + 4, pos + 3 + len), pos + 4 + len
end

-- A name-list split on commas, as nmap splits it ("" is the empty list,
-- "a,,b" keeps its empty name); nil, why past `max` names (default 1024).
function ssh2.name_list(s, max)
  max = max or MAX_NAMES
  local names = {}
  if s == "" then
    return names
  end
  local from = 1
  while true do
    if #names >= max then
      return nil, "more than " .. max .. " names"
    end
    local at = string.find(s, ",", from, true)
    names[#names + 1] = string.sub(s, from, (at or 0) - 1)
    if not at then
      return names
    end
    from = at + 1
  end
end

-- Whether name-list `list` (a string) holds `name`.
function ssh2.has(list, name)
  return string.find("," .. list .. ",", "," .. name .. ",", 1, true) ~= nil
end

-- An unencrypted binary packet carrying `payload` (no MAC).
function ssh2.packet(payload)
  local pad = 8 - ((5 + #payload) % 8)
  if pad < 4 then
    pad += 8
  end
  return string.pack(">I4B", 1 + #payload + pad, pad) .. payload .. string.rep("\0", pad)
end

-- The payload of the next unencrypted packet (at most `max` bytes long,
-- default MAX_PACKET), or nil, why.
function ssh2.read_packet(sock, max)
  max = max or ssh2.MAX_PACKET
  local head, err = sock:recv_exact(4)
  if not head then
    return nil, err
  end
  local len = string.unpack(">I4", head)
  if len < 6 or len > max then
    return nil, ("bad packet length %d"):format(len)
  end
  local body
  body, err = sock:recv_exact(len)
  if not body then
    return nil, err
  end
  local pad = string.byte(body, 1)
  if pad < 4 or pad > len - 2 then
    return nil, ("bad padding length %d"):format(pad)
  end
  return string.sub(body, 2, len - pad)
end

-- The next message that is not IGNORE or DEBUG: its type and payload, or
-- nil, why (DISCONNECT is a why, with the server's reason).
function ssh2.next_message(sock, max)
  for _ = 1, MAX_SKIPPED do
    local payload, err = ssh2.read_packet(sock, max)
    if not payload then
      return nil, err
    end
    local kind = string.byte(payload, 1)
    if kind == ssh2.MSG_DISCONNECT then
      local why = ssh2.string_at(payload, 6)
      return nil, "server disconnected" .. (why and why ~= "" and (": " .. string.sub(why, 1, 200)) or "")
    elseif kind ~= ssh2.MSG_IGNORE and kind ~= ssh2.MSG_DEBUG then
      return kind, payload
    end
  end
  return nil, "too many IGNORE/DEBUG messages"
end

-- Sends our version line, then reads the server's (skipping up to 16 other
-- lines before it): the line without its end, or nil, why. An SSH-1-only
-- server (not "SSH-2.0-" nor "SSH-1.99-") is a why.
function ssh2.exchange_versions(sock, ours)
  local ok, err = sock:send(ours .. "\r\n")
  if not ok then
    return nil, err
  end
  for _ = 1, MAX_PRE_LINES do
    local line
    line, err = sock:recv_until("\n", MAX_LINE + 1)
    if not line then
      return nil, "no SSH version line: " .. tostring(err)
    end
    if string.sub(line, 1, 4) == "SSH-" then
      line = string.gsub(line, "\r?\n$", "")
      if string.sub(line, 1, 8) ~= "SSH-2.0-" and string.sub(line, 1, 9) ~= "SSH-1.99-" then
        return nil, "not an SSH-2 server: " .. line
      end
      return line
    end
  end
  return nil, "no SSH version line"
end

-- A KEXINIT payload's parts: cookie, the ten name-lists (strings, under the
-- names of KEXINIT_LISTS) and first_kex_packet_follows; or nil, why.
function ssh2.parse_kexinit(payload)
  if string.byte(payload, 1) ~= ssh2.MSG_KEXINIT or #payload < 17 then
    return nil, "not a KEXINIT"
  end
  local kex, pos = { cookie = string.sub(payload, 2, 17) }, 18
  for _, name in ipairs(ssh2.KEXINIT_LISTS) do
    local s
    s, pos = ssh2.string_at(payload, pos)
    if not s then
      return nil, "KEXINIT cut short in " .. name
    end
    kex[name] = s
  end
  if pos + 4 > #payload then
    return nil, "KEXINIT cut short after its name-lists"
  end
  kex.first_kex_packet_follows = string.byte(payload, pos) ~= 0
  return kex
end

-- A KEXINIT payload from `lists` (name-list strings under the names of
-- KEXINIT_LISTS; a missing one is empty) and a 16-byte cookie.
function ssh2.kexinit(lists, cookie)
  cookie = cookie or string.rep("\0", 16)
  assert(#cookie == 16, "ssh2.kexinit: the cookie is 16 bytes")
  local out = { string.char(ssh2.MSG_KEXINIT), cookie }
  for _, name in ipairs(ssh2.KEXINIT_LISTS) do
    out[#out + 1] = string.pack(">s4", lists[name] or "")
  end
  out[#out + 1] = string.pack(">BI4", lists.first_kex_packet_follows and 1 or 0, 0)
  return table.concat(out)
end

local RFC = "https://www.rfc-editor.org/rfc/rfc"

-- Weak algorithms: the list they are offered in (both directions merged),
-- name patterns, severity, what they are, why, a reference and the
-- OpenSSH option that removes them.
ssh2.WEAK = {
  { list = "kex_algorithms", severity = "medium", what = "deprecated key exchange methods",
    patterns = { "^diffie%-hellman%-group1%-sha1$", "^diffie%-hellman%-group%-exchange%-sha1$", "^rsa1024%-sha1$",
      "^gss%-group1%-sha1%-", "^gss%-gex%-sha1%-" },
    why = "1024-bit groups or SHA-1 exchange hashes: RFC 9142 says SHOULD NOT (rsa1024-sha1: MUST NOT)",
    reference = RFC .. "9142" },
  { list = "kex_algorithms", severity = "low", what = "a SHA-1 key exchange",
    patterns = { "^diffie%-hellman%-group14%-sha1$" },
    why = "SHA-1 exchange hash: RFC 9142 keeps it only as MAY, diffie-hellman-group14-sha256 replaces it",
    reference = RFC .. "9142" },
  { list = "server_host_key_algorithms", severity = "medium", what = "DSA host keys (ssh-dss)",
    patterns = { "^ssh%-dss" },
    why = "1024-bit DSA with SHA-1 signatures, disabled by default since OpenSSH 7.0",
    reference = "https://www.openssh.com/txt/release-7.0" },
  { list = "encryption_algorithms", severity = "medium", what = "RC4 ciphers (arcfour)",
    patterns = { "^arcfour" },
    why = "RC4 keystream biases: RFC 8758 says MUST NOT", reference = RFC .. "8758" },
  { list = "encryption_algorithms", severity = "medium", what = "CBC-mode ciphers",
    patterns = { "%-cbc$", "%-cbc@" },
    why = "SSH in CBC mode allows plaintext recovery (CVE-2008-5161); 3DES and Blowfish also have 64-bit blocks",
    reference = "https://www.kb.cert.org/vuls/id/958563", cve = "CVE-2008-5161" },
  { list = "encryption_algorithms", severity = "high", what = "no encryption (cipher none)",
    patterns = { "^none$" },
    why = "the session can be read in transit", reference = RFC .. "4253#section-6.3" },
  { list = "mac_algorithms", severity = "medium", what = "HMAC-MD5 MACs",
    patterns = { "^hmac%-md5" },
    why = "MD5 is broken; RFC 6151 advises against HMAC-MD5 in new uses", reference = RFC .. "6151" },
  { list = "mac_algorithms", severity = "medium", what = "truncated HMAC-SHA1-96 MACs",
    patterns = { "^hmac%-sha1%-96" },
    why = "SHA-1 cut to 96 bits", reference = "https://www.iana.org/assignments/ssh-parameters/" },
  { list = "mac_algorithms", severity = "high", what = "no integrity protection (MAC none)",
    patterns = { "^none$" },
    why = "the session can be altered in transit", reference = RFC .. "4253#section-6.4" },
}
local OPTION = { kex_algorithms = "KexAlgorithms", server_host_key_algorithms = "HostKeyAlgorithms",
  encryption_algorithms = "Ciphers", mac_algorithms = "MACs" }

-- The rules of WEAK that `offered` (lists of names under kex_algorithms,
-- server_host_key_algorithms, encryption_algorithms, mac_algorithms)
-- matches: each rule's fields, its `option`, and `algorithms`, the names
-- it matched (each once, cut to 100 bytes, at most 32).
function ssh2.weak(offered)
  local out = {}
  for _, rule in ipairs(ssh2.WEAK) do
    local found = {}
    for _, full in ipairs(offered[rule.list] or {}) do
      local name = text.clip(full, 100)
      for _, p in ipairs(rule.patterns) do
        if #found < 32 and string.find(full, p) and not table.find(found, name) then
          found[#found + 1] = name
        end
      end
    end
    if #found > 0 then
      local hit = table.clone(rule)
      hit.algorithms, hit.option = found, OPTION[rule.list]
      out[#out + 1] = hit
    end
  end
  return out
end

-- Bubble Babble (Antti Huima's encoding, as `ssh-keygen -B` prints it).
function ssh2.bubble_babble(d)
  local vowel, consonant = "aeiouy", "bcdfghklmnprstvzx"
  local function v(i)
    return vowel:sub(i + 1, i + 1)
  end
  local function c(i)
    return consonant:sub(i + 1, i + 1)
  end
  local out, seed = { "x" }, 1
  local rounds = #d // 2 + 1
  for r = 0, rounds - 1 do
    local a = d:byte(2 * r + 1)
    if r + 1 < rounds or #d % 2 == 1 then
      out[#out + 1] = v((bit32.rshift(a, 6) + seed) % 6)
        .. c(bit32.band(bit32.rshift(a, 2), 15))
        .. v((bit32.band(a, 3) + seed // 6) % 6)
      if r + 1 < rounds then
        local b = d:byte(2 * r + 2)
        out[#out + 1] = c(bit32.rshift(b, 4)) .. "-" .. c(bit32.band(b, 15))
        seed = (seed * 5 + a * 7 + b) % 36
      end
    else
      out[#out + 1] = v(seed % 6) .. "x" .. v(seed // 6)
    end
  end
  return table.concat(out) .. "x"
end

-- OpenSSH's random art of a digest: a bishop walks a 17x9 board from its
-- middle, two bits a step (low bits first), each square showing how often
-- it was visited; S marks the start and E the end.
function ssh2.random_art(d, kind, bits)
  local W, H, marks = 17, 9, " .o+=*BOX@%&#/^"
  local seen, x, y = {}, 9, 5
  for i = 1, W * H do
    seen[i] = 0
  end
  for i = 1, #d do
    local b = d:byte(i)
    for _ = 1, 4 do
      x = math.clamp(x + (bit32.band(b, 1) == 1 and 1 or -1), 1, W)
      y = math.clamp(y + (bit32.band(b, 2) == 2 and 1 or -1), 1, H)
      local at = (y - 1) * W + x
      seen[at] = math.min(seen[at] + 1, #marks - 1)
      b = bit32.rshift(b, 2)
    end
  end
  local rows = { ("\n+--[%4s %4d]----+"):format(kind, bits) }
  for row = 1, H do
    local line = {}
    for col = 1, W do
      local n = seen[(row - 1) * W + col]
      local mark = marks:sub(n + 1, n + 1)
      if col == 9 and row == 5 then
        mark = "S"
      end
      if col == x and row == y then
        mark = "E"
      end
      line[col] = mark
    end
    rows[#rows + 1] = "|" .. table.concat(line) .. "|"
  end
  return table.concat(rows, "\n") .. "\n+-----------------+\n"
end

return ssh2
