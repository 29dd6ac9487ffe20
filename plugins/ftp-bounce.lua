-- ftp-bounce: whether an FTP server takes a PORT command naming another
-- host than the client's (the FTP bounce of RFC 2577), as nmap's
-- ftp-bounce tests it.
--
-- Reads the 2xx greeting and logs in (USER ftp-bounce.username, default
-- anonymous; PASS ftp-bounce.password, default IEUser@, when asked). As
-- nmap, a refusal mentioning SSL, TLS or security is retried once after
-- AUTH TLS; a 332 (an account wanted) is a refusal, where nmap's ACCT
-- step stops on a Lua error. Then PORT to ftp-bounce.checkhost (an IPv4
-- address, default 127.0.0.1: the server's own loopback, which a
-- connection could never leave; nmap resolves scanme.nmap.org) at port
-- 20560 (80,80); a refusal ends the test silently, as in nmap. Then PORT
-- to port 80 (0,80): refused is "server forbids bouncing to low ports
-- <1025", taken is "bounce working!". PORT only names an address: no data
-- command (LIST, RETR, ...) is ever sent, so the server never connects
-- anywhere.

local reply = require "reply"

local TIMEOUT = 5000
local REPLY = { max_lines = 64, max_line = 2048 }

local function secure_refusal(code, lines)
  local m = table.concat(lines or {}, " ")
  return code and code >= 400 and (string.find(m, "[Ss][Ss][Ll]") or string.find(m, "[Tt][Ll][Ss]")
    or string.find(m, "[Ss][Ee][Cc][Uu][Rr]")) ~= nil
end

-- A logged-in control connection, or nil, why.
local function login(ctx, user, pass, tls)
  local sock, err = ctx:connect{ timeout = TIMEOUT }
  if not sock then
    return nil, "connect: " .. tostring(err)
  end
  local code, lines
  if tls then
    local ok, terr = sock:starttls("ftp")
    if not ok then
      sock:close()
      return nil, "AUTH TLS: " .. tostring(terr)
    end
  else
    code, lines, err = reply.read(sock, REPLY)
    if not code or code < 200 or code > 299 then
      sock:close()
      return nil, "no 2xx greeting: " .. (code and table.concat(lines, " | ") or tostring(err))
    end
  end
  code, lines = reply.command(sock, "USER " .. user, REPLY)
  if code == 331 then
    code, lines = reply.command(sock, "PASS " .. pass, REPLY)
  end
  if code and code >= 200 and code < 300 then
    return sock
  end
  sock:close()
  if not tls and ctx.tunnel ~= "ssl" and secure_refusal(code, lines) then
    return login(ctx, user, pass, true)
  end
  return nil, "login refused: " .. table.concat(lines or {}, " | ")
end

return {
  id = "ftp-bounce",
  description = "Checks whether an FTP server accepts PORT to a third-party address (FTP bounce), as nmap's ftp-bounce does.",
  categories = { "default", "safe" },
  cwe = { "CWE-441" },
  references = { "https://www.rfc-editor.org/rfc/rfc2577" },
  remediation = "Refuse PORT and EPRT to any address but the client's (vsftpd: port_promiscuous=NO; proftpd: AllowForeignAddress off).",
  tags = { "ftp" },
  args = { "ftp-bounce.username", "ftp-bounce.password", "ftp-bounce.checkhost" },
  ports = { 21, 990 },
  services = { "ftp", "ftps" },
  run = function(ctx)
    local host = ctx.args["ftp-bounce.checkhost"] or "127.0.0.1"
    local octets = { string.match(host, "^(%d+)%.(%d+)%.(%d+)%.(%d+)$") }
    for i = 1, 4 do
      octets[i] = tonumber(octets[i])
      if not octets[i] or octets[i] > 255 then
        return nil, "ftp-bounce.checkhost must be an IPv4 address, not " .. string.sub(host, 1, 60)
      end
    end
    local user = ctx.args["ftp-bounce.username"] or "anonymous"
    local pass = ctx.args["ftp-bounce.password"] or "IEUser@"
    if string.find(user .. pass, "[\r\n]") then
      return nil, "ftp-bounce.username and password are one line each"
    end
    local sock, err = login(ctx, user, pass, false)
    if not sock then
      return nil, err
    end
    local port = "PORT " .. table.concat(octets, ",") .. ","
    local code, lines, rerr = reply.command(sock, port .. "80,80", REPLY)
    local result, severity
    if code and code >= 200 and code < 300 then
      code, lines, rerr = reply.command(sock, port .. "0,80", REPLY)
      if code and (code < 200 or code > 299) then
        result, severity = "server forbids bouncing to low ports <1025", "low"
      elseif code then
        result, severity = "bounce working!", "medium"
      end
    end
    reply.command(sock, "QUIT", REPLY)
    sock:close()
    if not result then
      return nil, "PORT refused: " .. (code and table.concat(lines, " | ") or tostring(rerr))
    end
    ctx:finding{
      severity = severity,
      title = "FTP server accepts PORT to a third-party address (FTP bounce)",
      data = { address = host, result = result, low_port_reply = table.concat(lines, "\n") },
    }
    return result
  end,
}
