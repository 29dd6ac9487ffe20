-- redis-info: what Redis says about itself to INFO, and whether it says
-- it without authentication.
--
-- Sends the inline command INFO, reads the bulk reply ($<len>\r\n<len
-- bytes>\r\n, at most MAX_INFO bytes of it) and reports the server facts.
-- INFO answered without AUTH is a high finding: anyone who reaches the
-- port can read and write the data (and often more).

local MAX_INFO = 256 * 1024
local MAX_READS = 256
local TIMEOUT = 5000

-- The INFO fields reported, in this order, under these names.
local FIELDS = {
  { "redis_version", "version" },
  { "redis_mode", "mode" },
  { "role", "role" },
  { "os", "os" },
  { "arch_bits", "arch_bits" },
  { "process_id", "process_id" },
  { "tcp_port", "tcp_port" },
  { "uptime_in_seconds", "uptime_seconds" },
  { "connected_clients", "connected_clients" },
  { "connected_slaves", "connected_slaves" },
  { "used_memory_human", "used_memory" },
  { "executable", "executable" },
  { "config_file", "config_file" },
}
local NUMERIC = { arch_bits = true, process_id = true, tcp_port = true, uptime_seconds = true,
  connected_clients = true, connected_slaves = true }

-- Reads exactly n bytes (n <= MAX_INFO) in a bounded number of reads.
local function read_exactly(sock, n)
  local parts, got = {}, 0
  for _ = 1, MAX_READS do
    if got >= n then
      break
    end
    local chunk, err = sock:recv(math.min(n - got, 65536))
    if not chunk then
      return nil, err, table.concat(parts)
    end
    parts[#parts + 1] = chunk
    got += #chunk
  end
  local all = table.concat(parts)
  if #all < n then
    return nil, "short read", all
  end
  return string.sub(all, 1, n)
end

local function parse_info(text)
  local kv, count = {}, 0
  for line in string.gmatch(text, "[^\r\n]+") do
    count += 1
    if count > 4096 then
      break
    end
    if string.sub(line, 1, 1) ~= "#" then
      local k, v = string.match(line, "^([%w_]+):(.*)$")
      if k then
        kv[k] = v
      end
    end
  end
  return kv
end

return {
  id = "redis-info",
  description = "Reads Redis INFO (version, mode, role, OS, uptime, clients) and flags a Redis that needs no password.",
  categories = { "default", "discovery", "safe" },
  ports = { 6379 },
  services = { "redis" },
  run = function(ctx)
    local sock, err = ctx:connect{ tls = ctx.tunnel == "ssl", timeout = TIMEOUT }
    if not sock then
      return nil, "connect: " .. tostring(err)
    end
    local ok, serr = sock:send("INFO\r\n")
    if not ok then
      sock:close()
      return nil, "send: " .. tostring(serr)
    end
    local head, rerr = sock:recv_until("\r\n", 1024)
    if not head then
      sock:close()
      return nil, "no reply to INFO: " .. tostring(rerr)
    end
    head = string.gsub(head, "\r\n$", "")
    local kind = string.sub(head, 1, 1)

    if kind == "-" then
      sock:close()
      local message = string.sub(head, 2, 300)
      if string.sub(message, 1, 6) == "NOAUTH" then
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
    if kind ~= "$" then
      sock:close()
      return nil, "not a Redis bulk reply: " .. string.sub(head, 1, 80)
    end
    local len = tonumber(string.match(head, "^%$(%d+)$"))
    if not len then
      sock:close()
      return nil, "bad bulk length: " .. string.sub(head, 1, 80)
    end
    local truncated = len > MAX_INFO
    local body, berr, partial = read_exactly(sock, math.min(len, MAX_INFO))
    sock:close()
    if not body then
      if not partial or partial == "" then
        return nil, "INFO reply cut short: " .. tostring(berr)
      end
      body, truncated = partial, true
    end

    local kv = parse_info(body)
    local data = { info_bytes = len, truncated = truncated }
    for _, f in ipairs(FIELDS) do
      local v = kv[f[1]]
      if v then
        data[f[2]] = NUMERIC[f[2]] and tonumber(v) or v
      end
    end
    if not data.version then
      return nil, "INFO reply without redis_version"
    end
    ctx:finding{
      severity = "info",
      title = string.format("Redis %s (%s, %s)", data.version, data.mode or "?", data.role or "?"),
      data = data,
    }
    ctx:finding{
      severity = "high",
      title = "Redis answers without authentication",
      data = {
        command = "INFO",
        version = data.version,
        why = "anyone who reaches this port can read and change the data without a password",
      },
    }
  end,
}
