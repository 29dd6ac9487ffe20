-- ssh2-test: unit tests of lib/ssh2.lua on fixed bytes (an OpenSSH 9.2
-- server's version line and KEXINIT, built here by hand), offline.
local ssh2 = require "ssh2"

local function hex(s)
  return (string.gsub(s, ".", function(c)
    return string.format("%02x", string.byte(c))
  end))
end

-- The lab sshd's lists (OpenSSH 9.2p1 Debian).
local LISTS = {
  "sntrup761x25519-sha512,sntrup761x25519-sha512@openssh.com,curve25519-sha256,curve25519-sha256@libssh.org,"
    .. "ecdh-sha2-nistp256,ecdh-sha2-nistp384,ecdh-sha2-nistp521,diffie-hellman-group-exchange-sha256,"
    .. "diffie-hellman-group16-sha512,diffie-hellman-group18-sha512,diffie-hellman-group14-sha256,kex-strict-s-v00@openssh.com",
  "rsa-sha2-512,rsa-sha2-256,ecdsa-sha2-nistp256,ssh-ed25519",
  "chacha20-poly1305@openssh.com,aes128-ctr,aes192-ctr,aes256-ctr,aes128-gcm@openssh.com,aes256-gcm@openssh.com",
  "chacha20-poly1305@openssh.com,aes128-ctr,aes192-ctr,aes256-ctr,aes128-gcm@openssh.com,aes256-gcm@openssh.com",
  "umac-64-etm@openssh.com,hmac-sha2-256-etm@openssh.com,hmac-sha1",
  "umac-64-etm@openssh.com,hmac-sha2-256-etm@openssh.com,hmac-sha1",
  "none,zlib@openssh.com",
  "none,zlib@openssh.com",
  "",
  "",
}

-- A KEXINIT payload written out field by field (RFC 4253 section 7.1).
local function raw_kexinit(lists, tail)
  local parts = { "\20", "0123456789abcdef" }
  for _, l in ipairs(lists) do
    parts[#parts + 1] = string.pack(">I4", #l) .. l
  end
  parts[#parts + 1] = tail or "\0\0\0\0\0"
  return table.concat(parts)
end

-- A packet written out by hand: length, padding length, payload, padding.
local function raw_packet(payload, pad)
  pad = pad or 4
  return string.pack(">I4", 1 + #payload + pad) .. string.char(pad) .. payload .. string.rep("\0", pad)
end

-- A stream socket over fixed bytes (recv_exact, recv_until with "\n").
local function fake_sock(bytes)
  local pos = 1
  local s = { sent = {} }
  function s.send(_, data)
    s.sent[#s.sent + 1] = data
    return true
  end
  function s.recv_exact(_, n)
    if pos + n - 1 > #bytes then
      pos = #bytes + 1
      return nil, "closed"
    end
    local out = string.sub(bytes, pos, pos + n - 1)
    pos += n
    return out
  end
  function s.recv_until(_, pattern, max)
    assert(pattern == "\n")
    local window = string.sub(bytes, pos, pos + max - 1)
    local at = string.find(window, "\n", 1, true)
    if not at then
      return nil, #window >= max and ("no match in the first %d bytes"):format(max) or "closed"
    end
    pos += at
    return string.sub(window, 1, at)
  end
  return s
end

return {
  id = "ssh2-test",
  description = "Unit tests of the ssh2 library (version exchange, packets, KEXINIT name-lists).",
  categories = { "safe" },
  ports = { 1 },
  run = function(ctx)
    local n = 0
    local function check(cond, what)
      n += 1
      if not cond then
        error("check " .. n .. " failed: " .. tostring(what), 2)
      end
    end
    local function eq(got, want, what)
      check(got == want, (what or "") .. ": got " .. tostring(got) .. ", want " .. tostring(want))
    end

    -- Strings and name-lists.
    local s, p = ssh2.string_at("\0\0\0\3abcX", 1)
    eq(s, "abc", "string")
    eq(p, 8, "after string")
    eq(ssh2.string_at("\0\0\0\4abc", 1), nil, "string past the end")
    eq(ssh2.string_at("\0\0\0", 1), nil, "length cut short")
    eq(ssh2.string_at("\255\255\255\255", 1), nil, "huge string")
    eq(#ssh2.name_list(""), 0, "empty list")
    local l = ssh2.name_list("a,b,c")
    eq(#l, 3, "three names")
    eq(l[3], "c", "third")
    l = ssh2.name_list("a,,b,")
    eq(#l, 4, "empty names kept, as nmap's strsplit")
    eq(l[2], "", "empty name")
    eq(l[4], "", "trailing empty name")
    eq(#ssh2.name_list("x"), 1, "one name")
    local many, why = ssh2.name_list(string.rep("a,", 2000))
    check(many == nil and string.find(why, "1024", 1, true), "too many names")
    eq(#ssh2.name_list(string.rep("a,", 9), 10), 10, "at the bound")
    check(ssh2.has("a,bb,c", "bb"), "has")
    check(not ssh2.has("a,bbb,c", "bb"), "has is exact")

    -- Packets: the framing, known bytes.
    eq(hex(ssh2.packet("\21")), "0000000c0a15" .. string.rep("00", 10), "NEWKEYS packet")
    for len = 1, 40 do
      local pkt = ssh2.packet(string.rep("x", len))
      eq(#pkt % 8, 0, "multiple of 8")
      check(string.byte(pkt, 5) >= 4, "padding of at least 4")
      eq(ssh2.read_packet(fake_sock(pkt)), string.rep("x", len), "packet round trip " .. len)
    end

    -- Version exchange.
    local sock = fake_sock("SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u10\r\n")
    eq(ssh2.exchange_versions(sock, "SSH-2.0-test"), "SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u10", "version")
    eq(sock.sent[1], "SSH-2.0-test\r\n", "our version sent")
    eq(ssh2.exchange_versions(fake_sock("hello\r\nplease wait\nSSH-1.99-Cisco\n"), "x"), "SSH-1.99-Cisco", "lines before")
    local v, verr = ssh2.exchange_versions(fake_sock("SSH-1.5-old\r\n"), "x")
    check(v == nil and string.find(verr, "SSH-2", 1, true), "SSH-1 refused")
    v = ssh2.exchange_versions(fake_sock(string.rep("noise\n", 17) .. "SSH-2.0-late\n"), "x")
    eq(v, nil, "more than 16 lines before")
    v = ssh2.exchange_versions(fake_sock("SSH-2.0-" .. string.rep("a", 300) .. "\n"), "x")
    eq(v, nil, "version line over 255 bytes")
    eq(ssh2.exchange_versions(fake_sock(""), "x"), nil, "nothing")

    -- KEXINIT.
    local payload = raw_kexinit(LISTS)
    local kex, kerr = ssh2.parse_kexinit(payload)
    check(kex, kerr)
    eq(kex.cookie, "0123456789abcdef", "cookie")
    eq(kex.kex_algorithms, LISTS[1], "kex list")
    eq(kex.server_host_key_algorithms, LISTS[2], "host key list")
    eq(kex.mac_algorithms_server_to_client, LISTS[6], "mac list")
    eq(kex.languages_server_to_client, "", "languages")
    eq(kex.first_kex_packet_follows, false, "first_kex_packet_follows")
    eq(#ssh2.name_list(kex.kex_algorithms), 12, "twelve kex algorithms")
    eq(ssh2.name_list(kex.server_host_key_algorithms)[4], "ssh-ed25519", "fourth host key algorithm")
    check(ssh2.parse_kexinit(raw_kexinit(LISTS, "\1\0\0\0\0")).first_kex_packet_follows, "follows")
    -- ssh2.kexinit writes the same bytes.
    local named = { first_kex_packet_follows = false }
    for i, name in ipairs(ssh2.KEXINIT_LISTS) do
      named[name] = LISTS[i]
    end
    eq(ssh2.kexinit(named, "0123456789abcdef"), payload, "kexinit builder")
    for i = 0, #payload - 1 do
      local ok, got = pcall(ssh2.parse_kexinit, string.sub(payload, 1, i))
      check(ok and got == nil, "KEXINIT cut to " .. i)
    end
    eq(ssh2.parse_kexinit("\21" .. string.sub(payload, 2)), nil, "not KEXINIT")
    math.randomseed(3)
    for _ = 1, 300 do
      local b = { string.byte(payload, 1, 200) }
      b[math.random(1, #b)] = math.random(0, 255)
      local ok, e = pcall(ssh2.parse_kexinit, string.char(table.unpack(b)) .. string.sub(payload, 201))
      check(ok, "mutated KEXINIT raised " .. tostring(e))
    end

    -- Messages: IGNORE and DEBUG skipped, DISCONNECT a why.
    local ignore = raw_packet("\2" .. string.pack(">s4", "pad"))
    local debug = raw_packet("\4\0" .. string.pack(">s4s4", "hi", ""))
    local kind, got = ssh2.next_message(fake_sock(ignore .. debug .. raw_packet(payload, 7)))
    eq(kind, 20, "KEXINIT after IGNORE and DEBUG")
    eq(got, payload, "payload")
    local disc = raw_packet("\1" .. string.pack(">I4s4s4", 2, "Too many connections", ""))
    kind, got = ssh2.next_message(fake_sock(disc))
    check(kind == nil and string.find(got, "Too many connections", 1, true), "disconnect: " .. tostring(got))
    kind, got = ssh2.next_message(fake_sock(string.rep(ignore, 17) .. raw_packet(payload)))
    check(kind == nil and string.find(got, "IGNORE", 1, true), "too many IGNOREs")
    -- Bad packets.
    local function bad(bytes, what)
      local ok, k, e = pcall(ssh2.next_message, fake_sock(bytes))
      check(ok and k == nil and type(e) == "string", what)
    end
    bad("\255\255\255\255\4", "huge length")
    bad(string.pack(">I4", 35001) .. string.rep("\4", 100), "one past MAX_PACKET")
    bad("\0\0\0\5\4abcd", "length below 6")
    bad("\0\0\0\12\3" .. string.rep("\20", 11), "padding below 4")
    bad("\0\0\0\12\12" .. string.rep("\20", 11), "padding past the packet")
    bad(string.sub(raw_packet(payload), 1, 100), "cut short")
    bad("", "nothing")
    bad("SSH-2.0-again\r\n", "text, not a packet")
    eq(ssh2.read_packet(fake_sock(raw_packet("\20abc")), 8), nil, "over a caller's bound")

    -- Weak algorithms.
    local weak = ssh2.weak{
      kex_algorithms = { "curve25519-sha256", "diffie-hellman-group1-sha1", "diffie-hellman-group14-sha1",
        "diffie-hellman-group-exchange-sha1", "gss-gex-sha1-toWM5Slw5Ew8Mqkay+al2g==" },
      server_host_key_algorithms = { "rsa-sha2-512", "ssh-dss", "ssh-dss-cert-v01@openssh.com" },
      encryption_algorithms = { "aes128-ctr", "arcfour", "arcfour256", "3des-cbc", "rijndael-cbc@lysator.liu.se",
        "aes256-cbc", "aes128-cbc", "aes128-cbc", "none", string.rep("z", 500) .. "-cbc" },
      mac_algorithms = { "hmac-sha2-256", "hmac-md5", "hmac-md5-96-etm@openssh.com", "hmac-sha1-96", "none" },
      compression_algorithms = { "none" },
    }
    local by = {}
    for _, w in ipairs(weak) do
      by[w.what] = w
      check(w.severity and w.why and w.reference and w.option, "rule fields of " .. w.what)
    end
    eq(#weak, 9, "nine kinds of weak algorithm")
    local dep = by["deprecated key exchange methods"]
    eq(table.concat(dep.algorithms, " "), "diffie-hellman-group1-sha1 diffie-hellman-group-exchange-sha1 gss-gex-sha1-toWM5Slw5Ew8Mqkay+al2g==", "kex")
    eq(dep.severity, "medium", "kex severity")
    eq(dep.option, "KexAlgorithms", "kex option")
    eq(by["a SHA-1 key exchange"].severity, "low", "group14-sha1 is low")
    eq(#by["DSA host keys (ssh-dss)"].algorithms, 2, "ssh-dss and its certificate")
    eq(table.concat(by["RC4 ciphers (arcfour)"].algorithms, " "), "arcfour arcfour256", "arcfour")
    local cbc = by["CBC-mode ciphers"]
    eq(#cbc.algorithms, 5, "CBC ciphers, each once")
    eq(#cbc.algorithms[5], 103, "a long name cut")
    eq(cbc.cve, "CVE-2008-5161", "CBC CVE")
    eq(by["no encryption (cipher none)"].severity, "high", "cipher none")
    eq(table.concat(by["HMAC-MD5 MACs"].algorithms, " "), "hmac-md5 hmac-md5-96-etm@openssh.com", "md5")
    eq(by["truncated HMAC-SHA1-96 MACs"].algorithms[1], "hmac-sha1-96", "sha1-96")
    eq(by["no integrity protection (MAC none)"].option, "MACs", "mac none")
    eq(#ssh2.weak{ kex_algorithms = { "curve25519-sha256" }, encryption_algorithms = { "aes128-gcm@openssh.com" } }, 0, "nothing weak")
    local lots = {}
    for i = 1, 100 do
      lots[i] = "c" .. i .. "-cbc"
    end
    eq(#ssh2.weak{ encryption_algorithms = lots }[1].algorithms, 32, "at most 32 names")

    -- Fingerprint forms (Bubble Babble's published vectors; the art's frame).
    eq(ssh2.bubble_babble(""), "xexax", "bubble babble of nothing")
    eq(ssh2.bubble_babble("1234567890"), "xesef-disof-gytuf-katof-movif-baxux", "bubble babble, even length")
    eq(ssh2.bubble_babble("Pineapple"), "xigak-nyryk-humil-bosek-sonax", "bubble babble, odd length")
    local art = ssh2.random_art(string.rep("\0", 16), "RSA", 2048)
    eq(string.sub(art, 1, 19), "\n+--[ RSA 2048]----", "the art's frame")
    eq(select(2, string.gsub(art, "\n", "")), 12, "the art's lines")

    return "ok " .. n
  end,
}
