-- ftp-syst: what an FTP server answers to SYST and STAT, as nmap's
-- ftp-syst shows it.
--
-- Reads the 220 greeting, sends SYST (RFC 959 section 4.1.3); a server that
-- wants a login first (503, 521 or an x3x code) gets USER anonymous /
-- PASS IEUser@ once, as nmap sends them, and SYST again. The usual
-- "UNIX Type: L8" says nothing and is left out, and with it the 215 code.
-- Then STAT: a 211 reply is kept as "\n" and its text, another 2xx reply as
-- its code, "\n" and its text. QUIT ends the session. Replies are read
-- within reply.read's bounds (64 lines of 2048 bytes), none after DEADLINE.

local reply = require "reply"

local TIMEOUT = 2500 -- ms per read
local DEADLINE = 6 -- seconds from the start: no read begins after it
local REPLY = { max_lines = 64, max_line = 2048 }

-- `sock` for reply.read, refusing to read past `deadline` (os.clock()).
local function bounded(sock, deadline)
  return {
    send = function(_, data)
      return sock:send(data)
    end,
    recv_line = function(_, max)
      if os.clock() > deadline then
        return nil, "deadline passed"
      end
      return sock:recv_line(max)
    end,
  }
end

local message_of = reply.message

-- SYST's answer worth showing, or nil (logging in anonymously once if asked).
local function syst_of(ctx, sock)
  local logged_in = false
  while true do
    local code, lines, err = reply.command(sock, "SYST", REPLY)
    if not code then
      ctx:log("ftp-syst: SYST: " .. tostring(err))
      return nil
    end
    local message = message_of(lines)
    if code == 215 then
      local stripped = string.gsub(message, "^UNIX Type: L8 *", "")
      return stripped ~= "" and stripped or nil
    elseif code < 300 then
      return ("%d %s"):format(code, message)
    elseif not logged_in and (code == 503 or code == 521 or (code % 100) // 10 == 3) then
      local ucode = reply.command(sock, "USER anonymous", REPLY)
      if ucode == 331 then
        ucode = reply.command(sock, "PASS IEUser@", REPLY)
      end
      if not ucode or ucode < 200 or ucode >= 300 then
        ctx:log("ftp-syst: anonymous login refused: " .. tostring(ucode))
        return nil
      end
      logged_in = true
    else
      ctx:log(("ftp-syst: SYST: %d %s"):format(code, message))
      return nil
    end
  end
end

return {
  id = "ftp-syst",
  description = "Shows what an FTP server answers to SYST and STAT, as nmap's ftp-syst does.",
  categories = { "default", "discovery", "safe" },
  tags = { "ftp" },
  ports = { 21, 990 },
  services = { "ftp", "ftps" },
  run = function(ctx)
    local deadline = os.clock() + DEADLINE
    local raw, err = ctx:connect{ timeout = TIMEOUT }
    if not raw then
      return nil, "connect: " .. tostring(err)
    end
    local sock = bounded(raw, deadline)
    local code, greeting, rerr = reply.read(sock, REPLY)
    if code ~= 220 then
      raw:close()
      return nil, "no 220 greeting: " .. (code and table.concat(greeting, " | ") or tostring(rerr))
    end

    local result, keys = {}, {}
    result.SYST = syst_of(ctx, sock)
    if result.SYST then
      keys[#keys + 1] = "SYST"
    end
    local scode, lines = reply.command(sock, "STAT", REPLY)
    if scode == 211 then
      result.STAT = "\n" .. message_of(lines)
    elseif scode and scode < 300 then
      result.STAT = ("%d\n%s"):format(scode, message_of(lines))
    end
    if result.STAT then
      keys[#keys + 1] = "STAT"
    end
    raw:send("QUIT\r\n")
    raw:close()

    if #keys == 0 then
      return nil, "neither SYST nor STAT told anything"
    end
    -- NSE's text of its ordered table: SYST, then STAT.
    local text = {}
    for _, k in ipairs(keys) do
      text[#text + 1] = "\n  " .. k .. ": " .. result[k]
    end
    return result, table.concat(text)
  end,
}
