-- pop3-capabilities: the capabilities a POP3 server lists to CAPA (RFC 2449),
-- as nmap's pop3-capabilities shows them.
--
-- Reads the greeting ("+OK ..."; a <timestamp> in it means APOP), sends
-- CAPA and reads the reply: "+OK", then one capability a line ("TOP",
-- "SASL PLAIN LOGIN"), ended by a line ".". nmap reads the reply up to the
-- first "." anywhere (within 2048 bytes) and splits it on "\r\n", so a dot
-- inside a line ends the list there; this does the same. The text is
-- nmap's: each capability, "NAME(ARGS)" when it has arguments, joined by
-- spaces. nmap lists them in Lua's hash order, which changes from run to
-- run; here APOP comes first, then the server's order.

local MAX_LINE = 2048 -- greeting line, and nmap's bound on the CAPA reply
local TIMEOUT = 5000

return {
  id = "pop3-capabilities",
  description = "Lists the capabilities a POP3 server announces to CAPA, as nmap's pop3-capabilities does.",
  categories = { "default", "discovery", "safe" },
  ports = { 110, 995 },
  services = { "pop3", "pop3s" },
  run = function(ctx)
    -- TLS on pop3s; else the port's tunnel decides (tls = nil).
    local sock, err = ctx:connect{ tls = ctx.service == "pop3s" or nil, timeout = TIMEOUT }
    if not sock then
      return nil, "connect: " .. tostring(err)
    end
    local greeting, gerr = sock:recv_line(MAX_LINE)
    if not greeting or not string.find(greeting, "+OK", 1, true) then
      sock:close()
      return nil, "no +OK greeting: " .. tostring(greeting or gerr):sub(1, 200)
    end
    local ok, serr = sock:send("CAPA\r\n")
    if not ok then
      sock:close()
      return nil, "send: " .. tostring(serr)
    end
    -- Up to the first dot (left out); without one in 2048 bytes, nmap keeps 2047.
    local data, rerr = sock:recv_until("\\.", MAX_LINE)
    if data then
      data = string.sub(data, 1, -2)
    elseif rerr.kind == "protocol" then -- no dot in the bytes allowed
      data = sock:recv(MAX_LINE - 1)
    end
    sock:send("QUIT\r\n")
    sock:close()
    if not data then
      return nil, "CAPA reply: " .. tostring(rerr)
    end

    -- The reply's lines, split on "\r\n" as nmap does.
    local lines = {}
    local pos = 1
    while true do
      local a, b = string.find(data, "\r\n", pos, true)
      lines[#lines + 1] = string.sub(data, pos, (a or 0) - 1)
      if not a then
        break
      end
      pos = b + 1
    end
    if not string.find(lines[1], "+OK", 1, true) then
      -- nmap's script fails on a refused CAPA and shows nothing.
      return nil, "CAPA refused: " .. string.sub(lines[1], 1, 200)
    end

    -- Capability names in order, and the arguments of each ("" for none).
    local names, args = {}, {}
    if string.find(greeting, "<[%p%w]+>") then
      names[1], args.APOP = "APOP", ""
    end
    for i = 2, #lines do
      local line = lines[i]
      if line ~= "" then
        local name = string.match(line, "[%w-]+")
        if not name then
          return nil, "CAPA line without a name: " .. string.sub(line, 1, 80)
        end
        if not args[name] then
          names[#names + 1] = name
        end
        -- As nmap: what follows the name's length plus one separator.
        args[name] = string.sub(line, #name + 2)
      end
    end

    local out = {}
    for i, name in ipairs(names) do
      out[i] = args[name] ~= "" and (name .. "(" .. args[name] .. ")") or name
    end
    return table.concat(out, " ")
  end,
}
