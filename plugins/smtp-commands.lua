-- smtp-commands: the SMTP extensions a mail server announces to EHLO, as
-- nmap's smtp-commands reports them. Reads the greeting, sends
-- EHLO moonscan.test (HELO when EHLO is refused), lists the 250- lines
-- after the first, then QUIT. Nothing is sent for delivery.

local MAX_LINES = 128
local MAX_LINE = 2048
local TIMEOUT = 5000

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

return {
  id = "smtp-commands",
  description = "Lists the extensions an SMTP server announces in its EHLO reply.",
  categories = { "default", "discovery", "safe" },
  ports = { 25, 465, 587 },
  services = { "smtp", "smtps", "submission" },
  run = function(ctx)
    local tls = ctx.tunnel == "ssl" or (ctx.port == 465 and ctx.service ~= "smtp")
    local sock, err = ctx:connect{ tls = tls, timeout = TIMEOUT }
    if not sock then
      return nil, "connect: " .. tostring(err)
    end
    local code, rerr, greeting = read_reply(sock)
    if code ~= 220 then
      sock:close()
      return nil, "no 220 greeting: " .. (code and table.concat(greeting, " | ") or tostring(rerr))
    end

    local verb = "EHLO"
    local lines
    code, rerr, lines = command(sock, "EHLO moonscan.test")
    if code ~= 250 then
      verb = "HELO"
      code, rerr, lines = command(sock, "HELO moonscan.test")
    end
    if sock:send("QUIT\r\n") then
      read_reply(sock)
    end
    sock:close()
    if code ~= 250 then
      return nil, "EHLO and HELO refused: " .. (code and table.concat(lines, " | ") or tostring(rerr))
    end

    -- The first line names the server; each later line is one extension.
    local hostname = string.match(lines[1], "^250[ -](%S+)")
    local extensions = {}
    for i = 2, #lines do
      local ext = string.match(lines[i], "^250[ -](.-)%s*$")
      if ext and ext ~= "" then
        extensions[#extensions + 1] = ext
      end
    end
    local data = {
      banner = table.concat(greeting, "\n"),
      command = verb .. " moonscan.test",
      hostname = hostname,
      greeting = lines[1],
      tls = tls,
    }
    if #extensions > 0 then
      data.extensions = extensions
    end
    ctx:finding{
      severity = "info",
      title = #extensions > 0 and ("SMTP extensions: " .. table.concat(extensions, ", "))
        or (verb .. " answered without extensions"),
      data = data,
    }
  end,
}
