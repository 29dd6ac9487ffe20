-- redis: RESP, the Redis protocol, as nmap's redis-info speaks it: commands
-- as RESP arrays, replies read within bounds, INFO's fields, and nmap's
-- extra lists (bind addresses, channels, clients, cluster nodes).
--
--   local redis = require "redis"
--   local reply, err = redis.command(sock, "INFO")
--   -- reply.kind: "+", "-", ":", "$" or "*"; reply.data: a string or a list
--   local kv = redis.parse_info(reply.data)
--
-- A bulk string longer than MAX_BULK is cut (truncated = true, length the
-- size the server announced); arrays nest at most two deep and hold at
-- most MAX_ITEMS items.

local redis = {}

local MAX_BULK = 256 * 1024
local MAX_ITEMS = 4096
redis.MAX_BULK, redis.MAX_ITEMS = MAX_BULK, MAX_ITEMS

-- One RESP reply: { kind = "+"|"-"|":"|"$"|"*", data = string or list }, or
-- nil, err. A bulk string longer than MAX_BULK is cut (truncated = true).
function redis.read_reply(sock, depth)
  depth = depth or 0
  local head, err = sock:recv_until("\r\n", 1024)
  if not head then
    return nil, tostring(err)
  end
  head = string.gsub(head, "\r\n$", "")
  local kind, rest = string.sub(head, 1, 1), string.sub(head, 2)
  if kind == "+" or kind == "-" or kind == ":" then
    return { kind = kind, data = rest }
  end
  local n = tonumber(string.match(rest, "^%-?%d+$"))
  if kind == "$" and n then
    if n < 0 then
      return { kind = kind }
    end
    local want = math.min(n, MAX_BULK)
    local body, berr = "", nil
    if want > 0 then
      body, berr = sock:recv_exact(want)
    end
    if not body then
      -- What came before the end is still there to read.
      local partial = sock:recv(want)
      if not partial or partial == "" then
        return nil, "reply cut short: " .. tostring(berr)
      end
      return { kind = kind, data = partial, truncated = true, length = n }
    end
    if n > MAX_BULK then
      return { kind = kind, data = body, truncated = true, length = n }
    end
    sock:recv_exact(2) -- the CRLF after the bulk
    return { kind = kind, data = body, length = n }
  end
  if kind == "*" and n then
    if n < 0 then
      return { kind = kind }
    end
    if depth >= 2 or n > MAX_ITEMS then
      return nil, "array too large or too deep"
    end
    local items = {}
    for i = 1, n do
      local r, rerr = redis.read_reply(sock, depth + 1)
      if not r then
        return nil, rerr
      end
      items[i] = r.data
    end
    return { kind = kind, data = items }
  end
  return nil, "not a Redis reply: " .. string.sub(head, 1, 80)
end

