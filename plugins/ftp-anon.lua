-- ftp-anon: whether an FTP server lets anyone log in as "anonymous".
--
-- Reads the greeting (multi-line replies "220-..." up to "220 ..."), sends
-- USER anonymous and, when asked for one, PASS moonscan@; a 230 reply is a
-- medium finding. Then QUIT. No directory is listed and no file is read.

local MAX_LINES = 64
local MAX_LINE = 2048
local TIMEOUT = 5000

-- One FTP reply: its code and lines, reading at most MAX_LINES lines.
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
    if i == 1 then
      code = string.match(line, "^(%d%d%d)")
      if not code then
        return nil, "not an FTP reply: " .. string.sub(line, 1, 80), lines
      end
      if string.sub(line, 4, 4) ~= "-" then
        return tonumber(code), nil, lines
      end
    elseif string.sub(line, 1, 4) == code .. " " or line == code then
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
  id = "ftp-anon",
  description = "Checks whether an FTP server allows anonymous login (USER anonymous), then quits.",
  categories = { "default", "auth", "safe" },
  ports = { 21 },
  services = { "ftp" },
  run = function(ctx)
    local sock, err = ctx:connect{ tls = ctx.tunnel == "ssl", timeout = TIMEOUT }
    if not sock then
      return nil, "connect: " .. tostring(err)
    end
    local code, rerr, greeting = read_reply(sock)
    if code ~= 220 then
      sock:close()
      return nil, "no 220 greeting: " .. (code and table.concat(greeting, " | ") or tostring(rerr))
    end

    local steps = {}
    local lines
    code, rerr, lines = command(sock, "USER anonymous")
    steps[#steps + 1] = "USER anonymous -> " .. (code and table.concat(lines, " | ") or tostring(rerr))
    local password_asked = false
    if code == 331 then
      password_asked = true
      code, rerr, lines = command(sock, "PASS moonscan@")
      steps[#steps + 1] = "PASS moonscan@ -> " .. (code and table.concat(lines, " | ") or tostring(rerr))
    end
    local logged_in = code == 230
    -- Leave politely; the answer does not matter.
    if sock:send("QUIT\r\n") then
      read_reply(sock)
    end
    sock:close()

    if not logged_in then
      return nil, "anonymous login refused: " .. table.concat(steps, "; ")
    end
    ctx:finding{
      severity = "medium",
      title = "Anonymous FTP login allowed",
      data = {
        code = 230,
        reply = table.concat(lines, "\n"),
        banner = table.concat(greeting, "\n"),
        password_asked = password_asked,
        dialogue = steps,
      },
    }
  end,
}
