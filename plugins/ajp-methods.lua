-- ajp-methods: which methods an AJP13 connector (Tomcat, JBoss...) allows,
-- from an OPTIONS request, as nmap's ajp-methods shows them.
--
-- Sends one AJP13 FORWARD_REQUEST (magic 12 34, length, prefix 2, method 1
-- = OPTIONS, then the strings protocol, URI, remote address, remote host
-- and server name, the port, is_ssl, the headers host and connection, and
-- FF for no more attributes), with the values nmap's ajp library sends.
-- The container answers with packets "AB", length, then a code:
-- 4 SEND_HEADERS (status, message, headers), 3 SEND_BODY, 5 END_RESPONSE.
-- A 200 with an Allow header gives the methods; anything else is nmap's
-- "Failed to get a valid response for the OPTION request" (a Tomcat with
-- nothing deployed at "/" answers 404, one requiring a secret 403; "OPTIONS
-- *", with --script-args ajp-methods.path=*, gets Tomcat's own Allow).
-- Methods other than GET, HEAD, POST and OPTIONS are listed as potentially
-- risky. At most MAX_PACKETS packets are read, none begun after DEADLINE.

local TIMEOUT = 2000 -- ms per read
local DEADLINE = 5 -- seconds from the start: no packet is begun after it
local MAX_PACKETS = 64
local FAILED = "Failed to get a valid response for the OPTION request"
local BORING = { GET = true, HEAD = true, POST = true, OPTIONS = true }

-- Response header codes (AJP13 "SEND_HEADERS").
local HEADER_NAMES = {
  [0xA001] = "Content-Type", [0xA002] = "Content-Language", [0xA003] = "Content-Length",
  [0xA004] = "Date", [0xA005] = "Last-Modified", [0xA006] = "Location",
  [0xA007] = "Set-Cookie", [0xA008] = "Set-Cookie2", [0xA009] = "Servlet-Engine",
  [0xA00A] = "Status", [0xA00B] = "WWW-Authenticate",
}

-- An AJP string: length, bytes, NUL; an empty one is the null string FFFF.
local function str(s)
  if s == nil or s == "" then
    return "\xFF\xFF"
  end
  return string.pack(">s2", s) .. "\0"
end

-- nmap sends the scanned address as remote address, server name and host.
local function forward_request(ctx, path)
  local body = table.concat({
    string.pack("BB", 2, 1), -- FORWARD_REQUEST, OPTIONS
    str("HTTP/1.1"), str(path), str(ctx.ip), str(""), str(ctx.ip),
    string.pack(">I2BI2", ctx.port, ctx.service == "https" and 1 or 0, 2),
    string.pack(">I2", 0xA00B), str(ctx.ip), -- host
    string.pack(">I2", 0xA006), str("keep-alive"), -- connection
    "\xFF",
  })
  return string.pack(">I2s2", 0x1234, body)
end

-- Status and lower-cased headers of a SEND_HEADERS packet's data.
local function parse_headers(data)
  local status, msg, pos = string.unpack(">I2s2", data, 2)
  pos += 1
  local count
  count, pos = string.unpack(">I2", data, pos)
  local headers = {}
  for _ = 1, count do
    local code, name, value
    code, pos = string.unpack(">I2", data, pos)
    if code < 0xA000 then
      name, pos = string.unpack("c" .. code, data, pos)
      pos += 1
    else
      name = HEADER_NAMES[code] or ("0x%04X"):format(code)
    end
    value, pos = string.unpack(">s2", data, pos)
    pos += 1
    headers[string.lower(name)] = value
  end
  return { status = status, message = msg, headers = headers }
end

-- The response's status and headers, or nil, why.
local function exchange(sock, request, deadline)
  local ok, err = sock:send(request)
  if not ok then
    return nil, "send: " .. tostring(err)
  end
  local response
  for _ = 1, MAX_PACKETS do
    if os.clock() > deadline then
      return nil, "too slow"
    end
    local head, herr = sock:recv_exact(4)
    if not head then
      return nil, "receive: " .. tostring(herr)
    end
    local magic, length = string.unpack(">c2I2", head)
    if magic ~= "AB" then
      return nil, "invalid magic " .. ("%q"):format(magic)
    end
    if length == 0 then
      return nil, "empty packet"
    end
    local data, derr = sock:recv_exact(length)
    if not data then
      return nil, "receive: " .. tostring(derr)
    end
    local code = string.byte(data, 1)
    if code == 4 then
      local parsed, perr = pcall(parse_headers, data)
      if not parsed then
        return nil, "bad SEND_HEADERS: " .. tostring(perr)
      end
      response = perr
    elseif code == 5 then
      return response or {}
    end
  end
  return nil, "more than " .. MAX_PACKETS .. " packets"
end

return {
  id = "ajp-methods",
  description = "Lists the methods an AJP13 connector allows, from an OPTIONS request, and the potentially risky ones, as nmap's ajp-methods does.",
  categories = { "default", "safe" },
  tags = { "ajp", "http" },
  args = { "ajp-methods.path" },
  ports = { 8009 },
  services = { "ajp13" },
  run = function(ctx)
    local path = ctx.args["ajp-methods.path"] or "/"
    local deadline = os.clock() + DEADLINE
    local sock, err = ctx:connect{ tls = ctx.tunnel == "ssl", timeout = TIMEOUT }
    if not sock then
      -- nmap says "Failed to connect to server" only when debugging.
      return nil, "connect: " .. tostring(err)
    end
    local response, why = exchange(sock, forward_request(ctx, path), deadline)
    sock:close()
    local allow = response and response.headers and response.headers.allow
    if not response or response.status ~= 200 or not allow then
      ctx:log("ajp-methods: " .. (why or ("status " .. tostring(response.status) .. " " .. tostring(response.message))))
      return FAILED
    end

    -- nmap splits the Allow header on ", " (stringaux.strsplit(",%s", ...)).
    local methods, risky = {}, {}
    local start = 1
    while true do
      local a, b = string.find(allow, ",%s", start)
      methods[#methods + 1] = string.sub(allow, start, (a or 0) - 1)
      if not a then
        break
      end
      start = b + 1
    end
    for _, m in ipairs(methods) do
      if not BORING[m] then
        risky[#risky + 1] = m
      end
    end
    -- stdnse.format_output's layout: a newline, then each line indented two spaces.
    local text = "\n  Supported methods: " .. table.concat(methods, " ") .. "\n"
    if #risky > 0 then
      text ..= "  Potentially risky methods: " .. table.concat(risky, " ") .. "\n"
      text ..= "  See https://nmap.org/nsedoc/scripts/ajp-methods.html\n"
    end
    return text
  end,
}
