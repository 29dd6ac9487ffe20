-- mysql-info: the facts a MySQL or MariaDB server gives away in its
-- greeting (the protocol 10 handshake), as nmap's mysql-info shows them:
-- protocol, version, thread id, capability flags and names, status, salt
-- and authentication plugin. The greeting kept by service detection is
-- used when it decodes; otherwise one packet is read from a connection of
-- our own (lib/mysql.lua). Nothing is sent. A greeting that is an error
-- (a refused host) is an info finding; nmap shows it ("MySQL Error") only
-- at verbosity 2 and more, and so does the result here.
local mysql = require "mysql"
local P = mysql.printable
local ORDER =
  { "Protocol", "Version", "Thread ID", "Capabilities flags", "Some Capabilities", "Status", "Salt", "Auth Plugin Name" }

-- nmap's table and its text, in nmap's order (Some Capabilities on one line).
local function nmap_result(g)
  local r = { Protocol = g.protocol, Version = P(g.version), ["Thread ID"] = g.thread_id }
  if g.protocol == 10 then
    local caps = mysql.capability_names(g.capabilities, g.ext_capabilities)
    r["Capabilities flags"], r.Salt, r["Some Capabilities"] = g.capabilities, P(g.salt), #caps > 0 and caps or nil
    r.Status, r["Auth Plugin Name"] = g.status == 2 and "Autocommit" or g.status, g.auth_plugin and P(g.auth_plugin)
  end
  local lines = {}
  for _, k in ipairs(ORDER) do
    local v = r[k]
    lines[#lines + 1] = v ~= nil and (k .. ": " .. (type(v) == "table" and table.concat(v, ", ") or v)) or nil
  end
  return r, "\n  " .. table.concat(lines, "\n  ")
end

return {
  id = "mysql-info",
  description = "Decodes a MySQL/MariaDB server greeting as nmap's mysql-info does: protocol, version, thread id, capabilities, status, salt, auth plugin.",
  categories = { "default", "discovery", "safe" },
  -- Values that change from run to run: `db diff` ignores them.
  volatile = { "Thread ID", "Salt" },
  ports = { 3306 },
  services = { "mysql" },
  run = function(ctx)
    local raw = ctx.banner or ""
    local source, p, seq, short = "banner", mysql.split(raw)
    local g, why = mysql.decode_greeting(p)
    if not g then
      why = raw ~= "" and ("banner is not a greeting (" .. tostring(p and why or seq) .. "); ") or ""
      local sock, err = ctx:connect{ timeout = 5000 }
      if not sock then return nil, why .. "connect: " .. tostring(err) end
      source, p, seq, short = "connection", mysql.read_packet(sock)
      sock:close()
      g, why = mysql.decode_greeting(p)
      if not g then return nil, "not a MySQL greeting: " .. tostring(p and why or seq) end
    end
    if g.error_code and (ctx.verbosity or 0) > 1 then
      return { ["MySQL Error"] = P(string.sub(p, 4, 303)) }, "\n  MySQL Error: " .. P(string.sub(p, 4, 303))
    elseif g.error_code then
      local data =
        { protocol = 255, error_code = g.error_code, error = P(g.message), source = source, sequence = seq, truncated = short or nil }
      ctx:finding{ severity = "info", title = string.format("MySQL error %d: %s", g.error_code, data.error), data = data }
      return
    end
    return nmap_result(g)
  end,
}
