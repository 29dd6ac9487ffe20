-- mysql-empty-password: whether the anonymous account (user "") or root
-- logs in to a MySQL or MariaDB server with an empty password, as nmap's
-- mysql-empty-password checks.
--
-- For each account, in nmap's order, a connection of its own: the
-- greeting, then a HandshakeResponse41 with an empty password
-- (mysql_native_password; an authentication switch is answered once, see
-- lib/mysql.lua), and the server's OK or ERR. An OK is a critical finding,
-- and nmap's text lists the account ("root account has empty password").
-- A refused login shows nothing, as in nmap. A greeting that is an error
-- (a host the server refuses) ends the check, and its message is the
-- output, as nmap shows it.
local mysql = require "mysql"

local USERS = { "", "root" }

return {
  id = "mysql-empty-password",
  description = "Checks whether root or the anonymous account of a MySQL/MariaDB server has an empty password, as nmap's mysql-empty-password does.",
  categories = { "intrusive", "auth" },
  cwe = { "CWE-521" },
  references = { "https://dev.mysql.com/doc/refman/8.0/en/default-privileges.html" },
  remediation = "Give every account a password (ALTER USER ... IDENTIFIED BY ...) and drop anonymous accounts (mariadb-secure-installation / mysql_secure_installation).",
  tags = { "database", "authentication" },
  ports = { 3306 },
  services = { "mysql" },
  run = function(ctx)
    local lines = {}
    for _, user in ipairs(USERS) do
      local sock, err = ctx:connect{ timeout = 5000 }
      if not sock then
        return nil, "connect: " .. tostring(err)
      end
      local p, seq = mysql.read_packet(sock)
      local g, why = mysql.decode_greeting(p)
      if not g then
        sock:close()
        return nil, "no greeting: " .. tostring(p and why or seq)
      elseif g.error_code then
        sock:close()
        return mysql.printable(string.sub(p, 4, 303))
      end
      local r, lerr = mysql.login(sock, g, user)
      sock:close()
      local name = user == "" and "anonymous" or user
      if r and r.ok then
        lines[#lines + 1] = name .. " account has empty password"
        ctx:finding{
          severity = "critical",
          title = "MySQL " .. name .. " account has an empty password",
          data = { user = user, version = mysql.printable(g.version or "") },
        }
      elseif not r then
        ctx:log("login as " .. name .. ": " .. tostring(lerr))
      end
    end
    if #lines > 0 then
      return "\n  " .. table.concat(lines, "\n  ") .. "\n"
    end
  end,
}
