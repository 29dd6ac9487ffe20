-- memcached-stats: what memcached says to "stats" (version, uptime,
-- connections, items, pid), and whether it says it without authentication.
--
-- Sends the text-protocol command "stats" and reads until "END" (or an
-- error line), at most MAX_REPLY bytes. A memcached that answers is a
-- medium finding: anyone who reaches the port can read, change and flush
-- the cache.

local MAX_REPLY = 65536
local TIMEOUT = 5000
local MAX_STATS = 512

-- Fields reported, in this order, under these names; numbers stay numbers.
local FIELDS = {
  { "version", "version" },
  { "pid", "pid" },
  { "uptime", "uptime_seconds" },
  { "pointer_size", "pointer_size" },
  { "threads", "threads" },
  { "curr_connections", "curr_connections" },
  { "total_connections", "total_connections" },
  { "max_connections", "max_connections" },
  { "curr_items", "curr_items" },
  { "total_items", "total_items" },
  { "bytes", "bytes" },
  { "limit_maxbytes", "limit_maxbytes" },
}
local TEXT = { version = true }

return {
  id = "memcached-stats",
  description = "Reads memcached's stats (version, uptime, connections, items, pid) and flags one open to anyone.",
  categories = { "default", "discovery", "safe" },
  ports = { 11211 },
  services = { "memcached" },
  run = function(ctx)
    local sock, err = ctx:connect{ tls = ctx.tunnel == "ssl", timeout = TIMEOUT }
    if not sock then
      return nil, "connect: " .. tostring(err)
    end
    local ok, serr = sock:send("stats\r\n")
    if not ok then
      sock:close()
      return nil, "send: " .. tostring(serr)
    end
    local reply, rerr =
      sock:recv_until([[(?:^|\n)(?:END|ERROR|CLIENT_ERROR[^\r\n]*|SERVER_ERROR[^\r\n]*)\r?\n]], MAX_REPLY)
    sock:close()
    if not reply then
      return nil, "no stats reply: " .. tostring(rerr)
    end

    local stats, count = {}, 0
    local last
    for line in string.gmatch(reply, "[^\r\n]+") do
      local k, v = string.match(line, "^STAT (%S+) (.*)$")
      if k and count < MAX_STATS then
        count += 1
        stats[k] = v
      end
      last = line
    end
    if count == 0 then
      local line = string.sub(last or reply, 1, 200)
      if string.find(line, "auth", 1, true) then
        ctx:finding{
          severity = "info",
          title = "memcached requires authentication",
          data = { reply = line },
        }
        return
      end
      return nil, "stats refused: " .. line
    end

    local data = { stats = count }
    for _, f in ipairs(FIELDS) do
      local v = stats[f[1]]
      if v then
        data[f[2]] = TEXT[f[1]] and v or (tonumber(v) or v)
      end
    end
    ctx:finding{
      severity = "info",
      title = "memcached " .. (data.version or "(version not given)"),
      data = data,
    }
    ctx:finding{
      severity = "medium",
      title = "memcached answers without authentication",
      data = {
        command = "stats",
        version = data.version,
        why = "anyone who reaches this port can read, change and flush the cache",
      },
    }
  end,
}
