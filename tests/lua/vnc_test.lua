-- Unit tests of lib/vnc.lua on fixed bytes through fake sockets: RFB 3.8
-- and 3.3 handshakes, versions nmap's library does not know, refusals with
-- a reason, VeNCrypt subtypes, and every truncation of the streams.
-- Prints "ok N" (N assertions).

local vnc = require "vnc"

-- A socket that serves `bytes` and keeps what it is sent.
local function fake(bytes)
  local pos = 1
  return {
    sent = {},
    send = function(self, d)
      self.sent[#self.sent + 1] = d
      return true
    end,
    recv_line = function(_, max)
      local nl = string.find(bytes, "\n", pos, true)
      if not nl or nl - pos + 1 > max then
        return nil, nl and "no line end" or "closed"
      end
      local line = string.sub(bytes, pos, nl - 1)
      pos = nl + 1
      return (string.gsub(line, "\r$", ""))
    end,
    recv_exact = function(_, k)
      if pos + k - 1 > #bytes then
        return nil, "closed"
      end
      local out = string.sub(bytes, pos, pos + k - 1)
      pos += k
      return out
    end,
  }
end

-- Runs every check; returns how many passed (an assert stops it at the first failure).
local function tests()
  local n = 0
  local function check(cond, what)
    n += 1
    assert(cond, what)
  end

  -- RFB 3.8, VNC Authentication and VeNCrypt.
  local s38 = "RFB 003.008\n\2\2\19"
  local sock = fake(s38)
  local hs = vnc.handshake(sock)
  check(hs and hs.version == "3.8" and hs.client == "RFB 003.008", "3.8")
  check(sock.sent[1] == "RFB 003.008\n", "answered 3.8")
  check(#hs.types == 2 and hs.types[1] == 2 and hs.types[2] == 19, "types")
  check(vnc.has(hs.types, vnc.VENCRYPT) and not vnc.has(hs.types, vnc.NONE), "has")
  local named = vnc.named(hs.types, vnc.SECTYPES)
  check(named[1].name == "VNC Authentication" and named[2].name == "VeNCrypt" and named[2].type == 19, "named")
  check(vnc.named({ 99 }, vnc.SECTYPES)[1].name == "Unknown security type", "unknown type")

  -- RFB 3.3: the server picks one type.
  sock = fake("RFB 003.003\n\0\0\0\2")
  hs = vnc.handshake(sock)
  check(hs and hs.version == "3.3" and #hs.types == 1 and hs.types[1] == 2, "3.3")
  local r, err = vnc.handshake(fake("RFB 003.003\n\0\0\0\0\0\0\0\5nope!"))
  check(r == nil and err == "server refused: nope!", "3.3 refusal")

  -- Versions nmap's library does not know.
  sock = fake("RFB 004.001\n\1\1")
  hs = vnc.handshake(sock)
  check(hs and hs.version == "004.001" and sock.sent[1] == "RFB 003.889\n", "newer version")
  sock = fake("RFB 003.005\n\0\0\0\1")
  hs = vnc.handshake(sock)
  check(hs and hs.version == "003.005" and hs.client == "RFB 003.003" and hs.types[1] == 1, "3.5 as 3.3")
  sock = fake("RFB 002.000\n\1\2")
  hs = vnc.handshake(sock)
  check(hs and sock.sent[1] == "RFB 002.000\n", "older version echoed")

  -- Refusals and garbage.
  r, err = vnc.handshake(fake("RFB 003.008\n\0\0\0\0\12Too many try"))
  check(r == nil and err == "server refused: Too many try", "refusal with reason")
  r, err = vnc.handshake(fake("RFB 003.008\n\0\255\255\255\255" .. string.rep("x", 2000)))
  check(r == nil and #err == #"server refused: " + 1024, "reason bounded")
  r, err = vnc.handshake(fake("RFB 003.008\n\0\0\0\0\9short"))
  check(r == nil and string.find(err, "cut short"), "reason cut short")
  r, err = vnc.handshake(fake("220 ftp ready\r\n"))
  check(r == nil and err == "not a VNC port", "not VNC")
  r, err = vnc.handshake(fake("SSH-2.0-OpenSSH_9.2\r\n"))
  check(r == nil and string.find(err, "no RFB version"), "no line end in 16 bytes")
  r, err = vnc.handshake(fake(string.rep("A", 100) .. "\n"))
  check(r == nil, "long line")
  for cut = 0, #s38 - 1 do
    local ok, h, e = pcall(vnc.handshake, fake(string.sub(s38, 1, cut)))
    check(ok and h == nil and type(e) == "string", "3.8 cut at " .. cut)
  end

  -- VeNCrypt 0.2 with three subtypes.
  local ve = "\0\2\0\3" .. string.pack(">I4I4I4", 256, 261, 300)
  sock = fake(ve)
  local sub = vnc.vencrypt(sock)
  check(sub and #sub == 3 and sub[1] == 256 and sub[2] == 261 and sub[3] == 300, "subtypes")
  check(sock.sent[1] == "\0\2", "asked for 0.2")
  named = vnc.named(sub, vnc.VENCRYPT_SUBTYPES)
  check(named[2].name == "VNC auth, Server-authenticated TLS" and named[3].name == "Unknown security type", "subtype names")
  r, err = vnc.vencrypt(fake("\0\1"))
  check(r == nil and err == "Unknown VeNCrypt version: 0.1", "old VeNCrypt")
  r, err = vnc.vencrypt(fake("\0\2\1"))
  check(r == nil and string.find(err, "refused"), "version refused")
  r, err = vnc.vencrypt(fake("\0\2\0\0"))
  check(r == nil and string.find(err, "No VeNCrypt"), "no subtypes")
  for cut = 0, #ve - 1 do
    local ok, v, e = pcall(vnc.vencrypt, fake(string.sub(ve, 1, cut)))
    check(ok and v == nil and type(e) == "string", "VeNCrypt cut at " .. cut)
  end
  return n
end

return {
  id = "vnc-test",
  description = "Unit tests of lib/vnc.lua.",
  categories = { "safe" },
  ports = { 5900 },
  run = function()
    return "ok " .. tests()
  end,
}
