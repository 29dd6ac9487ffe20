-- mqtt: MQTT 3.1.1 (OASIS standard, section 3) as nmap's mqtt-subscribe
-- speaks it: packets, a reader of whole packets, and a session that
-- connects, subscribes and listens.
--
--   local mqtt = require "mqtt"
--   local next_packet, quiet = mqtt.reader(sock, deadline)
--   local topics, msgs, why = mqtt.listen(sock, next_packet, quiet, { "$SYS/#", "#" })
--
-- A packet is a type byte, a length of one to four 7-bit bytes, and a
-- body; a PUBLISH body is the topic (two-byte length and bytes), then the
-- payload. listen sends CONNECT (protocol "MQTT", level 4, client id "nmap"
-- and 16 letters, keep-alive 30 s), expects a CONNACK that accepts it,
-- then SUBSCRIBE to the filters at QoS 0, and collects the PUBLISH packets
-- that come, keeping each topic's most recent payload. A broker sends its
-- retained messages at once after the SUBACK, so listening ends as soon as
-- they have come: a PINGREQ sent after the SUBACK is answered after them
-- (mosquitto handles a client's packets in order), and listening ends
-- mqtt.QUIET ms after its PINGRESP with nothing more; else after
-- mqtt.FIRST ms of silence, or MAX_MSGS messages, or MAX_BYTES bytes, or
-- at the reader's deadline. Its errors are nmap's words.

local mqtt = {}

mqtt.FIRST = 1000 -- ms of silence that end listening before the PINGRESP
mqtt.QUIET = 150 -- ms of silence that end listening after it
mqtt.MAX_MSGS = 100 -- nmap's listen-msgs default
mqtt.MAX_BYTES = 256 * 1024 -- all packets read
mqtt.MAX_PACKET = 64 * 1024

mqtt.CONNACK_REASONS = {
  "Unacceptable Protocol Version", "Client Identifier Rejected", "Server Unavailable",
  "Bad User Name or Password", "Not Authorized",
}
mqtt.TYPE_NAMES = {
  "CONNECT", "CONNACK", "PUBLISH", "PUBACK", "PUBREC", "PUBREL", "PUBCOMP", "SUBSCRIBE",
  "SUBACK", "UNSUBSCRIBE", "UNSUBACK", "PINGREQ", "PINGRESP", "DISCONNECT",
}

-- A reader of whole packets from `sock`: next() gives the type, flags and
-- body of one, or nil, why: an error of kind "timeout" when none came by
-- `deadline` (os.clock() seconds) or when, once quiet(true) was called, a
-- read waited its socket's whole timeout for nothing (message "quiet");
-- else the socket's error or what is wrong with the bytes.
function mqtt.reader(sock, deadline)
  local quiet = false
  local buf, total = "", 0
  -- Type, flags, body and the bytes it took, when `buf` holds a whole packet.
  local function parse()
    if #buf < 2 then
      return nil
    end
    local len, mult, pos = 0, 1, 2
    repeat
      if pos > #buf then
        return nil
      end
      if pos > 5 then
        error("malformed remaining length", 0)
      end
      local b = string.byte(buf, pos)
      len += (b % 128) * mult
      mult *= 128
      pos += 1
    until b < 128
    if len > mqtt.MAX_PACKET then
      error("packet of " .. len .. " bytes", 0)
    end
    if #buf < pos - 1 + len then
      return nil
    end
    local first = string.byte(buf, 1)
    return first // 16, first % 16, string.sub(buf, pos, pos - 1 + len), pos - 1 + len
  end
  return function()
    while true do
      local okp, ptype, flags, body, used = pcall(parse)
      if not okp then
        return nil, ptype
      end
      if ptype then
        buf = string.sub(buf, used + 1)
        return ptype, flags, body
      end
      if os.clock() >= deadline then
        return nil, errors.new("timeout", "timeout")
      end
      if total >= mqtt.MAX_BYTES then
        return nil, "more than " .. mqtt.MAX_BYTES .. " bytes"
      end
      local chunk, err = sock:recv(math.min(4096, mqtt.MAX_BYTES - total))
      if chunk then
        total += #chunk
        buf ..= chunk
      elseif err.kind ~= "timeout" then
        return nil, tostring(err)
      elseif quiet then
        return nil, errors.new("timeout", "quiet")
      end
    end
  end, function(on)
    quiet = on
  end
end

-- One packet's bytes.
function mqtt.packet(ptype, flags, body)
  local n, len = #body, ""
  repeat
    local b = n % 128
    n //= 128
    len ..= string.char(n > 0 and b + 128 or b)
  until n == 0
  return string.char(ptype * 16 + flags) .. len .. body
end

-- nmap's client id: "nmap" and 16 random letters.
function mqtt.client_id()
  local t = {}
  for i = 1, 16 do
    local c = math.random(0, 51)
    t[i] = string.char(c < 26 and 65 + c or 71 + c)
  end
  return "nmap" .. table.concat(t)
end

-- The session: topic -> most recent payload, how many messages, and why
-- listening stopped (nil, or a reader's why); or nil, why (nmap's words).
function mqtt.listen(sock, next_packet, quiet, filters)
  local connect = string.pack(">s2BBI2", "MQTT", 4, 0, 30) .. string.pack(">s2", mqtt.client_id())
  if not sock:send(mqtt.packet(1, 0, connect)) then
    return nil, "Failed to send CONNECT."
  end
  local ptype, _, body = next_packet()
  if not ptype then
    return nil, "Failed to receive control packet from server."
  end
  if ptype ~= 2 then
    return nil, ("Received control packet type '%s' instead of 'CONNACK'."):format(mqtt.TYPE_NAMES[ptype] or tostring(ptype))
  end
  local rc = #body >= 2 and string.byte(body, 2) or 255
  if rc ~= 0 then
    return nil, "Connection rejected: " .. (mqtt.CONNACK_REASONS[rc] or "Unrecognized Connect Return Code")
  end

  local subscribe = { string.pack(">I2", 1) }
  for _, t in ipairs(filters) do
    subscribe[#subscribe + 1] = string.pack(">s2B", t, 0)
  end
  if not sock:send(mqtt.packet(8, 2, table.concat(subscribe))) then
    return nil, "Failed to send SUBSCRIBE."
  end
  -- Until the SUBACK, other packets (retained PUBLISHes may come first) are skipped, as nmap does.
  repeat
    ptype, _, body = next_packet()
    if not ptype then
      return nil, "Failed to receive control packet from server."
    end
  until ptype == 9
  local accepted = false
  for i = 3, #body do
    accepted = accepted or string.byte(body, i) <= 2
  end
  if not accepted then
    return nil, "Every topic filter was rejected."
  end

  local topics, msgs, why = {}, 0, nil
  sock:send(mqtt.packet(12, 0, ""))
  sock:set_timeout(mqtt.FIRST)
  quiet(true)
  while msgs < mqtt.MAX_MSGS do
    local flags
    ptype, flags, body = next_packet()
    if not ptype then
      why = flags
      break
    end
    if ptype == 13 then
      sock:set_timeout(mqtt.QUIET)
    elseif ptype == 3 and #body >= 2 then
      local tlen = string.unpack(">I2", body)
      if 2 + tlen > #body then
        why = "truncated PUBLISH"
        break
      end
      local topic = string.sub(body, 3, 2 + tlen)
      local pos = 3 + tlen
      if (flags // 2) % 4 > 0 then
        pos += 2 -- packet identifier of QoS 1 and 2
      end
      topics[topic] = string.sub(body, pos)
      msgs += 1
    end
  end
  if msgs == 0 then
    -- nmap's answer when its last read found nothing.
    return nil, "Failed to receive control packet from server."
  end
  return topics, msgs, why
end

return mqtt
