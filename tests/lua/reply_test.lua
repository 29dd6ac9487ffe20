-- reply_test: unit tests of lib/reply.lua (three-digit-code replies) on
-- fixed lines, run offline with
-- `moonscan plugins test tests/lua/reply_test.lua --plugin-dir plugins`.

local reply = require "reply"

local passed = 0
local function check(cond, what)
  assert(cond, what)
  passed += 1
end

-- A socket that hands out `lines` one recv_line at a time, then fails as a
-- closed connection does; it keeps what is sent to it.
local function fake(lines)
  local i, sent = 0, {}
  return {
    sent = sent,
    recv_line = function(_, max)
      i += 1
      local l = lines[i]
      if l == nil then
        return nil, "closed"
      end
      if #l > max then
        return nil, "no line end in the first " .. max .. " bytes"
      end
      return l
    end,
    send = function(_, data)
      sent[#sent + 1] = data
      return true
    end,
  }
end

return {
  id = "reply-test",
  description = "Unit tests of the reply library.",
  categories = { "safe" },
  ports = { 80 },
  run = function()
    -- One line.
    local code, lines, err = reply.read(fake({ "220 ready" }))
    check(code == 220 and #lines == 1 and err == nil, "one-line reply")
    -- Multi-line (RFC 5321 4.2.1): the last line has a space after the code.
    code, lines = reply.read(fake({ "250-mail.example", "250-SIZE 1000", "250 HELP" }))
    check(code == 250 and #lines == 3, "multi-line reply")
    check(reply.message(lines) == "mail.example\n250-SIZE 1000\nHELP", "message: middle lines as they are, as nmap's ftp library")
    local t = reply.text(lines)
    check(t[1] == "mail.example" and t[2] == "SIZE 1000" and t[3] == "HELP", "text strips the codes")
    -- FTP (RFC 959 4.2): lines between first and last may hold any text.
    code, lines = reply.read(fake({ "230-Welcome", "  any text here", "230 Login successful." }))
    check(code == 230 and #lines == 3, "FTP's free middle lines")
    check(reply.message(lines) == "Welcome\n  any text here\nLogin successful.", "FTP message")
    -- SMTP is strict: every line carries the code.
    code, lines, err = reply.read(fake({ "250-a", "free text", "250 b" }), { strict = true })
    check(code == nil and err == "reply codes differ within one reply", "strict refuses a free line")
    -- Not a reply.
    code, lines, err = reply.read(fake({ "SSH-2.0-OpenSSH" }))
    check(code == nil and #lines == 1 and err:find("not a three-digit reply", 1, true), "not a reply")
    -- Cut short: the lines read so far come back with why.
    code, lines, err = reply.read(fake({ "220-first" }))
    check(code == nil and #lines == 1 and err == "closed", "a closed connection mid-reply")
    -- Bounded: too many lines, too long a line.
    local many = {}
    for i = 1, 100 do
      many[i] = "220-line " .. i
    end
    code, lines, err = reply.read(fake(many), { max_lines = 10 })
    check(code == nil and #lines == 10 and err == "reply longer than 10 lines", "at most max_lines")
    code, lines, err = reply.read(fake({ string.rep("x", 5000) }))
    check(code == nil and #lines == 0 and err:find("2048", 1, true), "a line past max_line")
    -- A lone code ends a multi-line reply too.
    code, lines = reply.read(fake({ "211-Features:", " UTF8", "211" }))
    check(code == 211 and #lines == 3, "a lone code ends the reply")
    -- command sends the line with CRLF, then reads.
    local s = fake({ "214 help" })
    code = reply.command(s, "HELP")
    check(code == 214 and s.sent[1] == "HELP\r\n", "command sends CRLF and reads")
    local failing = { send = function() return nil, "broken pipe" end }
    code, lines, err = reply.command(failing, "QUIT")
    check(code == nil and #lines == 0 and err == "send: broken pipe", "a failed send")
    return "ok " .. passed
  end,
}
