-- rpcinfo: the RPC programs a portmapper (rpcbind) lists, as nmap's
-- rpcinfo shows them.
--
-- Asks for the portmapper's list with DUMP (lib rpc: rpcbind version 4,
-- then 3, then 2, each on a new connection, over TCP with record marking
-- or over UDP), then groups it as nmap does: by program, then by protocol
-- (netid), each with its port, universal address and owner (the last
-- entry's) and its versions in order. The text is nmap's table, one line
-- per program and protocol that has a port, sorted:
--   program version    port/proto  service
--   100000  2,3,4        111/tcp   rpcbind
-- When the list has a program at the scanned port and protocol and the
-- port is known only as `rpcbind` or `rpc` (no version: the RPC grinder of
-- -sV did not name it already), the port is named after it as
-- nmap's rpcinfo does: `rpcbind 2-4 (RPC #100000)` (ctx:set_service).

local rpc = require "rpc"

local TIMEOUT = 5000

return {
  id = "rpcinfo",
  description = "Lists the RPC programs a portmapper (rpcbind) knows, with their versions and ports, as nmap's rpcinfo does.",
  categories = { "default", "discovery", "safe", "version" },
  ports = { 111 }, -- TCP and UDP
  services = { "rpcbind" },
  run = function(ctx)
    local transport = ctx.protocol == "udp" and "udp" or "tcp"
    local function open()
      if transport == "udp" then
        return ctx:udp{ timeout = TIMEOUT }
      end
      return ctx:connect{ timeout = TIMEOUT }
    end
    local list, err = rpc.portmap_dump(open, transport)
    if not list then
      return nil, err
    end

    local programs = {}
    for _, e in ipairs(list) do
      local key = tostring(e.program)
      programs[key] = programs[key] or {}
      local p = programs[key][e.protocol] or { version = {} }
      programs[key][e.protocol] = p
      p.port, p.addr, p.owner = e.port, e.addr, e.owner
      table.insert(p.version, e.version)
      table.sort(p.version)
    end

    -- This port's own program, lowest-highest version, as nmap names it.
    local here
    for program, protocols in pairs(programs) do
      local p = protocols[transport]
      if p and p.port == ctx.port then
        here = { number = tonumber(program), version = p.version }
      end
    end
    local unnamed = ctx.service == nil or ctx.service == "rpcbind" or ctx.service == "rpc"
    if here and unnamed and ctx.version == nil then
      local v = here.version
      local name = rpc.program_name(here.number)
      if name then
        ctx:set_service{
          name = name,
          version = #v > 1 and (v[1] .. "-" .. v[#v]) or tostring(v[1]),
          info = "RPC #" .. here.number,
        }
      end
    end

    local lines = {}
    for program, protocols in pairs(programs) do
      for protocol, p in pairs(protocols) do
        if p.port then
          local name = rpc.program_name(tonumber(program)) or ""
          lines[#lines + 1] = string.format("%-7d %-10s %5d/%-4s  %s", tonumber(program),
            table.concat(p.version, ","), p.port, protocol, name)
        end
      end
    end
    if #lines == 0 then
      return nil, "the portmapper lists no program with a port"
    end
    table.sort(lines)
    table.insert(lines, 1, "program version    port/proto  service")
    return programs, "\n  " .. table.concat(lines, "\n  ")
  end,
}
