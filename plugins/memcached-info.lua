-- memcached-info: what memcached says to "stats" and "stats settings", as
-- nmap's memcached-info shows it, and whether it says it without
-- authentication.
--
-- Sends the text-protocol commands "stats" and "stats settings", reads
-- each reply until "END" (or an error line), at most MAX_REPLY bytes, and
-- returns nmap's table (process, uptime, server time, architecture, CPU,
-- connections, ports, authentication; all strings, in nmap's order). A
-- memcached that answers is a medium finding: anyone who reaches the port
-- can read, change and flush the cache.

local text = require "text"

local MAX_REPLY = 65536
local TIMEOUT = 5000
local MAX_STATS = 512
local END = [[(?:^|\n)(?:END|ERROR|CLIENT_ERROR[^\r\n]*|SERVER_ERROR[^\r\n]*)\r?\n]]

-- nmap's fields, in its order: stat, name, and how the value is shown.
local FIELDS = {
  { "pid", "Process ID" },
  { "uptime", "Uptime", function(v)
    local n = tonumber(v)
    return (n and ("%d seconds"):format(n)) or (v .. " seconds")
  end },
  { "time", "Server time", function(v)
    local n = tonumber(v)
    return n and os.date("!%Y-%m-%dT%H:%M:%S", math.floor(n)) or v
  end },
  { "pointer_size", "Architecture", function(v)
    return v .. " bit"
  end },
  { "rusage_user", "Used CPU (user)" },
  { "rusage_system", "Used CPU (system)" },
  { "curr_connections", "Current connections" },
  { "total_connections", "Total connections" },
  { "maxconns", "Maximum connections" },
  { "tcpport", "TCP Port" },
  { "udpport", "UDP Port" },
  { "auth_enabled_sasl", "Authentication" },
}

-- Sends `cmd` and reads its STAT lines: stats table, count, last line; or nil, err.
local function stats_of(sock, cmd, into)
  local ok, serr = sock:send(cmd .. "\r\n")
  if not ok then
    return nil, "send: " .. tostring(serr)
  end
  local reply, rerr = sock:recv_until(END, MAX_REPLY)
  if not reply then
    return nil, "no " .. cmd .. " reply: " .. tostring(rerr)
  end
  local count, last = 0, nil
  for line in string.gmatch(reply, "[^\r\n]+") do
    local k, v = string.match(line, "^STAT (%S+) (.*)$")
    if k and count < MAX_STATS then
      count += 1
      into[k] = v
    end
    last = line
  end
  return count, last or reply
end


return {
  id = "memcached-info",
  description = "Reads memcached's stats (process, uptime, server time, connections, ports, authentication) as nmap's memcached-info does, and flags one open to anyone.",
  categories = { "default", "discovery", "safe" },
  -- Values that change from run to run: `db diff` ignores them.
  volatile = { "Uptime", "Server time", "Used CPU (user)", "Used CPU (system)", "Current connections", "Total connections" },
  cwe = { "CWE-306" },
  references = { "https://github.com/memcached/memcached/wiki/SASLHowto" },
  remediation = "Bind memcached to a trusted interface (-l), turn UDP off (-U 0), and use SASL authentication where its clients support it.",
  tags = { "cache", "authentication" },
  ports = { 11211 },
  services = { "memcached" },
  run = function(ctx)
    local sock, err = ctx:connect{ timeout = TIMEOUT }
    if not sock then
      return nil, "connect: " .. tostring(err)
    end
    local stats = {}
    local count, last = stats_of(sock, "stats", stats)
    if not count then
      sock:close()
      return nil, last
    end
    if count == 0 then
      sock:close()
      local line = string.sub(last, 1, 200)
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
    -- "stats settings" adds maxconns, the ports and auth_enabled_sasl.
    local settings = {}
    local scount, serr = stats_of(sock, "stats settings", settings)
    sock:close()
    if not scount then
      ctx:log("memcached-info: stats settings: " .. tostring(serr))
    end
    for k, v in pairs(settings) do
      stats[k] = v
    end

    ctx:finding{
      severity = "medium",
      title = "memcached answers without authentication",
      data = {
        command = "stats",
        version = stats.version,
        why = "anyone who reaches this port can read, change and flush the cache",
      },
    }

    local result, entries = {}, {}
    for _, f in ipairs(FIELDS) do
      local v = stats[f[1]]
      if v then
        v = f[3] and f[3](v) or v
        result[f[2]] = v
        entries[#entries + 1] = { f[2], v }
      end
    end
    return result, text.pairs(entries)
  end,
}
