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

-- One SMTP reply: its code and lines ("250-..." ... "250 ..."), bounded.
local function read_reply(sock)
  local lines = {}
  local code
  for i = 1, MAX_LINES do
    local line, err = sock:recv_until("\n", MAX_LINE)
    if not line then
      return nil, tostring(err), lines
    end
    line = (string.gsub(line, "\r?\n$", ""))
    lines[#lines + 1] = line
    local c, sep = string.match(line, "^(%d%d%d)([ -]?)")
    if not c then
      return nil, "not an SMTP reply: " .. string.sub(line, 1, 80), lines
    end
    if i == 1 then
      code = c
    elseif c ~= code then
      return nil, "reply codes differ within one reply", lines
    end
    if sep ~= "-" then
      return tonumber(code), nil, lines
    end
  end
  return nil, "reply longer than " .. MAX_LINES .. " lines", lines
end

local function command(sock, text)
  local ok, err = sock:send(text .. "\r\n")
  if not ok then
    return nil, "send: " .. tostring(err), {}
  end
  return read_reply(sock)
end

-- Without surrounding white space, in linear time: a pattern such as
-- "(.-)%s*$" is quadratic on a long run of spaces a server can send.
local function trim(s)
  local a = string.find(s, "%S")
  if not a then
    return ""
  end
  local b = #s
  while b > a and string.find(string.sub(s, b, b), "^%s") do
    b -= 1
  end
  return string.sub(s, a, b)
end

-- nmap's cleaning of a reply: prefixes "CODE-"/"CODE " off each line,
-- lines joined by `join`, runs of white space made one space.
local function clean(lines, code, join)
  local text = trim(table.concat(lines, "\n"))
  local parts = {}
  for line in string.gmatch(text .. "\n", "([^\n]*)\n") do
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
    local code, rerr, greeting = read_reply(sock)
    if not code then
      sock:close()
      return nil, "no greeting: " .. (#greeting > 0 and table.concat(greeting, " | ") or tostring(rerr))
    end

    local lines
    code, rerr, lines = command(sock, "EHLO " .. domain)
    if code ~= 250 then
      if sock:send("QUIT\r\n") then
        read_reply(sock)
      end
      sock:close()
      if not code then
        return nil, "EHLO: " .. tostring(rerr)
      end
      -- nmap's text when EHLO is refused.
      return "SMTP: EHLO " .. table.concat(lines, "\r\n") .. "\r\n"
    end
    local result = { clean(lines, "250", ", ") }
    local hcode, _, hlines = command(sock, "HELP")
    if hcode == 211 or hcode == 214 then
      result[#result + 1] = clean(hlines, "214", " ")
    end
    if sock:send("QUIT\r\n") then
      read_reply(sock)
    end
    sock:close()
    return table.concat(result, "\n ")
  end,
}
