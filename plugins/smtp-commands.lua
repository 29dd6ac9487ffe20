-- smtp-commands: the SMTP extensions a mail server announces to EHLO and
-- the commands it lists to HELP, as nmap's smtp-commands shows them.
--
-- Reads the greeting, sends EHLO <domain> (the smtp-commands.domain or
-- smtp.domain script argument, else nmap's default "nmap.scanme.org", so
-- the text reads as nmap's), then HELP, then QUIT. Nothing is sent for
-- delivery. The text is nmap's: the EHLO reply without its "250-"
-- prefixes, its lines joined by ", ", then "\n " and HELP's answer
-- without its "214-" prefixes, on one line.

local MAX_LINES = 128
local MAX_LINE = 2048
local TIMEOUT = 10000

local reply = require "reply"
local text = require "text"

local REPLY = { max_lines = MAX_LINES, max_line = MAX_LINE, strict = true }

-- nmap's cleaning of a reply: prefixes "CODE-"/"CODE " off each line,
-- lines joined by `join`, runs of white space made one space.
local function clean(lines, code, join)
  local joined = text.trim(table.concat(lines, "\n"))
  local parts = {}
  for line in string.gmatch(joined .. "\n", "([^\n]*)\n") do
    parts[#parts + 1] = (string.gsub(line, "^" .. code .. "[%-%s]+", ""))
  end
  return (string.gsub(table.concat(parts, join), "%s+", " "))
end

return {
  id = "smtp-commands",
  description = "Lists the extensions an SMTP server announces to EHLO and the commands it lists to HELP, as nmap's smtp-commands does.",
  categories = { "default", "discovery", "safe" },
  args = { "smtp-commands.domain", "smtp.domain" },
  ports = { 25, 465, 587 },
  services = { "smtp", "smtps", "submission" },
  run = function(ctx)
    local tls = ctx.tunnel == "ssl" or (ctx.port == 465 and ctx.service ~= "smtp")
    local domain = ctx.args["smtp-commands.domain"] or ctx.args["smtp.domain"] or "nmap.scanme.org"
    local sock, err = ctx:connect{ tls = tls, timeout = TIMEOUT }
    if not sock then
      return nil, "connect: " .. tostring(err)
    end
    local code, greeting, rerr = reply.read(sock, REPLY)
    if not code then
      sock:close()
      return nil, "no greeting: " .. (#greeting > 0 and table.concat(greeting, " | ") or tostring(rerr))
    end

    local lines
    code, lines, rerr = reply.command(sock, "EHLO " .. domain, REPLY)
    if code ~= 250 then
      reply.command(sock, "QUIT", REPLY)
      sock:close()
      if not code then
        return nil, "EHLO: " .. tostring(rerr)
      end
      -- nmap's text when EHLO is refused.
      return "SMTP: EHLO " .. table.concat(lines, "\r\n") .. "\r\n"
    end
    local result = { clean(lines, "250", ", ") }
    local hcode, hlines = reply.command(sock, "HELP", REPLY)
    if hcode == 211 or hcode == 214 then
      result[#result + 1] = clean(hlines, "214", " ")
    end
    reply.command(sock, "QUIT", REPLY)
    sock:close()
    return table.concat(result, "\n ")
  end,
}
