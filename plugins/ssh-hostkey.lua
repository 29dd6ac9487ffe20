-- ssh-hostkey: the SSH server's host keys, one connection per key type.
--
-- Each connection exchanges version strings and KEXINIT messages offering
-- one host key algorithm, then sends SSH_MSG_KEX_ECDH_INIT with a throwaway
-- client value. The server's SSH_MSG_KEX_ECDH_REPLY carries the host key
-- blob (K_S); the exchange is never finished. Fingerprints are those
-- ssh-keygen -l prints (SHA256) and nmap prints (MD5, colon hex).

local MAX_PACKET = 35000 -- RFC 4253 6.1: implementations must handle 35000
local MAX_LINE = 255 -- RFC 4253 4.2: version lines are at most 255 bytes
local MAX_PRE_LINES = 16 -- lines a server may send before its version line
local MAX_SKIPPED = 16 -- IGNORE/DEBUG messages tolerated while waiting
local TIMEOUT = 5000

local MSG_DISCONNECT, MSG_IGNORE, MSG_DEBUG = 1, 2, 4
local MSG_KEXINIT, MSG_KEX_ECDH_INIT, MSG_KEX_ECDH_REPLY = 20, 30, 31

-- Key kinds, in the order they are reported; each is fetched once, with the
-- first of its algorithms the server offers.
local KINDS = {
  { name = "RSA", blob = "ssh-rsa", algs = { "rsa-sha2-512", "rsa-sha2-256", "ssh-rsa" } },
  { name = "DSA", blob = "ssh-dss", algs = { "ssh-dss" } },
  { name = "ECDSA", blob = "ecdsa-sha2-nistp256", algs = { "ecdsa-sha2-nistp256" } },
  { name = "ECDSA", blob = "ecdsa-sha2-nistp384", algs = { "ecdsa-sha2-nistp384" } },
  { name = "ECDSA", blob = "ecdsa-sha2-nistp521", algs = { "ecdsa-sha2-nistp521" } },
  { name = "ED25519", blob = "ssh-ed25519", algs = { "ssh-ed25519" } },
}

local CURVE_BITS = { nistp256 = 256, nistp384 = 384, nistp521 = 521 }

-- Key exchanges offered, in preference order. The nistp256 fallback (for
-- servers without curve25519) sends the curve's generator as the client
-- value: a valid point, so the server answers.
local KEX = { "curve25519-sha256", "curve25519-sha256@libssh.org", "ecdh-sha2-nistp256" }
local P256_G = "04"
  .. "6b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c296"
  .. "4fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5"

-- Anything the server may insist on; none of it is ever used.
local CIPHERS = "chacha20-poly1305@openssh.com,aes128-ctr,aes192-ctr,aes256-ctr,aes128-gcm@openssh.com,"
  .. "aes256-gcm@openssh.com,aes128-cbc,aes192-cbc,aes256-cbc,3des-cbc"
local MACS = "hmac-sha2-256-etm@openssh.com,hmac-sha2-512-etm@openssh.com,hmac-sha1-etm@openssh.com,"
  .. "umac-64-etm@openssh.com,umac-128-etm@openssh.com,hmac-sha2-256,hmac-sha2-512,hmac-sha1,"
  .. "umac-64@openssh.com,umac-128@openssh.com,hmac-md5"
local COMPRESSION = "none,zlib@openssh.com,zlib"

local function unhex(h)
  return (h:gsub("%x%x", function(x)
    return string.char(tonumber(x, 16))
  end))
end

local counter = 0
-- 32 bytes that differ per call (nothing here needs to be secret).
local function fresh_bytes(ctx, what)
  counter += 1
  local seed = { ctx.ip, tostring(ctx.port), what, tostring(counter), tostring(os.clock()) }
  return unhex(hash.sha256(table.concat(seed, "|")))
end

local function has(list, name)
  return ("," .. list .. ","):find("," .. name .. ",", 1, true) ~= nil
end

-- A uint32-length-prefixed string at `pos`; nil when the buffer is too short.
local function take_string(buf, pos)
  if pos < 1 or pos + 3 > #buf then
    return nil
  end
  local len = string.unpack(">I4", buf, pos)
  if len > #buf - (pos + 3) then
    return nil
  end
  return buf:sub(pos + 4, pos + 3 + len), pos + 4 + len
end

