-- ftp-anon: whether an FTP server lets anyone log in as "anonymous", and
-- what its root directory holds, as nmap's ftp-anon shows it.
--
-- Reads the greeting (multi-line replies "220-..." up to "220 ..."), sends
-- USER anonymous and, when asked for one, PASS moonscan@; a 230 reply is a
-- medium finding. Then lists the root directory and QUITs. nmap lists it
-- with LIST on a passive data connection; a plugin may only connect to the
-- ports the scan scans, so the listing comes through the control connection
-- instead: "STAT ." answers with the same ls lines (its "." and ".." and
-- other dot entries, which LIST leaves out, are dropped). Lines of entries
-- anyone may write get " [NSE: writeable]", as nmap marks them. Nothing is
-- read or written.

local MAX_LINES = 64
local MAX_LINE = 2048
local MAX_LIST_LINES = 10000
local TIMEOUT = 5000

local reply = require "reply"

local REPLY = { max_lines = MAX_LINES, max_line = MAX_LINE }

local message_of = reply.message

-- The name an ls -l line ends with ("name" or "name -> target"), or nil.
local function entry_name(line)
  return string.match(line, "^[%-bcdlps][%-rwxsStTl]+%+?%.?%s+%d+%s+%S+%s+%S+%s+%d+%s+%a+%s+%d+%s+[%d:]+%s(.*)$")
end

-- The root directory's entries through STAT, as LIST would list them; or nil, why.
local function listing(sock, max)
  local code, lines, err = reply.command(sock, "STAT .", { max_lines = MAX_LIST_LINES, max_line = MAX_LINE })
  -- A listing longer than MAX_LIST_LINES: the lines read so far.
  local cut = not code and #lines > 1 and string.match(lines[1], "^21[123]%-") ~= nil
  if not cut and code ~= 211 and code ~= 212 and code ~= 213 then
    return nil, code and table.concat(lines, " "):sub(1, 200) or tostring(err)
  end
  local out = {}
  -- The first and last lines are the reply's own ("213-Status follows:", "213 End of status").
  for i = 2, cut and #lines or #lines - 1 do
    -- Some servers start each line with "213-" or a space (RFC 959 allows both).
    local line = string.gsub(string.gsub(lines[i], "^%d%d%d%-", ""), "^ ", "")
    local name = entry_name(line)
    if line ~= "" and not (name and string.sub(name, 1, 1) == ".") and not string.match(line, "^total %d+$") then
      if max and #out >= max then
        break
      end
      out[#out + 1] = line
    end
  end
  return out
end

return {
  id = "ftp-anon",
  description = "Checks whether an FTP server allows anonymous login (USER anonymous) and lists its root directory as nmap's ftp-anon does.",
  categories = { "default", "auth", "safe" },
  cwe = { "CWE-284" },
  references = { "https://www.rfc-editor.org/rfc/rfc1635" },
  remediation = "Turn anonymous login off (vsftpd: anonymous_enable=NO) unless the server is meant to publish files, and then keep its root read-only.",
  tags = { "ftp", "authentication" },
  args = { "ftp-anon.maxlist" },
  ports = { 21 },
  services = { "ftp" },
  run = function(ctx)
    local max_list = tonumber(ctx.args["ftp-anon.maxlist"] or "")
    if not max_list then
      max_list = (ctx.verbosity or 0) == 0 and 20 or nil
    elseif max_list < 0 then
      max_list = nil
    end

    local sock, err = ctx:connect{ timeout = TIMEOUT }
    if not sock then
      return nil, "connect: " .. tostring(err)
    end
    local code, greeting, rerr = reply.read(sock, REPLY)
    if code ~= 220 then
      sock:close()
      return nil, "no 220 greeting: " .. (code and table.concat(greeting, " | ") or tostring(rerr))
    end

    local steps = {}
    local lines
    code, lines, rerr = reply.command(sock, "USER anonymous", REPLY)
    steps[#steps + 1] = "USER anonymous -> " .. (code and table.concat(lines, " | ") or tostring(rerr))
    local password_asked = false
    if code == 331 then
      password_asked = true
      code, lines, rerr = reply.command(sock, "PASS moonscan@", REPLY)
      steps[#steps + 1] = "PASS moonscan@ -> " .. (code and table.concat(lines, " | ") or tostring(rerr))
    end
    local logged_in = code == 230

    local result
    if logged_in then
      result = { "Anonymous FTP login allowed (FTP code " .. code .. ")" }
      if not max_list or max_list > 0 then
        local entries, why = listing(sock, max_list)
        if not entries then
          result[#result + 1] = "Can't get directory listing: " .. why
        else
          for _, item in ipairs(entries) do
            if string.match(item, "^[d-].......w.") then
              item ..= " [NSE: writeable]"
            end
            result[#result + 1] = item
          end
          if max_list and #entries == max_list then
            result[#result + 1] = ("Only %d shown. Use --script-args ftp-anon.maxlist=-1 to see all."):format(#entries)
          end
        end
      end
    end
    -- Leave politely; the answer does not matter.
    reply.command(sock, "QUIT", REPLY)
    sock:close()

    if not logged_in then
      -- nmap prints nothing for 421 and 530, and the reply for other codes.
      if code and code ~= 421 and code ~= 530 then
        return ("got code %d %q."):format(code, message_of(lines))
      end
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
    return table.concat(result, "\n")
  end,
}
