-- pgsql: the PostgreSQL frontend/backend protocol before authentication:
-- the startup packet, SSLRequest, and the messages a server answers with
-- (ErrorResponse, NegotiateProtocolVersion, AuthenticationRequest,
-- ParameterStatus), in protocol 3 and in the old protocol 2 error format.
--
--   local pgsql = require "pgsql"
--   sock:send(pgsql.startup(3, 0, { { "user", "moonscan" } }))
--   local kind, body = pgsql.read_message(sock)   -- "E", body / nil, why
--   local f = pgsql.fields(body)                 -- { S = "FATAL", C = "28000", M = ..., F, L, R }
--
-- A message is a type byte, a 4-byte big-endian length (counting itself)
-- and the body; one longer than `max` (default MAX_MESSAGE) is refused.
-- Every function returns nil, why on bytes that are not what it reads;
-- none raises an error on what a server sends.

local pgsql = {}

pgsql.MAX_MESSAGE = 8192
local MAX_FIELDS = 32 -- fields of one error, options of one negotiation, mechanisms
local MAX_V2_ERROR = 1024 -- bytes of an old-style error's text

-- SSLRequest: length 8, code 1234.5679.
function pgsql.ssl_request()
  return string.pack(">I4I4", 8, 80877103)
end

-- A startup packet for protocol `major`.`minor` with `params`, a list of
-- { name, value } pairs (keep names and values free of NUL bytes).
function pgsql.startup(major, minor, params)
  local parts = { string.pack(">I4", major * 65536 + minor) }
  for _, kv in ipairs(params or {}) do
    parts[#parts + 1] = kv[1] .. "\0" .. kv[2] .. "\0"
  end
  parts[#parts + 1] = "\0"
  local body = table.concat(parts)
  return string.pack(">I4", #body + 4) .. body
end

-- Reads one message from `sock`: its type (a one-letter string) and body.
-- An old-style (protocol 2) error, "E" and a NUL-terminated text with no
-- length, gives "E", the text, "v2".
function pgsql.read_message(sock, max)
  local head, err = sock:recv_exact(5)
  if not head then
    return nil, "no message: " .. tostring(err)
  end
  local kind, len = string.unpack(">c1I4", head)
  if kind == "E" and string.byte(head, 2) ~= 0 then
    -- Protocol 2: the text runs to a NUL (or to the end of the connection).
    local text = string.sub(head, 2)
    while not string.find(text, "\0", 1, true) and #text < MAX_V2_ERROR do
      local more = sock:recv(MAX_V2_ERROR - #text)
      if not more then
        break
      end
      text ..= more
    end
    return "E", string.sub(string.match(text, "^[^%z]*"), 1, MAX_V2_ERROR), "v2"
  end
  if len < 4 or len - 4 > (max or pgsql.MAX_MESSAGE) then
    return nil, "message length " .. len .. " is out of bounds"
  end
  if len == 4 then
    return kind, ""
  end
  local body, berr = sock:recv_exact(len - 4)
  if not body then
    return nil, "message cut short: " .. tostring(berr)
  end
  return kind, body
end

-- The fields of an ErrorResponse or NoticeResponse body, by their code
-- (S severity, V severity not localized, C SQLSTATE, M message, D detail,
-- H hint, F file, L line, R routine, ...). An old-style error text
-- ("FATAL:  message\n") gives S and M.
function pgsql.fields(body, v2)
  if type(body) ~= "string" then
    return nil, "no body"
  end
  if v2 then
    local sev, msg = string.match(body, "^(%u+):%s+(.*)$")
    return { S = sev, M = (string.gsub(msg or body, "\n$", "")) }
  end
  local out, pos, count = {}, 1, 0
  while pos <= #body do
    local code = string.sub(body, pos, pos)
    if code == "\0" then
      return out
    end
    local nul = string.find(body, "\0", pos + 1, true)
    count += 1
    if not nul or count > MAX_FIELDS then
      return nil, "error fields malformed or too many"
    end
    out[code] = string.sub(body, pos + 1, nul - 1)
    pos = nul + 1
  end
  return nil, "error fields without their final NUL"
end

-- A NegotiateProtocolVersion body: the newest version of the requested
-- major one the server speaks (documented as a minor number; servers
-- send the whole version, major * 65536 + minor: both are read), as
-- major and minor, and the protocol options ("_pq_." names) it did not
-- recognise.
function pgsql.negotiate(body)
  if type(body) ~= "string" or #body < 8 then
    return nil, "NegotiateProtocolVersion cut short"
  end
  local version, n, pos = string.unpack(">I4I4", body)
  if n > MAX_FIELDS then
    return nil, "too many options"
  end
  local options = {}
  for i = 1, n do
    local nul = string.find(body, "\0", pos, true)
    if not nul then
      return nil, "option name without its NUL"
    end
    options[i], pos = string.sub(body, pos, nul - 1), nul + 1
  end
  local major = version >= 65536 and bit32.rshift(version, 16) or 3
  return { major = major, minor = bit32.band(version, 0xFFFF), options = options }
end

-- What the codes of an AuthenticationRequest ask for.
pgsql.AUTH_METHODS = {
  [0] = "none (trust)", [2] = "Kerberos V5", [3] = "cleartext password", [5] = "MD5 password",
  [6] = "SCM credentials", [7] = "GSSAPI", [9] = "SSPI", [10] = "SASL",
}

-- An AuthenticationRequest body: { code, method, mechanisms (SASL) }.
-- Codes 11 and 12 are steps of a SASL exchange, 8 of GSSAPI.
function pgsql.auth(body)
  if type(body) ~= "string" or #body < 4 then
    return nil, "AuthenticationRequest cut short"
  end
  local code, pos = string.unpack(">I4", body)
  local out = { code = code, method = pgsql.AUTH_METHODS[code] or ("code " .. code) }
  if code == 10 then
    out.mechanisms = {}
    for name in string.gmatch(string.sub(body, pos), "([^%z]+)%z") do
      if #out.mechanisms >= MAX_FIELDS then
        break
      end
      out.mechanisms[#out.mechanisms + 1] = name
    end
  end
  return out
end

-- Reads the messages a server sends after a startup packet, up to one
-- that ends the exchange without a password: ErrorResponse, an
-- AuthenticationRequest other than "ok", ReadyForQuery, or the end of the
-- connection (at most `limit` messages, default 32). Returns what it saw:
-- { negotiate, auth, error, error_v2, params = { name = value }, ended }.
function pgsql.after_startup(sock, limit)
  local seen = { params = {} }
  for _ = 1, limit or 32 do
    local kind, body, v2 = pgsql.read_message(sock)
    if not kind then
      seen.ended = body
      return seen
    elseif kind == "v" then
      seen.negotiate = pgsql.negotiate(body)
    elseif kind == "E" then
      seen.error, seen.error_v2 = pgsql.fields(body, v2), v2
      return seen
    elseif kind == "R" then
      seen.auth = pgsql.auth(body)
      if not seen.auth or seen.auth.code ~= 0 then
        return seen
      end
    elseif kind == "S" then
      local name, value = string.match(body, "^([^%z]*)%z([^%z]*)%z")
      if name and #name <= 64 then
        seen.params[name] = string.sub(value, 1, 256)
      end
    elseif kind == "Z" then
      return seen
    end
  end
  seen.ended = "too many messages"
  return seen
end

-- The range of protocol versions an "unsupported frontend protocol"
-- message states ("server supports 3.0 to 3.2"): "3.0", "3.2", or nil.
function pgsql.supported_range(message)
  local lo, hi = string.match(message or "", "server supports (%d+%.%d+) to (%d+%.%d+)")
  return lo, hi
end

-- The PostgreSQL major versions consistent with what a server revealed:
--   range_lo, range_hi  the protocol range it states (protocol 2 went in
--                       14; 3.2 came in 18),
--   startup_file        the file of its startup checks (postmaster.c up
--                       to 16, backend_startup.c from 17),
--   negotiates          true if it sent NegotiateProtocolVersion
--                       (9.3.22, 9.4.17, 9.5.12, 9.6.8, 10.3 and later),
--   v_field             true if its errors carry the V field (9.6 on).
-- Returns the lowest and highest major version (nil: no bound), or nil
-- when nothing was revealed.
function pgsql.version_family(facts)
  local lo, hi
  local function at_least(v)
    lo = math.max(lo or v, v)
  end
  local function at_most(v)
    hi = math.min(hi or v, v)
  end
  local first, last = tonumber(string.match(facts.range_lo or "", "^(%d+)")), facts.range_hi
  if first then
    if first >= 3 then at_least(14) else at_most(13) end
  end
  if last then
    local minor = tonumber(string.match(last, "%.(%d+)$")) or 0
    if minor >= 2 then at_least(18) else at_most(17) end
  end
  if facts.startup_file == "postmaster.c" then
    at_most(16)
  elseif facts.startup_file == "backend_startup.c" then
    at_least(17)
  end
  if facts.negotiates then
    at_least(9.3)
  end
  if facts.v_field then
    at_least(9.6)
  end
  if not lo and not hi then
    return nil
  end
  return lo, hi
end

-- "14 to 16", "18 or later", "13 or earlier", "16": a family as text.
function pgsql.family_text(lo, hi)
  if lo and hi then
    return lo == hi and tostring(lo) or (lo > hi and "inconsistent" or (lo .. " to " .. hi))
  end
  return lo and (lo .. " or later") or (hi .. " or earlier")
end

return pgsql
