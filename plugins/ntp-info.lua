-- ntp-info: an NTP server's time and the variables it tells, as nmap's
-- ntp-info shows them.
--
-- Sends nmap's two questions over UDP (lib ntp, lib datagram): a client
-- time request (mode 3), whose answer gives "receive time stamp" (when the
-- server got the request, UTC, to the second), then a control READVAR
-- (mode 6, opcode 2), whose first answer datagram gives the system
-- variables (version, processor, system, leap, stratum, precision,
-- rootdelay, refid... whatever the server lists), parsed as nmap does.
-- Servers that do not answer mode 6 (chrony, most pools) give the time
-- alone. The table holds everything; the text, as nmap's, lists it all
-- when the script is named or run with -v, else only version, processor,
-- system, refid and stratum. (nmap divides the fraction of a second by
-- 2^28, not 2^32, which can put its time up to 16 s late; this does not.)

local ntp = require "ntp"
local datagram = require "datagram"

local TIMEOUT = 3000
local DEFAULT_FIELDS = { "version", "processor", "system", "refid", "stratum" }

return {
  id = "ntp-info",
  description = "Reads an NTP server's time (mode 3) and its system variables (mode 6 READVAR), as nmap's ntp-info does.",
  categories = { "default", "discovery", "safe" },
  -- Values that change from run to run: `db diff` ignores them.
  volatile = { "receive time stamp", "clock", "offset", "frequency", "sys_jitter", "clk_jitter", "clk_wander", "rootdisp", "rootdelay", "reftime", "tc", "mintc" },
  portrule = function(port)
    return port.protocol == "udp" and (port.number == 123 or port.service == "ntp")
  end,
  run = function(ctx)
    local sock, err = ctx:udp{ timeout = TIMEOUT }
    if not sock then
      return nil, "udp: " .. tostring(err)
    end
    local result, order = {}, {}
    local function put(k, v)
      if result[k] == nil then
        order[#order + 1] = k
      end
      result[k] = v
    end

    local t, terr = datagram.exchange(sock, ntp.TIME_REQUEST, ntp.decode_time)
    if t then
      put("receive time stamp", os.date("!%Y-%m-%dT%H:%M:%S", math.floor(t.receive)))
    end
    local c, cerr = datagram.exchange(sock, ntp.readvar_request(1), function(d)
      return ntp.decode_control(d, 1)
    end)
    sock:close()
    if c then
      for _, kv in ipairs(ntp.variables(c.data)) do
        put(kv[1], kv[2])
      end
    end
    if #order == 0 then
      return nil, "no answer: time: " .. tostring(terr) .. "; variables: " .. tostring(cerr)
    end

    local lines = {}
    if (ctx.verbosity or 0) < 1 then
      order = DEFAULT_FIELDS
    end
    for _, k in ipairs(order) do
      if result[k] ~= nil then
        lines[#lines + 1] = k .. ": " .. result[k]
      end
    end
    return result, "\n  " .. table.concat(lines, "\n  ")
  end,
}
