-- redis-info: what Redis says about itself, as nmap's redis-info shows it,
-- and whether it says it without authentication.
--
-- Sends INFO (then CONFIG GET bind, PUBSUB CHANNELS, CLIENT LIST and
-- CLUSTER NODES, as nmap does) in RESP, reads each reply within bounds and
-- returns nmap's table: Version, Operating System, Architecture, Process
-- ID, CPU, clients, memory and role (strings, in nmap's order), then the
-- lists nmap adds when the server gives them. INFO answered without AUTH is
-- a high finding: anyone who reaches the port can read and write the data
-- (and often more).

local redis = require "redis"
local text = require "text"

local TIMEOUT = 5000

-- INFO fields nmap shows, in its order, under its names.
local FIELDS = {
  { "redis_version", "Version" },
  { "os", "Operating System" },
  { "arch_bits", "Architecture" },
  { "process_id", "Process ID" },
  { "used_cpu_sys", "Used CPU (sys)" },
  { "used_cpu_user", "Used CPU (user)" },
  { "connected_clients", "Connected clients" },
  { "connected_slaves", "Connected slaves" },
  { "used_memory_human", "Used memory" },
  { "role", "Role" },
}

return {
  id = "redis-info",
  description = "Reads Redis INFO (version, OS, process, clients, memory, role) as nmap's redis-info does, and flags a Redis that needs no password.",
  categories = { "default", "discovery", "safe" },
  -- Values that change from run to run: `db diff` ignores them.
  volatile = { "Used CPU (sys)", "Used CPU (user)", "Connected clients", "Used memory", "Client connections" },
  cwe = { "CWE-306" },
  references = { "https://redis.io/docs/latest/operate/oss_and_stack/management/security/" },
  remediation = "Require authentication (requirepass, or ACL users on Redis 6 and later) and bind Redis to trusted interfaces with protected-mode on.",
  tags = { "database", "authentication" },
  ports = { 6379 },
  services = { "redis" },
  run = function(ctx)
    local sock, err = ctx:connect{ timeout = TIMEOUT }
    if not sock then
      return nil, "connect: " .. tostring(err)
    end
    local reply, rerr = redis.command(sock, "INFO")
    if not reply then
      sock:close()
      return nil, "no reply to INFO: " .. tostring(rerr)
    end
    if reply.kind == "-" then
      sock:close()
      local message = string.sub(reply.data, 1, 300)
      if string.sub(message, 1, 6) == "NOAUTH" or message == "ERR operation not permitted" then
        ctx:finding{
          severity = "info",
          title = "Redis requires authentication",
          data = { reply = message },
        }
        return
      end
      if string.sub(message, 1, 6) == "DENIED" then
        ctx:finding{
          severity = "info",
          title = "Redis refuses remote clients (protected mode)",
          data = { reply = message },
        }
        return
      end
      return nil, "INFO refused: " .. message
    end
    if reply.kind ~= "$" or type(reply.data) ~= "string" then
      sock:close()
      return nil, "not a Redis bulk reply to INFO"
    end

    local kv = redis.parse_info(reply.data)
    if not kv.redis_version then
      sock:close()
      return nil, "INFO reply without redis_version"
    end
    ctx:finding{
      severity = "high",
      title = "Redis answers without authentication",
      data = {
        command = "INFO",
        version = kv.redis_version,
        why = "anyone who reaches this port can read and change the data without a password",
      },
    }

    -- nmap's table, and its text in nmap's order.
    local result, entries = {}, {}
    for _, f in ipairs(FIELDS) do
      local v = kv[f[1]]
      if v then
        if f[1] == "arch_bits" then
          v = v .. " bits"
        end
        result[f[2]] = v
        entries[#entries + 1] = { f[2], v }
      end
    end
    local verbosity = ctx.verbosity or 0
    -- After a cut-short INFO the connection is out of step: no extras then.
    for _, extra in ipairs(reply.truncated and {} or redis.extras(verbosity)) do
      local r = redis.command(sock, table.unpack(extra[2]))
      if not r then
        break -- the connection is gone: no more answers
      end
      if r.kind ~= "-" then
        local list = extra[3](r.data)
        if list then
          result[extra[1]] = list
          entries[#entries + 1] = { extra[1], list }
        end
      end
      if r.truncated then
        break -- the rest of that reply was not read: the next would be out of step
      end
    end
    sock:close()
    return result, text.pairs(entries)
  end,
}