local function packet(payload)
  local pad = 8 - ((5 + #payload) % 8)
  if pad < 4 then
    pad += 8
  end
  return string.pack(">I4B", 1 + #payload + pad, pad) .. payload .. string.rep("\0", pad)
end

-- The next message that is not IGNORE or DEBUG: type, payload.
local function next_message(sock)
  for _ = 1, MAX_SKIPPED do
    local head, err = sock:recv_exact(4)
    if not head then
      return nil, err
    end
    local len = string.unpack(">I4", head)
    if len < 6 or len > MAX_PACKET then
      return nil, ("bad packet length %d"):format(len)
    end
    local body
    body, err = sock:recv_exact(len)
    if not body then
      return nil, err
    end
    local pad = body:byte(1)
    if pad < 4 or pad > len - 2 then
      return nil, ("bad padding length %d"):format(pad)
    end
    local payload = body:sub(2, len - pad)
    local kind = payload:byte(1)
    if kind == MSG_DISCONNECT then
      local why = #payload >= 5 and take_string(payload, 6) or nil
      return nil, "server disconnected" .. (why and why ~= "" and (": " .. why:sub(1, 200)) or "")
    elseif kind ~= MSG_IGNORE and kind ~= MSG_DEBUG then
      return kind, payload
    end
  end
  return nil, "too many IGNORE/DEBUG messages"
end

local function version_exchange(sock)
  local ok, err = sock:send("SSH-2.0-moonscan\r\n")
  if not ok then
    return nil, err
  end
  for _ = 1, MAX_PRE_LINES do
    local line
    line, err = sock:recv_until("\n", MAX_LINE + 1)
    if not line then
      return nil, "no SSH version line: " .. tostring(err)
    end
    if line:sub(1, 4) == "SSH-" then
      line = line:gsub("\r?\n$", "")
      if line:sub(1, 8) ~= "SSH-2.0-" and line:sub(1, 9) ~= "SSH-1.99-" then
        return nil, "not an SSH-2 server: " .. line
      end
      return line
    end
  end
  return nil, "no SSH version line"
end

-- The 10 name-lists of a KEXINIT payload, or nil.
local function parse_kexinit(payload)
  local lists, pos = {}, 18 -- message byte and 16-byte cookie
  for i = 1, 10 do
    local s
    s, pos = take_string(payload, pos)
    if not s then
      return nil
    end
    lists[i] = s
  end
  return { kex = lists[1], hostkey = lists[2] }
end

local function kexinit_payload(ctx, hostkey_alg)
  local kex = table.concat(KEX, ",")
  local cookie = fresh_bytes(ctx, "cookie"):sub(1, 16)
  -- kex, host key, then each pair client-to-server / server-to-client:
  -- ciphers, MACs, compression, languages; first_kex_packet_follows; reserved.
  local lists = string.pack(">s4s4", kex, hostkey_alg)
    .. string.pack(">s4s4s4s4s4s4s4s4", CIPHERS, CIPHERS, MACS, MACS, COMPRESSION, COMPRESSION, "", "")
  return string.char(MSG_KEXINIT) .. cookie .. lists .. string.pack(">BI4", 0, 0)
end

local function bit_length(mpint)
  local i = 1
  while i <= #mpint and mpint:byte(i) == 0 do
    i += 1
  end
  if i > #mpint then
    return 0
  end
  return (#mpint - i) * 8 + (32 - bit32.countlz(mpint:byte(i)))
end

-- Key type name and bits of a public key blob, or nil, why.
local function parse_key(blob)
  local ktype, pos = take_string(blob, 1)
  if not ktype then
    return nil, "truncated host key"
  end
  if ktype == "ssh-rsa" then
    local _, n
    _, pos = take_string(blob, pos) -- e
    n = pos and take_string(blob, pos)
    if not n then
      return nil, "truncated RSA key"
    end
    return ktype, bit_length(n)
  elseif ktype == "ssh-dss" then
    local p = take_string(blob, pos)
    if not p then
      return nil, "truncated DSA key"
    end
    return ktype, bit_length(p)
  elseif ktype:sub(1, 11) == "ecdsa-sha2-" then
    local curve, q
    curve, pos = take_string(blob, pos)
    q = pos and take_string(blob, pos)
    if not q or not CURVE_BITS[curve] then
      return nil, "bad ECDSA key"
    end
    return ktype, CURVE_BITS[curve]
  elseif ktype == "ssh-ed25519" then
    local k = take_string(blob, pos)
    if not k or #k ~= 32 then
      return nil, "bad Ed25519 key"
    end
    return ktype, 256
  end
  return nil, "unknown key type " .. ktype:sub(1, 64)
end

local function describe(kind, blob)
  local ktype, bits = parse_key(blob)
  if not ktype then
    return nil, bits
  end
  if ktype ~= kind.blob then
    return nil, ("asked for %s, got a %s key"):format(kind.blob, ktype)
  end
  -- nmap's entry: the key's type, its size (as text), the MD5 of the
  -- blob in plain hex, and the blob in base64.
  return {
    type = ktype,
    bits = tostring(bits),
    fingerprint = hash.md5(blob),
    key = hash.base64(blob),
  }, kind.name
end

-- One connection: returns the server's host key algorithms and, when
-- `choose` picks one of them, the key kind and the host key blob.
local function fetch(ctx, choose)
  local sock, err = ctx:connect({ timeout = TIMEOUT })
  if not sock then
    return nil, err
  end
  local function fail(why)
    sock:close()
    return nil, why
  end
  local ok
  ok, err = version_exchange(sock)
  if not ok then
    return fail(err)
  end
  local kind, payload = next_message(sock)
  if not kind then
    return fail(payload)
  end
  if kind ~= MSG_KEXINIT then
    return fail(("expected KEXINIT, got message %d"):format(kind))
  end
  local server = parse_kexinit(payload)
  if not server then
    return fail("malformed KEXINIT")
  end
  local alg, which = choose(server.hostkey)
  if not alg then
    sock:close()
    return { algorithms = server.hostkey }
  end
  local kex
  for _, k in ipairs(KEX) do
    if has(server.kex, k) then
      kex = k
      break
    end
  end
  if not kex then
    return fail("no common key exchange (server offers " .. server.kex:sub(1, 300) .. ")")
  end
  local q_c = kex == "ecdh-sha2-nistp256" and unhex(P256_G) or fresh_bytes(ctx, "ecdh")
  ok, err = sock:send(packet(kexinit_payload(ctx, alg)) .. packet(string.pack(">Bs4", MSG_KEX_ECDH_INIT, q_c)))
  if not ok then
    return fail(err)
  end
  kind, payload = next_message(sock)
  sock:close()
  if not kind then
    return nil, payload
  end
  if kind ~= MSG_KEX_ECDH_REPLY then
    return nil, ("expected KEX_ECDH_REPLY, got message %d"):format(kind)
  end
  local blob = take_string(payload, 2)
  if not blob or #blob == 0 then
    return nil, "malformed KEX_ECDH_REPLY"
  end
  return { algorithms = server.hostkey, kind = which, blob = blob }
end

-- The first kind not yet fetched (index >= from) the server offers.
local function chooser(from, tried)
  return function(offered)
    for i = from, #KINDS do
      if not tried[i] then
        for _, a in ipairs(KINDS[i].algs) do
          if has(offered, a) then
            tried[i] = true
            return a, KINDS[i]
          end
        end
      end
    end
    return nil
  end
end

return {
  id = "ssh-hostkey",
  description = "Shows the SSH server's host keys as nmap's ssh-hostkey does: type, size, MD5 fingerprint and the key.",
  categories = { "default", "discovery", "safe" },
  ports = { 22 },
  services = { "ssh" },
  run = function(ctx)
    if #ctx.banner > 0 and not ctx.banner:find("SSH-", 1, true) then
      return nil, "the service did not send an SSH version string"
    end
    local tried, keys, errors = {}, {}, {}
    local function add(r, err)
      if not r then
        errors[#errors + 1] = err
        return
      end
      if r.blob then
        local k, name = describe(r.kind, r.blob)
        if k then
          keys[#keys + 1] = { pos = table.find(KINDS, r.kind), key = k, name = name }
        else
          errors[#errors + 1] = name
        end
      end
    end
    -- The first connection learns what the server offers and fetches one key.
    local first, err = fetch(ctx, chooser(1, tried))
    if not first then
      return nil, err
    end
    add(first)
    for i = 1, #KINDS do
      if not tried[i] then
        local offered = false
        for _, a in ipairs(KINDS[i].algs) do
          offered = offered or has(first.algorithms, a)
        end
        if offered then
          add(fetch(ctx, chooser(i, tried)))
        end
      end
    end
    for _, e in ipairs(errors) do
      ctx:log("ssh-hostkey: " .. tostring(e))
    end
    if #keys == 0 then
      return nil, errors[1] or "the server offers no host key type this plugin knows"
    end
    table.sort(keys, function(a, b)
      return a.pos < b.pos
    end)
    -- nmap's table (one entry per key) and text ("bits md5 (KIND)" lines).
    local list, lines = {}, {}
    for _, k in ipairs(keys) do
      list[#list + 1] = k.key
      lines[#lines + 1] = ("\n  %s %s (%s)"):format(k.key.bits, k.key.fingerprint, k.name)
    end
    return list, table.concat(lines)
  end,
}
