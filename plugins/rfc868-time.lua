-- rfc868-time: the date and time a Time service (RFC 868) gives, as nmap's
-- rfc868-time shows it.
--
-- Over TCP the server sends its time as soon as the connection opens; over
-- UDP it answers any datagram (an empty one is sent). The time is a 32-bit
-- big-endian count of seconds since 1900-01-01 (some servers send 8 bytes:
-- the first 4 count). nmap shows it as UTC, "2026-11-25T04:30:00" (no time
-- zone, as its datetime.format_timestamp without an offset); any other
-- answer length is no result, as in nmap. A port whose service is `time`
-- (not some likelier one detection found) gets "32 bits" or "64 bits" as
-- its extra information, as nmap's version script sets it.

local TIMEOUT = 5000
local EPOCH_1900 = 2208988800 -- seconds from 1900-01-01 to 1970-01-01

return {
  id = "rfc868-time",
  description = "Reads the date and time from an RFC 868 Time service (TCP or UDP 37), as nmap's rfc868-time does.",
  categories = { "discovery", "safe", "version" },
  ports = { 37 }, -- TCP and UDP
  services = { "time" },
  run = function(ctx)
    local data, err
    if ctx.protocol == "udp" then
      local sock, uerr = ctx:udp{ timeout = TIMEOUT }
      if not sock then
        return nil, "udp: " .. tostring(uerr)
      end
      sock:send("")
      data, err = sock:recv(64)
      sock:close()
    else
      local sock, cerr = ctx:connect{ timeout = TIMEOUT }
      if not sock then
        return nil, "connect: " .. tostring(cerr)
      end
      -- At least 4 bytes (nmap's receive_bytes(4)), at most two reads.
      data, err = sock:recv(64)
      if data and #data < 4 then
        data = data .. (sock:recv(64 - #data) or "")
      end
      sock:close()
    end
    if not data then
      return nil, "no time: " .. tostring(err)
    end
    if #data ~= 4 and #data ~= 8 then
      return nil, "odd answer of " .. #data .. " bytes"
    end
    if ctx.service == "time" then
      ctx:set_service{ info = (#data * 8) .. " bits" }
    end
    local stamp = string.unpack(">I4", data) - EPOCH_1900
    local ok, text = pcall(os.date, "!%Y-%m-%dT%H:%M:%S", stamp)
    if not ok or type(text) ~= "string" then
      return nil, "time out of range: " .. stamp
    end
    return text
  end,
}
