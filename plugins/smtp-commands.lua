-- smtp-commands: the SMTP extensions a mail server announces to EHLO and
-- the commands it lists to HELP, as nmap's smtp-commands shows them, on
-- SMTP (25), submission (587) and SMTPS (465, TLS from the first byte).
--
-- Opens the session as nmap's smtp library does (lib/smtp.lua: TLS first
-- on 465 and wherever service detection found TLS, plain first elsewhere,
-- the other way if the first gives no greeting), sends EHLO <domain> (the
-- smtp-commands.domain or smtp.domain script argument, else nmap's default
-- "nmap.scanme.org", so the text reads as nmap's), then HELP, then QUIT.
-- Nothing is sent for delivery, and STARTTLS is not used: on 587 the text
-- is the cleartext EHLO's, which lists STARTTLS, as nmap's. The text is
-- nmap's: the EHLO reply without its "250-" prefixes, its lines joined by
-- ", ", then "\n " and HELP's answer without its "214-" prefixes, on one
-- line.

local TIMEOUT = 10000

local reply = require "reply"
local smtp = require "smtp"
local text = require "text"

local REPLY = smtp.REPLY

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
    local sock, _, err = smtp.connect(ctx, { timeout = TIMEOUT })
    if not sock then
      return nil, err
    end
    local code, lines, rerr = reply.command(sock, "EHLO " .. smtp.domain(ctx, "smtp-commands"), REPLY)
    if code ~= 250 then
      smtp.quit(sock)
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
    smtp.quit(sock)
    return table.concat(result, "\n ")
  end,
}
