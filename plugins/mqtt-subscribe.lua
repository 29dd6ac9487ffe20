-- mqtt-subscribe: the topics an MQTT broker publishes and their latest
-- payloads, as nmap's mqtt-subscribe shows them, and the broker's product
-- and version from its $SYS/broker/version topic.
--
-- The MQTT session is lib/mqtt.lua's: CONNECT, SUBSCRIBE to nmap's default
-- filters "$SYS/#" (the broker's own statistics) and "#" (every other
-- topic) at QoS 0, and the PUBLISH packets that come, each topic's most
-- recent payload kept; listening ends once the retained messages have come
-- (see the library), or LISTEN seconds after the start (nmap listens 5 s
-- whatever comes). Ends with DISCONNECT. nmap's errors come back as its
-- { ERROR = ... }.
-- Where nmap writes the version topic ("mosquitto version 2.0.11") as the
-- port's service name, the port keeps its name and gets the product and
-- version (ctx:set_service).

local mqtt = require "mqtt"

local TIMEOUT = 1000 -- ms per read: a read begun before the deadline ends within it
local LISTEN = 4 -- seconds from the start to the deadline
local TOPICS = { "$SYS/#", "#" }
local KEY = "Topics and their most recent payloads"

local function failed(msg)
  return { ERROR = msg }, msg
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
    local sock, err = ctx:connect{ timeout = TIMEOUT }
    if not sock then
      return failed("connect: " .. tostring(err))
    end
    local next_packet, quiet = mqtt.reader(sock, deadline)
    local topics, info, why = mqtt.listen(sock, next_packet, quiet, TOPICS)
    sock:send(mqtt.packet(14, 0, ""))
    sock:close()
    if not topics then
      return failed(info)
    end
    -- A timeout (the deadline, or silence once the retained messages came) is the normal end.
    if why and why.kind ~= "timeout" then
      ctx:log("mqtt-subscribe: stopped listening: " .. tostring(why))
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
