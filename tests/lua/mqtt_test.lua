-- mqtt_test: unit tests of lib/mqtt.lua, run offline with
-- `moonscan plugins test tests/lua/mqtt_test.lua --plugin-dir plugins`.

local mqtt = require "mqtt"

local passed = 0
local function check(cond, what)
  assert(cond, what)
  passed += 1
end

-- A socket whose reads give `chunks` one by one, then time out.
local function fake(chunks)
  local i, sent = 0, {}
  local sock = { sent = sent, timeouts = {} }
  function sock:send(s)
    sent[#sent + 1] = s
    return true
  end
  function sock:set_timeout(ms)
    self.timeouts[#self.timeouts + 1] = ms
    return true
  end
  function sock:recv()
    i += 1
    local c = chunks[i]
    if c == nil then
      return nil, errors.new("timeout", "timeout")
    elseif type(c) == "table" then
      return nil, c[1]
    end
    return c
  end
  return sock
end

local function publish(topic, payload)
  return mqtt.packet(3, 0, string.pack(">s2", topic) .. payload)
end

local CONNACK = mqtt.packet(2, 0, "\0\0")
local SUBACK = mqtt.packet(9, 0, "\0\1\0\0")
local PINGRESP = mqtt.packet(13, 0, "")

return {
  id = "mqtt-test",
  description = "Unit tests of the mqtt library.",
  categories = { "safe" },
  ports = { 1883 },
  run = function()
    check(mqtt.packet(12, 0, "") == "\192\0", "PINGREQ")
    check(mqtt.packet(3, 0, string.rep("x", 200)):sub(1, 3) == "\48\200\1", "a two-byte length")
    local id = mqtt.client_id()
    check(#id == 20 and id:sub(1, 4) == "nmap" and not id:find("[^%a]"), "nmap's client id")

    -- A packet split over reads, two in one read.
    local next_packet, quiet = mqtt.reader(fake({ "\32", "\2\0\0" .. PINGRESP }), os.clock() + 10)
    local t, _, body = next_packet()
    check(t == 2 and body == "\0\0", "a packet read in pieces")
    check(next_packet() == 13, "the next packet of the same read")
    -- Once quiet, a read that times out ends listening.
    quiet(true)
    local none, why = next_packet()
    check(none == nil and why.kind == "timeout" and tostring(why) == "quiet", "quiet")
    -- Past the deadline: a timeout.
    next_packet = mqtt.reader(fake({}), os.clock() - 1)
    none, why = next_packet()
    check(none == nil and why.kind == "timeout" and tostring(why) == "timeout", "past the deadline")
    -- Another error of the socket is its text.
    next_packet = mqtt.reader(fake({ { errors.new("closed", "closed") } }), os.clock() + 10)
    none, why = next_packet()
    check(why == "closed", "the socket's error")
    -- Bad lengths.
    next_packet = mqtt.reader(fake({ "\48\255\255\255\255\1" }), os.clock() + 10)
    none, why = next_packet()
    check(why == "malformed remaining length", "five length bytes")
    next_packet = mqtt.reader(fake({ "\48\255\255\127" }), os.clock() + 10)
    none, why = next_packet()
    check(why == "packet of 2097151 bytes", "a packet over the bound: " .. tostring(why))

    -- A session: CONNACK, a retained message before the SUBACK, then messages and PINGRESP.
    local sock = fake({ CONNACK, publish("early", "e") .. SUBACK, publish("$SYS/broker/version", "mosquitto version 2.0.11"),
      publish("a/b", "1") .. publish("a/b", "2") .. PINGRESP })
    local np, q = mqtt.reader(sock, os.clock() + 10)
    local topics, msgs, stop = mqtt.listen(sock, np, q, { "$SYS/#", "#" })
    check(topics and msgs == 3 and topics["a/b"] == "2" and topics.early == nil, "the latest payload of each topic")
    check(topics["$SYS/broker/version"] == "mosquitto version 2.0.11", "the version topic")
    check(stop.kind == "timeout" and tostring(stop) == "quiet", "listening ends in quiet")
    check(sock.sent[1]:byte(1) == 16 and sock.sent[2]:byte(1) == 130 and sock.sent[3] == "\192\0", "CONNECT, SUBSCRIBE, PINGREQ")
    check(sock.timeouts[1] == mqtt.FIRST and sock.timeouts[2] == mqtt.QUIET, "the silences")
    -- Refused.
    sock = fake({ mqtt.packet(2, 0, "\0\5") })
    np, q = mqtt.reader(sock, os.clock() + 10)
    local _, err = mqtt.listen(sock, np, q, { "#" })
    check(err == "Connection rejected: Not Authorized", "CONNACK refused")
    sock = fake({ SUBACK })
    np, q = mqtt.reader(sock, os.clock() + 10)
    _, err = mqtt.listen(sock, np, q, { "#" })
    check(err == "Received control packet type 'SUBACK' instead of 'CONNACK'.", "not a CONNACK")
    sock = fake({ CONNACK, mqtt.packet(9, 0, "\0\1\128") })
    np, q = mqtt.reader(sock, os.clock() + 10)
    _, err = mqtt.listen(sock, np, q, { "#" })
    check(err == "Every topic filter was rejected.", "every filter rejected")
    return "ok " .. passed
  end,
}
