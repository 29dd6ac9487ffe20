-- epmd-info: the Erlang nodes an Erlang Port Mapper Daemon knows, and their
-- ports, as nmap's epmd-info shows them.
--
-- Sends NAMES_REQ: a 2-byte big-endian length (1), then the byte 110 ("n").
-- epmd answers with its own port as a 4-byte big-endian number, then one
-- text line per node, "name NAME at port PORT\n", and closes. Lines are
-- read up to an empty one or the end (a last line without "\n" counts, as
-- in nmap). The result is nmap's table: epmd_port, and nodes with each
-- node's port under its name (in the text, in the order received; in -oX
-- a table's keys come sorted).

local MAX_LINE = 1024
local MAX_NODES = 1000
local TIMEOUT = 5000

return {
  id = "epmd-info",
  description = "Lists the Erlang nodes an Erlang Port Mapper Daemon (epmd) knows and their ports, as nmap's epmd-info does.",
  categories = { "default", "discovery", "safe" },
  ports = { 4369 },
  services = { "epmd" },
  run = function(ctx)
    local sock, err = ctx:connect{ timeout = TIMEOUT }
    if not sock then
      return nil, "connect: " .. tostring(err)
    end
    local ok, serr = sock:send(string.pack(">s2", "n"))
    if not ok then
      sock:close()
      return nil, "send: " .. tostring(serr)
    end
    local head, herr = sock:recv_exact(4)
    if not head then
      sock:close()
      return nil, "no NAMES reply: " .. tostring(herr)
    end
    local epmd_port = string.unpack(">I4", head)

    local nodes, order = {}, {}
    for _ = 1, MAX_NODES do
      local line, lerr = sock:recv_line(MAX_LINE)
      if not line and lerr.kind == "closed" then
        -- Closed after a last line without "\n": what is left is that line.
        line = sock:recv(MAX_LINE)
      end
      if not line or line == "" then
        break
      end
      local name, port = string.match(line, "^name (.*) at port (%d+)")
      if name then
        if not nodes[name] then
          order[#order + 1] = name
        end
        nodes[name] = port
      end
    end
    sock:close()

    -- NSE's text for this table, nodes in the order received.
    local text = { "\n  epmd_port: " .. epmd_port, "\n  nodes: " }
    for _, name in ipairs(order) do
      text[#text + 1] = "\n    " .. name .. ": " .. nodes[name]
    end
    return { epmd_port = epmd_port, nodes = nodes }, table.concat(text)
  end,
}
