-- ajp_test: unit tests of lib/ajp.lua (AJP13), run offline with
-- `moonscan plugins test tests/lua/ajp_test.lua --plugin-dir plugins`.

local ajp = require "ajp"

local passed = 0
local function check(cond, what)
  assert(cond, what)
  passed += 1
end

-- A socket holding `data` to read; what is sent is kept in `sent`.
local function fake(data)
  local pos, sent = 1, {}
  local sock = { sent = sent }
  function sock:send(s)
    sent[#sent + 1] = s
    return true
  end
  function sock:recv_exact(n)
    if pos + n - 1 > #data then
      return nil, errors.new("closed", "closed after " .. (#data - pos + 1) .. " of " .. n .. " bytes")
    end
    local s = string.sub(data, pos, pos + n - 1)
    pos += n
    return s
  end
  return sock
end

local function packet(body)
  return "AB" .. string.pack(">s2", body)
end

-- SEND_HEADERS: 200 "OK", Allow (by name) and Content-Type (by code).
local HEADERS = packet("\4" .. string.pack(">I2s2", 200, "OK") .. "\0" .. string.pack(">I2", 2)
  .. string.pack(">I2", 5) .. "Allow\0" .. string.pack(">s2", "GET, HEAD, POST, PUT, OPTIONS") .. "\0"
  .. string.pack(">I2", 0xA001) .. string.pack(">s2", "text/plain") .. "\0")
local END = packet("\5\1")

return {
  id = "ajp-test",
  description = "Unit tests of the ajp library.",
  categories = { "safe" },
  ports = { 8009 },
  run = function()
    check(ajp.string("") == "\255\255" and ajp.string(nil) == "\255\255", "the null string")
    check(ajp.string("ab") == "\0\2ab\0", "a string: length, bytes, NUL")
    local ctx = { ip = "198.18.0.2", port = 8009, service = "ajp13" }
    local req = ajp.forward_request(ctx, "/")
    check(req:sub(1, 2) == "\18\52" and string.unpack(">I2", req, 3) == #req - 4, "magic and length")
    check(req:sub(5, 6) == "\2\1", "FORWARD_REQUEST, OPTIONS")
    check(req:find("\0\8HTTP/1.1\0\0\1/\0", 1, true) ~= nil, "protocol and URI")
    check(req:sub(-1) == "\255", "no more attributes")
    local r = ajp.exchange(fake(HEADERS .. packet("\3\0\0") .. END), req, os.clock() + 10)
    check(r.status == 200 and r.message == "OK", "status and message")
    check(r.headers.allow == "GET, HEAD, POST, PUT, OPTIONS" and r.headers["content-type"] == "text/plain",
      "headers by name and by code, lower-cased")
    local s = fake(END)
    r = ajp.exchange(s, req, os.clock() + 10)
    check(next(r) == nil and s.sent[1] == req, "END_RESPONSE alone; the request was sent")
    local _, why = ajp.exchange(fake("XY\0\1\5"), req, os.clock() + 10)
    check(why == 'invalid magic "XY"', "bad magic: " .. tostring(why))
    _, why = ajp.exchange(fake("AB\0\0"), req, os.clock() + 10)
    check(why == "empty packet", "an empty packet")
    _, why = ajp.exchange(fake("AB\0\9\4"), req, os.clock() + 10)
    check(why == "receive: closed after 1 of 9 bytes", "cut short: " .. tostring(why))
    _, why = ajp.exchange(fake(packet("\4\0")), req, os.clock() + 10)
    check(string.find(why, "bad SEND_HEADERS: ", 1, true) == 1, "a bad SEND_HEADERS")
    _, why = ajp.exchange(fake(string.rep(packet("\3\0\0"), ajp.MAX_PACKETS + 1)), req, os.clock() + 10)
    check(why == "more than 64 packets", "too many packets")
    _, why = ajp.exchange(fake(END), req, os.clock() - 1)
    check(why == "too slow", "past the deadline")
    return "ok " .. passed
  end,
}
