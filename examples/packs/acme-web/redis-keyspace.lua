-- redis-keyspace: how many keys each Redis database holds, from INFO
-- keyspace; a Redis that answers without a password and holds data is
-- worth a closer look.
return {
  id = "redis-keyspace",
  description = "Counts the keys of each Redis database (INFO keyspace).",
  categories = { "discovery", "safe" },
  services = { "redis" },
  ports = { 6379 },
  run = function(ctx)
    local sock, err = ctx:connect{}
    if not sock then
      return nil, err
    end
    sock:send("INFO keyspace\r\n")
    local head = sock:recv_until("\r\n", 64)
    if not head then
      sock:close()
      return nil, "no answer"
    end
    if head:sub(1, 1) == "-" then
      sock:close()
      return nil, "refused: " .. head
    end
    local size = tonumber(head:match("^%$(%d+)"))
    if not size or size > 65536 then
      sock:close()
      return nil, "not a bulk reply"
    end
    local body = ""
    while #body < size + 2 do
      local chunk = sock:recv(size + 2 - #body)
      if not chunk then
        break
      end
      body = body .. chunk
    end
    sock:close()
    local dbs, total = {}, 0
    for db, keys in body:gmatch("(db%d+):keys=(%d+)") do
      dbs[db] = tonumber(keys)
      total += tonumber(keys)
    end
    ctx:finding{
      severity = total > 0 and "medium" or "info",
      title = total > 0 and ("Redis holds " .. total .. " key(s) readable without authentication") or "Redis holds no keys",
      data = { databases = dbs, total = total },
    }
  end,
}