-- Sends a command as a RESP array and reads its reply.
function redis.command(sock, ...)
  local args = { ... }
  local parts = { "*" .. #args .. "\r\n" }
  for _, a in ipairs(args) do
    parts[#parts + 1] = "$" .. #a .. "\r\n" .. a .. "\r\n"
  end
  local ok, err = sock:send(table.concat(parts))
  if not ok then
    return nil, "send: " .. tostring(err)
  end
  return redis.read_reply(sock, 0)
end

-- INFO's text as a table of its key:value lines (at most MAX_ITEMS lines).
function redis.parse_info(text)
  local kv, count = {}, 0
  for line in string.gmatch(text, "[^\r\n]+") do
    count += 1
    if count > MAX_ITEMS then
      break
    end
    local k, v = string.match(line, "^([^:]*):(.*)$")
    if k then
      kv[k] = v
    end
  end
  return kv
end

-- Splits on every single space, as nmap's stringaux.strsplit(" ", s).
function redis.split_spaces(s)
  local out, from = {}, 1
  while #out < MAX_ITEMS do
    local at = string.find(s, " ", from, true)
    if not at then
      out[#out + 1] = string.sub(s, from)
      break
    end
    out[#out + 1] = string.sub(s, from, at - 1)
    from = at + 1
  end
  return out
end

-- An address as bytes for sorting (IPv4: 4 bytes, IPv6: 16), or nil.
function redis.ip_key(ip)
  local a, b, c, d = string.match(ip, "^(%d+)%.(%d+)%.(%d+)%.(%d+)$")
  if a then
    a, b, c, d = tonumber(a), tonumber(b), tonumber(c), tonumber(d)
    if a > 255 or b > 255 or c > 255 or d > 255 then
      return nil
    end
    return string.char(4, a, b, c, d)
  end
  if not string.find(ip, ":", 1, true) then
    return nil
  end
  local head, tail = ip, nil
  local dc = string.find(ip, "::", 1, true)
  if dc then
    head, tail = string.sub(ip, 1, dc - 1), string.sub(ip, dc + 2)
  end
  local function groups(s)
    local g = {}
    if s == "" then
      return g
    end
    for part in string.gmatch(s .. ":", "([^:]*):") do
      local v = tonumber(part, 16)
      if not v or #part > 4 then
        return nil
      end
      g[#g + 1] = v
    end
    return g
  end
  local h, t = groups(head), tail and groups(tail) or {}
  if not h or not t or #h + #t > 8 or (not tail and #h ~= 8) then
    return nil
  end
  local all = table.clone(h)
  for _ = 1, 8 - #h - #t do
    all[#all + 1] = 0
  end
  for _, v in ipairs(t) do
    all[#all + 1] = v
  end
  return string.char(16) .. string.pack(">I2I2I2I2I2I2I2I2", table.unpack(all))
end

-- nmap's extra lists: name, command, and what it makes of the reply data.
function redis.extras(verbosity)
  return {
    {
      "Bind addresses", { "CONFIG", "GET", "bind" }, function(data)
        if type(data) ~= "table" or data[1] ~= "bind" or type(data[2]) ~= "string" then
          return nil
        end
        local list = redis.split_spaces(data[2])
        for i, ip in ipairs(list) do
          if ip == "" then
            list[i] = "0.0.0.0"
          end
        end
        return list
      end,
    },
    {
      "Active channels", { "PUBSUB", "CHANNELS" }, function(data)
        if type(data) ~= "table" then
          return nil
        end
        local channels, omitted = {}, 0
        local limit = verbosity <= 1 and 20 or nil
        for _, channel in ipairs(data) do
          if limit and #channels >= limit then
            omitted += 1
          else
            channels[#channels + 1] = tostring(channel)
          end
        end
        if omitted > 0 then
          channels[#channels + 1] = ("(omitted %d item(s), use verbose mode -v to show them)"):format(omitted)
        end
        return #channels > 0 and channels or nil
      end,
    },
    {
      "Client connections", { "CLIENT", "LIST" }, function(data)
        if type(data) ~= "string" then
          return nil
        end
        local seen, keys = {}, {}
        for line in string.gmatch(data, "[^\n]+") do
          for token in string.gmatch(line, "%S+") do
            local ip = string.match(token, "^addr=%[?([%x:.]+)%]?:%d+$")
            local key = ip and redis.ip_key(ip)
            if key and not seen[key] then
              seen[key] = ip
              keys[#keys + 1] = key
            end
          end
        end
        table.sort(keys)
        local out = {}
        for _, k in ipairs(keys) do
          out[#out + 1] = seen[k]
        end
        return #out > 0 and out or nil
      end,
    },
    {
      "Cluster nodes", { "CLUSTER", "NODES" }, function(data)
        if type(data) ~= "string" then
          return nil
        end
        local out = {}
        for node in string.gmatch(data, "[^\n]+") do
          local ipport, flags = string.match(node, "^%x+%s+([%x.:%[%]]+)@?%d*%s+(%S+)")
          if ipport then
            out[#out + 1] = ("%s (%s)"):format(ipport, flags)
          end
        end
        return #out > 0 and out or nil
      end,
    },
  }
end

return redis
