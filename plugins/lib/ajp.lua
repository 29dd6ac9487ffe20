-- ajp: AJP13 (Apache JServ Protocol 1.3: Tomcat, JBoss...) as nmap's ajp
-- library speaks it: a FORWARD_REQUEST, and the container's packets read
-- back to its SEND_HEADERS.
--
--   local ajp = require "ajp"
--   local response, why = ajp.exchange(sock, ajp.forward_request(ctx, "/"), deadline)
--   -- response.status, response.message, response.headers (lower-case names)
--
-- A FORWARD_REQUEST is magic 12 34, length, prefix 2, method 1 = OPTIONS,
-- then the strings protocol, URI, remote address, remote host and server
-- name, the port, is_ssl, the headers host and connection, and FF for no
-- more attributes, with the values nmap's ajp library sends. The container
-- answers with packets "AB", length, then a code: 4 SEND_HEADERS (status,
-- message, headers), 3 SEND_BODY, 5 END_RESPONSE. At most MAX_PACKETS
-- packets are read, none begun after the deadline.

local ajp = {}

ajp.MAX_PACKETS = 64

-- Response header codes (AJP13 "SEND_HEADERS").
ajp.HEADER_NAMES = {
  [0xA001] = "Content-Type", [0xA002] = "Content-Language", [0xA003] = "Content-Length",
  [0xA004] = "Date", [0xA005] = "Last-Modified", [0xA006] = "Location",
  [0xA007] = "Set-Cookie", [0xA008] = "Set-Cookie2", [0xA009] = "Servlet-Engine",
  [0xA00A] = "Status", [0xA00B] = "WWW-Authenticate",
}

-- An AJP string: length, bytes, NUL; an empty one is the null string FFFF.
function ajp.string(s)
  if s == nil or s == "" then
    return "\xFF\xFF"
  end
  return string.pack(">s2", s) .. "\0"
end

-- nmap sends the scanned address as remote address, server name and host.
function ajp.forward_request(ctx, path)
  local body = table.concat({
    string.pack("BB", 2, 1), -- FORWARD_REQUEST, OPTIONS
    ajp.string("HTTP/1.1"), ajp.string(path), ajp.string(ctx.ip), ajp.string(""), ajp.string(ctx.ip),
    string.pack(">I2BI2", ctx.port, ctx.service == "https" and 1 or 0, 2),
    string.pack(">I2", 0xA00B), ajp.string(ctx.ip), -- host
    string.pack(">I2", 0xA006), ajp.string("keep-alive"), -- connection
    "\xFF",
  })
  return string.pack(">I2s2", 0x1234, body)
end

-- Status and lower-cased headers of a SEND_HEADERS packet's data.
function ajp.parse_headers(data)
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
      name = ajp.HEADER_NAMES[code] or ("0x%04X"):format(code)
    end
    value, pos = string.unpack(">s2", data, pos)
    pos += 1
    headers[string.lower(name)] = value
  end
  return { status = status, message = msg, headers = headers }
end

-- Sends `request` and reads the response's status and headers (an empty
-- table when END_RESPONSE came without SEND_HEADERS), or nil, why; no
-- packet is begun after `deadline` (os.clock() seconds).
function ajp.exchange(sock, request, deadline)
  local ok, err = sock:send(request)
  if not ok then
    return nil, "send: " .. tostring(err)
  end
  local response
  for _ = 1, ajp.MAX_PACKETS do
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
      local parsed, perr = pcall(ajp.parse_headers, data)
      if not parsed then
        return nil, "bad SEND_HEADERS: " .. tostring(perr)
      end
      response = perr
    elseif code == 5 then
      return response or {}
    end
  end
  return nil, "more than " .. ajp.MAX_PACKETS .. " packets"
end

return ajp
