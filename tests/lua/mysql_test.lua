-- Unit tests of lib/mysql.lua on fixed bytes: what the lab's MariaDB
-- (198.18.0.5:3306) sends to the scanner's address, captured with a python
-- socket inside `ip netns exec msscan` (it refuses the host: an ERR packet
-- as greeting); two real protocol 10 greetings (MariaDB 10.11.6 and MySQL
-- 8.0.36, as recorded in tests/data/banners); logins against a fake socket;
-- and every truncation of the greetings plus pseudo-random garbage, which
-- must give nil, why and never raise an error.
local mysql = require "mysql"

-- The lab's MariaDB, 2026-11-25: ERR 1130 in place of a greeting.
local LAB = "\x45\x00\x00\x00\xFF\x6A\x04\x48\x6F\x73\x74\x20\x27\x31\x39\x38\x2E\x31\x38\x2E\x30\x2E\x31\x27\x20\x69\x73"
  .. "\x20\x6E\x6F\x74\x20\x61\x6C\x6C\x6F\x77\x65\x64\x20\x74\x6F\x20\x63\x6F\x6E\x6E\x65\x63\x74\x20\x74\x6F\x20\x74"
  .. "\x68\x69\x73\x20\x4D\x61\x72\x69\x61\x44\x42\x20\x73\x65\x72\x76\x65\x72"
-- MariaDB 10.11.6 (Debian 12), mysql_native_password.
local MARIADB = "\x63\x00\x00\x00\x0A\x35\x2E\x35\x2E\x35\x2D\x31\x30\x2E\x31\x31\x2E\x36\x2D\x4D\x61\x72\x69\x61\x44"
  .. "\x42\x2D\x30\x2B\x64\x65\x62\x31\x32\x75\x31\x00\x1F\x00\x00\x00\x1D\x2F\x49\x0B\x6C\x3A\x15\x60\x00\xFE\xF7\x2D"
  .. "\x02\x00\xBF\x81\x15\x00\x00\x00\x00\x00\x00\x1D\x00\x00\x00\x33\x59\x22\x47\x6C\x53\x67\x2B\x41\x7A\x3E\x58\x00"
  .. "\x6D\x79\x73\x71\x6C\x5F\x6E\x61\x74\x69\x76\x65\x5F\x70\x61\x73\x73\x77\x6F\x72\x64\x00"
-- MySQL 8.0.36, caching_sha2_password.
local MYSQL8 = "\x4A\x00\x00\x00\x0A\x38\x2E\x30\x2E\x33\x36\x00\x0D\x00\x00\x00\x1D\x2F\x49\x0B\x6C\x3A\x15\x60\x00\xFF"
  .. "\xFF\xFF\x02\x00\xFF\xDF\x15\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x05\x61\x3B\x7E\x2C\x55\x12\x4F\x6D\x31\x0A"
  .. "\x44\x00\x63\x61\x63\x68\x69\x6E\x67\x5F\x73\x68\x61\x32\x5F\x70\x61\x73\x73\x77\x6F\x72\x64\x00"

