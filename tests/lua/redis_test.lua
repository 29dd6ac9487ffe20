-- redis_test: unit tests of lib/redis.lua (RESP), run offline with
-- `moonscan plugins test tests/lua/redis_test.lua --plugin-dir plugins`.

local redis = require "redis"

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
  function sock:recv_until(_, max)
    local at = string.find(data, "\r\n", pos, true)
    if not at or at + 1 - pos + 1 > max then
      return nil, errors.new("protocol", "no match in the first " .. max .. " bytes")
    end
    local s = string.sub(data, pos, at + 1)
    pos = at + 2
    return s
  end
  function sock:recv_exact(n)
    if pos + n - 1 > #data then
      return nil, errors.new("closed", "closed after " .. (#data - pos + 1) .. " of " .. n .. " bytes")
    end
    local s = string.sub(data, pos, pos + n - 1)
    pos += n
    return s
  end
  function sock:recv(n)
    if pos > #data then
      return nil, errors.new("closed", "closed")
    end
    local s = string.sub(data, pos, pos + n - 1)
    pos += #s
    return s
  end
  return sock
end

return {
  id = "redis-test",
  description = "Unit tests of the redis library (RESP).",
  categories = { "safe" },
  ports = { 6379 },
  run = function()
    local s = fake("+OK\r\n")
    local r = redis.command(s, "CONFIG", "GET", "bind")
    check(s.sent[1] == "*3\r\n$6\r\nCONFIG\r\n$3\r\nGET\r\n$4\r\nbind\r\n", "a command is a RESP array")
    check(r.kind == "+" and r.data == "OK", "a simple string")
    r = redis.read_reply(fake("-NOAUTH Authentication required.\r\n"))
    check(r.kind == "-" and r.data == "NOAUTH Authentication required.", "an error reply")
    r = redis.read_reply(fake(":42\r\n"))
    check(r.kind == ":" and r.data == "42", "an integer")
    r = redis.read_reply(fake("$5\r\nhello\r\n"))
    check(r.kind == "$" and r.data == "hello" and r.length == 5 and not r.truncated, "a bulk string")
    r = redis.read_reply(fake("$-1\r\n"))
    check(r.kind == "$" and r.data == nil, "a null bulk string")
    r = redis.read_reply(fake("*2\r\n$4\r\nbind\r\n$9\r\n127.0.0.1\r\n"))
    check(r.kind == "*" and r.data[1] == "bind" and r.data[2] == "127.0.0.1", "an array")
    r = redis.read_reply(fake("$10\r\nabc"))
    check(r.truncated and r.data == "abc" and r.length == 10, "a bulk string cut short keeps what came")
    local big = redis.MAX_BULK + 10
    r = redis.read_reply(fake("$" .. big .. "\r\n" .. string.rep("x", redis.MAX_BULK) .. "\r\n"))
    check(r.truncated and #r.data == redis.MAX_BULK and r.length == big, "a bulk string over the bound is cut")
    local _, err = redis.read_reply(fake("*1\r\n*1\r\n*1\r\n:1\r\n"))
    check(err == "array too large or too deep", "arrays nest at most two deep")
    _, err = redis.read_reply(fake("*" .. (redis.MAX_ITEMS + 1) .. "\r\n"))
    check(err == "array too large or too deep", "an array over the bound")
    _, err = redis.read_reply(fake("HTTP/1.1 400 Bad Request\r\n"))
    check(err == "not a Redis reply: HTTP/1.1 400 Bad Request", "not RESP")
    _, err = redis.read_reply(fake(string.rep("a", 2000)))
    check(err == "no match in the first 1024 bytes", "no line end: " .. tostring(err))
    local kv = redis.parse_info("# Server\r\nredis_version:7.0.11\r\nos:Linux 6.1 x86_64\r\nnot a pair\r\n")
    check(kv.redis_version == "7.0.11" and kv.os == "Linux 6.1 x86_64", "INFO's fields")
    local parts = redis.split_spaces("a  b")
    check(#parts == 3 and parts[2] == "", "split on every single space")
    check(redis.ip_key("10.0.0.1") < redis.ip_key("10.0.0.2"), "IPv4 keys sort")
    check(redis.ip_key("::1") ~= nil and #redis.ip_key("2001:db8::1") == 17, "IPv6 keys")
    check(redis.ip_key("300.0.0.1") == nil and redis.ip_key("nonsense") == nil, "not addresses")
    local ex = redis.extras(0)
    local bind = ex[1][3]({ "bind", "127.0.0.1 " })
    check(ex[1][1] == "Bind addresses" and bind[1] == "127.0.0.1" and bind[2] == "0.0.0.0", "bind addresses")
    local clients = ex[3][3]("id=3 addr=10.0.0.2:5000 fd=8\nid=4 addr=10.0.0.1:6000 fd=9\nid=5 addr=10.0.0.2:7000\n")
    check(#clients == 2 and clients[1] == "10.0.0.1" and clients[2] == "10.0.0.2", "client addresses, once each, sorted")
    local nodes = ex[4][3]("07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:30004@31004 slave e7d1 0 1 4 connected\n")
    check(nodes[1] == "127.0.0.1:30004 (slave)", "cluster nodes")
    return "ok " .. passed
  end,
}
