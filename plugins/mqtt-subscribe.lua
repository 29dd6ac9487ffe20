-- mqtt-subscribe: the topics an MQTT broker publishes and their latest
-- payloads, as nmap's mqtt-subscribe shows them, and the broker's product
-- and version from its $SYS/broker/version topic.
--
-- MQTT 3.1.1 (OASIS standard, section 3): sends CONNECT (protocol "MQTT",
-- level 4, client id "nmap" and 16 letters, keep-alive 30 s), expects a
-- CONNACK that accepts it, then SUBSCRIBE to nmap's default filters "$SYS/#"
-- (the broker's own statistics) and "#" (every other topic) at QoS 0, and
-- collects the PUBLISH packets that come, keeping each topic's most recent
-- payload. A broker sends its retained messages (its $SYS topics among
-- them) at once after the SUBACK, so listening ends as soon as they have
-- come: a PINGREQ sent after the SUBACK is answered after them (mosquitto
-- handles a client's packets in order), and listening ends QUIET ms after
-- its PINGRESP with nothing more; else after FIRST ms of silence, or
-- MAX_MSGS messages, or MAX_BYTES bytes, or LISTEN seconds after the start
-- (nmap listens 5 s whatever comes).
-- A packet is a type byte, a length of one to four 7-bit bytes, and a body;
-- a PUBLISH body is the topic (two-byte length and bytes), then the payload.
-- Ends with DISCONNECT. nmap's errors come back as its { ERROR = ... }.
-- Where nmap writes the version topic ("mosquitto version 2.0.11") as the
-- port's service name, the port keeps its name and gets the product and
-- version (ctx:set_service).

local TIMEOUT = 1000 -- ms per read: a read begun before the deadline ends within it
local LISTEN = 4 -- seconds from the start to the deadline
local FIRST = 1000 -- ms of silence that end listening before the PINGRESP
local QUIET = 150 -- ms of silence that end listening after it
local MAX_MSGS = 100 -- nmap's listen-msgs default
local MAX_BYTES = 256 * 1024 -- all packets read
local MAX_PACKET = 64 * 1024
local TOPICS = { "$SYS/#", "#" }
local KEY = "Topics and their most recent payloads"

-- A reader of whole packets from `sock`: next() gives the type, flags and
-- body of one, or nil, why ("timeout" when none came by `deadline`;
-- "quiet" when, once quiet(true) was called, a read waited its socket's
-- whole timeout for nothing).
local function reader(sock, deadline)
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
    if len > MAX_PACKET then
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
        return nil, "timeout"
      end
      if total >= MAX_BYTES then
        return nil, "more than " .. MAX_BYTES .. " bytes"
      end
      local chunk, err = sock:recv(math.min(4096, MAX_BYTES - total))
      if chunk then
        total += #chunk
        buf ..= chunk
      elseif tostring(err) ~= "timeout" then
        return nil, tostring(err)
      elseif quiet then
        return nil, "quiet"
      end
    end
  end, function(on)
    quiet = on
  end
end

local function packet(ptype, flags, body)
  local n, len = #body, ""
  repeat
    local b = n % 128
    n //= 128
    len ..= string.char(n > 0 and b + 128 or b)
  until n == 0
  return string.char(ptype * 16 + flags) .. len .. body
end

local function client_id()
  local t = {}
  for i = 1, 16 do
    local c = math.random(0, 51)
    t[i] = string.char(c < 26 and 65 + c or 71 + c)
  end
  return "nmap" .. table.concat(t)
end

local CONNACK_REASONS = {
  "Unacceptable Protocol Version", "Client Identifier Rejected", "Server Unavailable",
  "Bad User Name or Password", "Not Authorized",
}
local TYPE_NAMES = {
  "CONNECT", "CONNACK", "PUBLISH", "PUBACK", "PUBREC", "PUBREL", "PUBCOMP", "SUBSCRIBE",
  "SUBACK", "UNSUBSCRIBE", "UNSUBACK", "PINGREQ", "PINGRESP", "DISCONNECT",
}

local function failed(msg)
  return { ERROR = msg }, msg
end

-- Topic -> most recent payload, and how many messages; or nil, why.
local function listen(ctx, sock, next_packet, quiet)
  local connect = string.pack(">s2BBI2", "MQTT", 4, 0, 30) .. string.pack(">s2", client_id())
  if not sock:send(packet(1, 0, connect)) then
    return nil, "Failed to send CONNECT."
  end
  local ptype, _, body = next_packet()
  if not ptype then
    return nil, "Failed to receive control packet from server."
  end
  if ptype ~= 2 then
    return nil, ("Received control packet type '%s' instead of 'CONNACK'."):format(TYPE_NAMES[ptype] or tostring(ptype))
  end
  local rc = #body >= 2 and string.byte(body, 2) or 255
  if rc ~= 0 then
    return nil, "Connection rejected: " .. (CONNACK_REASONS[rc] or "Unrecognized Connect Return Code")
  end

  local filters = { string.pack(">I2", 1) }
  for _, t in ipairs(TOPICS) do
    filters[#filters + 1] = string.pack(">s2B", t, 0)
  end
  if not sock:send(packet(8, 2, table.concat(filters))) then
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
  sock:send(packet(12, 0, ""))
  sock:set_timeout(FIRST)
  quiet(true)
  while msgs < MAX_MSGS do
    local flags
    ptype, flags, body = next_packet()
    if not ptype then
      why = flags
      break
    end
    if ptype == 13 then
      sock:set_timeout(QUIET)
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
  if why and why ~= "timeout" and why ~= "quiet" then
    ctx:log("mqtt-subscribe: stopped listening: " .. tostring(why))
  end
  return topics, msgs
end

return {
  id = "mqtt-subscribe",
  description = "Subscribes to an MQTT broker's $SYS/# and # topics and shows each topic's most recent payload, as nmap's mqtt-subscribe does.",
  categories = { "safe", "discovery", "version" },
  tags = { "mqtt", "iot" },
  ports = { 1883, 8883 },
  services = { "mqtt", "secure-mqtt" },
  run = function(ctx)
    local deadline = os.clock() + LISTEN
    local sock, err = ctx:connect{ tls = ctx.tunnel == "ssl", timeout = TIMEOUT }
    if not sock then
      return failed("connect: " .. tostring(err))
    end
    local next_packet, quiet = reader(sock, deadline)
    local topics, info = listen(ctx, sock, next_packet, quiet)
    sock:send(packet(14, 0, ""))
    sock:close()
    if not topics then
      return failed(info)
    end

    -- The broker's product and version ("mosquitto version 2.0.11"; some
    -- give the number alone).
    -- Detection's spelling of the same product is kept (its CPE goes with
    -- it), and a port already known so is left as it is.
    local said = topics["$SYS/broker/version"]
    if said then
      local product, version = string.match(said, "^(.-) version (%S+)$")
      if not product or product == "" then
        product, version = nil, string.match(said, "^%d[%w.-]*$") and said
        product = not version and said or nil
      end
      if product and ctx.product and string.lower(product) == string.lower(ctx.product) then
        product = ctx.product
      end
      if (product or ctx.product) ~= ctx.product or (version or ctx.version) ~= ctx.version then
        local ok, why = ctx:set_service{ product = product, version = version }
        if not ok then
          ctx:log("mqtt-subscribe: " .. tostring(why))
        end
      end
    end

    -- NSE's text of the table; the topics sorted (as -oX's keys are).
    local names = {}
    for t in pairs(topics) do
      names[#names + 1] = t
    end
    table.sort(names)
    local lines = { "\n  " .. KEY .. ": " }
    for _, t in ipairs(names) do
      lines[#lines + 1] = "\n    " .. t .. ": " .. topics[t]
    end
    return { [KEY] = topics }, table.concat(lines)
  end,
}
