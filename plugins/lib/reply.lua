-- reply: replies of the protocols that answer with three-digit codes (FTP,
-- SMTP, NNTP, POP-less cousins): "220 ready", or a multi-line reply
-- "250-first" ... "250 last" (RFC 959 section 4.2, RFC 5321 section 4.2).
--
--   local reply = require "reply"
--   local code, lines, err = reply.read(sock)              -- the greeting
--   local code, lines, err = reply.command(sock, "EHLO x") -- a line, and its reply
--
-- Both return the code (a number, nil when no whole reply came), the
-- reply's lines read (without line ends; a table, possibly empty), and why
-- there is no code. A reply is read line by
-- line within bounds: at most `max_lines` lines (default 64) of at most
-- `max_line` bytes (default 2048) each. With `strict` (SMTP), every line
-- must start with the reply's code; FTP lets the lines between the first
-- and the last hold any text.

local reply = {}

local MAX_LINES = 64
local MAX_LINE = 2048

function reply.read(sock, opts)
  opts = opts or {}
  local max_lines = opts.max_lines or MAX_LINES
  local lines = {}
  local code
  for i = 1, max_lines do
    local line, err = sock:recv_line(opts.max_line or MAX_LINE)
    if not line then
      return nil, lines, tostring(err)
    end
    lines[#lines + 1] = line
    if i == 1 then
      code = string.match(line, "^(%d%d%d)")
      if not code then
        return nil, lines, "not a three-digit reply: " .. string.sub(line, 1, 80)
      end
      if string.sub(line, 4, 4) ~= "-" then
        return tonumber(code), lines
      end
    elseif string.sub(line, 1, 4) == code .. " " or line == code then
      return tonumber(code), lines
    elseif opts.strict and string.sub(line, 1, 4) ~= code .. "-" then
      return nil, lines, "reply codes differ within one reply"
    end
  end
  return nil, lines, "reply longer than " .. max_lines .. " lines"
end

function reply.command(sock, line, opts)
  local ok, err = sock:send(line .. "\r\n")
  if not ok then
    return nil, {}, "send: " .. tostring(err)
  end
  return reply.read(sock, opts)
end

-- A reply's message as nmap's ftp library gives it: the first line without
-- its "NNN-" or "NNN ", the last without its "NNN ", the lines between as
-- they are, joined by "\n".
function reply.message(lines)
  local parts = {}
  for i, line in ipairs(lines) do
    if i == 1 then
      line = string.gsub(line, "^%d%d%d[ -]?", "")
    elseif i == #lines then
      line = string.gsub(line, "^%d%d%d ?", "")
    end
    parts[#parts + 1] = line
  end
  return table.concat(parts, "\n")
end

-- The text of a reply's lines: each without its "NNN-" or "NNN " prefix.
function reply.text(lines)
  local out = {}
  for i, l in ipairs(lines) do
    out[i] = string.match(l, "^%d%d%d[ -]?(.*)$") or l
  end
  return out
end

return reply