-- A socket that replays `data` (then says "closed") and keeps what is sent.
local function fake(data)
  local s = { data = data, sent = {} }
  function s:recv_exact(n)
    if #self.data < n then
      return nil, "closed after " .. #self.data .. " of " .. n .. " bytes"
    end
    local out = string.sub(self.data, 1, n)
    self.data = string.sub(self.data, n + 1)
    return out
  end
  function s:recv(max)
    if self.data == "" then
      return nil, "closed"
    end
    local out = string.sub(self.data, 1, max)
    self.data = string.sub(self.data, max + 1)
    return out
  end
  function s:send(bytes)
    self.sent[#self.sent + 1] = bytes
    return true
  end
  function s:close() end
  return s
end

local function packet(payload, seq)
  return string.pack("<I3B", #payload, seq) .. payload
end

return {
  id = "mysql-test",
  description = "Unit tests of the mysql library module.",
  categories = { "safe" },
  ports = { 1 },
  run = function(ctx)
    local n = 0
    local function check(cond, what)
      assert(cond, what)
      n += 1
    end

    -- The lab's refusal.
    local p, seq, short = mysql.split(LAB)
    check(p and seq == 0 and short == false and #p == 69, "split the lab's packet")
    local g = mysql.decode_greeting(p)
    check(g.protocol == 255 and g.error_code == 1130 and g.sqlstate == nil, "lab ERR 1130")
    check(g.message == "Host '198.18.0.1' is not allowed to connect to this MariaDB server", "lab message")
    check(mysql.decode_greeting(p).version == nil, "an error has no version")

    -- MariaDB 10.11.6.
    p, seq, short = mysql.split(MARIADB)
    g = mysql.decode_greeting(p)
    check(g and g.protocol == 10 and g.version == "5.5.5-10.11.6-MariaDB-0+deb12u1", "mariadb version")
    check(g.thread_id == 31 and g.capabilities == 63486 and g.ext_capabilities == 0x81BF, "mariadb ids and flags")
    check(g.charset == 45 and g.status == 2, "mariadb charset and status")
    check(g.salt == "\x1D/I\x0Bl:\x15`3Y\"GlSg+Az>X" and #g.salt == 20, "mariadb salt: 8 + 12 bytes")
    check(g.auth_plugin == "mysql_native_password", "mariadb auth plugin")
    local names = mysql.capability_names(g.capabilities, g.ext_capabilities)
    check(names[1] == "FoundRows" and names[#names] == "SupportsAuthPlugins" and #names == 17, "capability names")
    check(mysql.printable(g.salt) == "\\x1D/I\\x0Bl:\\x15`3Y\"GlSg+Az>X", "printable salt")
    check(mysql.printable("a\tb\r\n\0\127\255") == "a\tb\r\n\\x00\\x7F\\xFF", "printable keeps tab, CR, LF")

    -- MySQL 8.
    g = mysql.decode_greeting((mysql.split(MYSQL8)))
    check(g.version == "8.0.36" and g.thread_id == 13 and g.capabilities == 0xFFFF, "mysql 8 greeting")
    check(g.charset == 255 and g.ext_capabilities == 0xDFFF and g.auth_plugin == "caching_sha2_password", "mysql 8 ext")
    check(#mysql.capability_names(0xFFFF, 0xDFFF) == 19, "all 16 + 3 names")
    check(#mysql.capability_names(0, 0) == 0 and #mysql.capability_names(nil, nil) == 0, "no names")

    -- Other greetings: protocol 9, protocol 10 without the 4.1 part, an ERR with SQLSTATE.
    g = mysql.decode_greeting("\x093.23.58\0" .. string.pack("<I4", 77) .. "abcdefgh\0")
    check(g.protocol == 9 and g.version == "3.23.58" and g.thread_id == 77 and g.salt == nil, "protocol 9")
    g = mysql.decode_greeting("\x0a5.0.1\0" .. string.pack("<I4", 5) .. "12345678\0" .. string.pack("<I2", 0x222c))
    check(g.salt == "12345678" and g.capabilities == 0x222c and g.status == nil, "protocol 10, short form")
    g = mysql.decode_greeting("\xff\x15\x04#28000Access denied")
    check(g.error_code == 1045 and g.sqlstate == "28000" and g.message == "Access denied", "ERR with SQLSTATE")
    g = mysql.decode_greeting("\xff\x15\x04" .. string.rep("x", 1000))
    check(#g.message == 300, "error message bounded")

    -- Refused: wrong protocol, long version, empty, cut ERR.
    local bad, why = mysql.decode_greeting("\x085.0\0abcd")
    check(bad == nil and string.find(why, "protocol version 8", 1, true), "protocol 8 refused")
    check(mysql.decode_greeting("\x0a" .. string.rep("9", 300) .. "\0" .. string.rep("\0", 20)) == nil, "version > 255")
    check(mysql.decode_greeting("") == nil and mysql.decode_greeting(nil) == nil, "empty greeting")
    check(mysql.decode_greeting("\xff\x01") == nil, "ERR cut short")

    -- split: bounds.
    check(mysql.split("\x01\0\0\0") == nil, "header only")
    check(mysql.split("\0\0\0\0\0") == nil, "zero length")
    check(mysql.split("\x29\x23\0\0" .. string.rep("x", 20)) == nil, "9001 bytes > MAX_PACKET")
    check(mysql.split("\x29\x23\0\0x", 10000) ~= nil, "a larger max")
    p, seq, short = mysql.split(string.sub(MARIADB, 1, 40))
    check(p and #p == 36 and short == true, "cut packet: what came, flagged")
    check(mysql.split(nil) == nil and mysql.split(42) == nil, "not a string")

    -- Every truncation of the greetings: nil, why or a partial decode, never an error.
    for _, full in ipairs({ MARIADB, MYSQL8, LAB }) do
      for i = 0, #full - 1 do
        local ok, res = pcall(function()
          local q = mysql.split(string.sub(full, 1, i))
          return q and mysql.decode_greeting(q)
        end)
        check(ok, "truncation at " .. i .. " raised " .. tostring(res))
      end
    end
    check(mysql.decode_greeting(string.sub(MARIADB, 5, 60)) == nil, "greeting cut inside the scramble")
    check(mysql.decode_greeting(string.sub(MARIADB, 5, -2)) == nil, "plugin name without its NUL")

    -- Garbage (a fixed pseudo-random sequence): no error from any decoder.
    local x = 12345
    for _ = 1, 300 do
      local bytes = {}
      for j = 1, x % 90 do
        x = (x * 1103515245 + 12345) % 2147483648
        bytes[j] = string.char(x % 256)
      end
      local junk = table.concat(bytes)
      for _, first in ipairs({ "", "\x0a", "\xff", "\xfe", "\0", "\x09" }) do
        local ok = pcall(function()
          mysql.decode_greeting(first .. junk)
          mysql.decode_result(first .. junk)
          mysql.split(first .. junk)
          mysql.read_packet(fake(first .. junk))
        end)
        check(ok, "garbage raised an error")
      end
    end

    -- read_packet on a socket.
    local s = fake(MARIADB .. LAB)
    p, seq, short = mysql.read_packet(s)
    check(p == string.sub(MARIADB, 5) and seq == 0 and short == false, "read the greeting")
    p = mysql.read_packet(s)
    check(mysql.decode_greeting(p).error_code == 1130, "then the next packet")
    p, why = mysql.read_packet(s)
    check(p == nil and string.find(why, "no packet", 1, true), "then nothing")
    p, seq, short = mysql.read_packet(fake(string.sub(MARIADB, 1, 50)))
    check(#p == 46 and short == true, "cut short: what came")
    check(mysql.read_packet(fake("\x63\0\0\0")) == nil, "header, no payload")
    check(mysql.read_packet(fake("\xff\xff\xff\0" .. string.rep("x", 100))) == nil, "16 MB packet refused")
    check(mysql.read_packet(fake("\x20\0")) == nil, "half a header")

    -- HandshakeResponse41 for an empty password.
    local want = "\x85\xA6\x0B\x00\x00\x00\x00\x01\x08" .. string.rep("\0", 23) .. "root\0\0mysql_native_password\0"
    check(mysql.handshake_response("root", true) == want, "response with plugin auth")
    want = "\x85\xA6\x03\x00\x00\x00\x00\x01\x08" .. string.rep("\0", 23) .. "\0\0"
    check(mysql.handshake_response("", false) == want, "anonymous, no plugin auth (as nmap)")

    -- OK / ERR / AuthSwitchRequest.
    local r = mysql.decode_result("\0\0\0\2\0\0\0")
    check(r.ok and r.affected_rows == 0 and r.insert_id == 0 and r.status == 2 and r.warnings == 0, "OK")
    r = mysql.decode_result("\0\xFC\x01\x02\xFD\x01\x00\x01\2\0\1\0")
    check(r.ok and r.affected_rows == 0x201 and r.insert_id == 0x10001 and r.warnings == 1, "OK, lenenc ints")
    r = mysql.decode_result("\0\xFE\1\0\0\0\1\0\0\0\0")
    check(r.ok and r.affected_rows == 2 ^ 32 + 1 and r.insert_id == 0, "OK, 8-byte int")
    check(mysql.decode_result("\0\xFC\x01") == nil and mysql.decode_result("\0\xFB") == nil, "OK cut or bad")
    r = mysql.decode_result("\0\0\0")
    check(r.ok and r.status == nil, "OK without status (pre-4.1)")
    r = mysql.decode_result("\xff\x15\x04#28000Access denied for user 'root'@'198.18.0.1' (using password: NO)")
    check(r.ok == false and r.error_code == 1045 and r.sqlstate == "28000", "ERR 1045")
    check(string.sub(r.message, 1, 13) == "Access denied", "ERR message")
    r = mysql.decode_result("\xfecaching_sha2_password\0" .. string.rep("s", 20) .. "\0")
    check(r.switch and r.plugin == "caching_sha2_password" and #r.data == 21, "auth switch")
    r = mysql.decode_result("\xfe")
    check(r.switch and r.plugin == "" and r.data == "", "old-style switch")
    check(mysql.decode_result("\x05abc") == nil and mysql.decode_result("") == nil, "not OK/ERR")

    -- login over a fake socket.
    local mg = mysql.decode_greeting(string.sub(MARIADB, 5))
    s = fake(packet("\0\0\0\2\0\0\0", 2))
    r = mysql.login(s, mg, "root")
    check(r and r.ok, "login accepted")
    check(s.sent[1] == packet(mysql.handshake_response("root", true), 1), "sent the response, sequence 1")
    s = fake(packet("\xff\x15\x04#28000Access denied for user ''@'198.18.0.1'", 2))
    r = mysql.login(s, mg, "")
    check(r and r.ok == false and r.error_code == 1045, "login refused")
    s = fake(packet("\xfecaching_sha2_password\0" .. string.rep("s", 20) .. "\0", 2) .. packet("\0\0\0\2\0\0\0", 4))
    r = mysql.login(s, mg, "root")
    check(r and r.ok and s.sent[2] == packet("\0", 3), "switch to caching_sha2 answered with a NUL")
    s = fake(packet("\xfemysql_native_password\0" .. string.rep("s", 20) .. "\0", 2) .. packet("\0\0\0\2\0\0\0", 4))
    r = mysql.login(s, mg, "root")
    check(r and r.ok and s.sent[2] == packet("", 3), "switch to native answered empty")
    s = fake(packet("\xfeauth_gssapi_client\0x", 2))
    r, why = mysql.login(s, mg, "root")
    check(r == nil and string.find(why, "auth_gssapi_client", 1, true) and #s.sent == 1, "unknown plugin: no answer")
    s = fake(packet("\xfe", 2) .. packet("\xfe", 4))
    r, why = mysql.login(s, mg, "root")
    check(r == nil and string.find(why, "second", 1, true), "two switches refused")
    r, why = mysql.login(fake(""), mg, "root")
    check(r == nil and string.find(why, "no packet", 1, true), "no answer")
    check(mysql.login(fake(""), { capabilities = 0 }, "root") == nil, "pre-4.1 server")
    return "ok " .. n
  end,
}
