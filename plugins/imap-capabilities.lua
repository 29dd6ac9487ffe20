-- imap-capabilities: the capabilities an IMAP server lists to CAPABILITY
-- (RFC 3501 section 6.1.1), as nmap's imap-capabilities shows them.
--
-- Reads the greeting ("* OK ..."), sends "A0001 CAPABILITY" and reads lines
-- up to the tagged "A0001 ..." reply (or a "+" continuation). nmap joins
-- those lines with nothing between them and takes every run of letters,
-- digits and "+=-" after "* CAPABILITY" as a capability, so the tagged
-- line's words count too, and the last capability runs into its tag
-- ("LOGINDISABLEDA0001 OK Pre-login capabilities listed ..."); this does
-- the same. Each word once. nmap lists them in Lua's hash order, which
-- changes from run to run; here they come in the order received.

local MAX_LINE = 8192
local MAX_LINES = 256
local TIMEOUT = 5000

return {
  id = "imap-capabilities",
  description = "Lists the capabilities an IMAP server announces to CAPABILITY, as nmap's imap-capabilities does.",
  categories = { "default", "safe" },
  ports = { 143, 993 },
  services = { "imap", "imaps" },
  run = function(ctx)
    -- TLS on imaps; else the port's tunnel decides (tls = nil).
    local sock, err = ctx:connect{ tls = ctx.service == "imaps" or nil, timeout = TIMEOUT }
    if not sock then
      return nil, "connect: " .. tostring(err)
    end
    local greeting, gerr = sock:recv_line(MAX_LINE)
    if not greeting then
      sock:close()
      return nil, "no greeting: " .. tostring(gerr)
    end
    local ok, serr = sock:send("A0001 CAPABILITY\r\n")
    if not ok then
      sock:close()
      return nil, "send: " .. tostring(serr)
    end

    -- The reply's lines up to the tagged one, joined as nmap joins them.
    local parts = {}
    local done = false
    for _ = 1, MAX_LINES do
      local line, rerr = sock:recv_line(MAX_LINE)
      if not line then
        sock:close()
        return nil, "CAPABILITY reply: " .. tostring(rerr)
      end
      parts[#parts + 1] = line
      if string.sub(line, 1, 5) == "A0001" or string.sub(line, 1, 1) == "+" then
        done = true
        break
      end
    end
    sock:send("A0002 LOGOUT\r\n")
    sock:close()
    if not done then
      return nil, "CAPABILITY reply longer than " .. MAX_LINES .. " lines"
    end
    local data = table.concat(parts)
    local _, e = string.find(data, "^%*%s+CAPABILITY")
    if not e then
      return nil, "no * CAPABILITY reply: " .. string.sub(data, 1, 200)
    end

    local out, seen = {}, {}
    for word in string.gmatch(string.sub(data, e + 1), "[%w%+=-]+") do
      if not seen[word] then
        seen[word] = true
        out[#out + 1] = word
      end
    end
    return table.concat(out, " ")
  end,
}
