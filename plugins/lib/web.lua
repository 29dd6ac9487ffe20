-- web: GET as nmap's http.get does it, for plugins that follow nmap's HTTP
-- scripts, and the ports and services nmap's shortport.http runs them on.
--
--   local web = require "web"
--   ports = web.PORTS, services = web.SERVICES,
--   local resp, err = web.get(ctx, "/robots.txt")   -- resp.status, .headers, .body, .locations
--   local u = web.parse_url("http://h:81/a?b#c")     -- { scheme, userinfo, host, port, path, query }
--   web.absolute("/a/b.html", "../c")                 --> "/c"
--   web.icon_link(html)                               --> "/static/icon.png" (a <link rel="icon">)
--
-- web.get follows redirects (300, 301, 302, 303, 307 with a Location) as
-- nmap's http.get does by default: at most 5, only to the scanned address
-- and port (a location's port is its own, else its scheme's, else the
-- scanned one), never to a location holding credentials, and never back
-- to "/" of the same host. A redirect it does not follow is the answer.
-- Each request is one ctx.http request (its bounds: one connection, at
-- most `opts.max` bytes, the run's read budget).

local web = {}

web.PORTS = { 80, 443, 631, 7080, 8080, 8443, 8088, 5800, 3872, 8180, 8000 }
web.SERVICES = { "http", "https", "ipp", "http-alt", "https-alt", "vnc-http", "oem-agent",
  "soap", "http-proxy", "caldav", "carddav", "webdav" }

local MAX_REDIRECTS = 5
local DEFAULT_PORT = { http = 80, https = 443 }
local REDIRECT = { [300] = true, [301] = true, [302] = true, [303] = true, [307] = true }

-- A URL's parts (RFC 3986 section 3): scheme, userinfo, host, port (a
-- number), path, query; each nil when absent. Never fails.
function web.parse_url(u)
  local t = {}
  u = string.gsub(u, "#.*$", "")
  local scheme, rest = string.match(u, "^(%a[%w+.-]*):(.*)$")
  if scheme then
    t.scheme, u = string.lower(scheme), rest
  end
  local authority
  authority, rest = string.match(u, "^//([^/?]*)(.*)$")
  if authority then
    u = rest
    local userinfo, hostport = string.match(authority, "^(.*)@(.*)$")
    t.userinfo = userinfo
    hostport = hostport or authority
    local host, port = string.match(hostport, "^(%[.*%]):?(%d*)$")
    if not host then
      host, port = string.match(hostport, "^([^:]*):?(%d*)$")
    end
    t.host = host and string.lower(host) or hostport
    t.port = port and tonumber(port)
  end
  local path, query = string.match(u, "^([^?]*)%??(.*)$")
  t.path = path ~= "" and path or nil
  t.query = string.find(u, "?", 1, true) and query or nil
  return t
end

-- `rel` (a path) resolved against the path `base`, dot segments removed.
function web.absolute(base, rel)
  local path = rel
  if string.sub(rel, 1, 1) ~= "/" then
    path = (string.match(base, "^(.*/)") or "/") .. rel
  end
  local out = {}
  local segments = {}
  local pos = 1
  while true do
    local slash = string.find(path, "/", pos, true)
    segments[#segments + 1] = string.sub(path, pos, (slash or 0) - 1)
    if not slash then
      break
    end
    pos = slash + 1
  end
  for i, seg in ipairs(segments) do
    if seg == ".." then
      if #out > 1 then
        table.remove(out)
      end
      if i == #segments then
        out[#out + 1] = ""
      end
    elseif seg == "." then
      if i == #segments then
        out[#out + 1] = ""
      end
    else
      out[#out + 1] = seg
    end
  end
  local joined = table.concat(out, "/")
  return string.sub(joined, 1, 1) == "/" and joined or "/" .. joined
end

-- The href of a page's icon link, found as nmap's http-favicon finds it:
-- each <link ...> in turn, its attributes read while they have the form
-- name="value" (or 'value'), the first whose rel (the latest seen, even on
-- an earlier link) has the word "icon" giving the latest href; or nil.
function web.icon_link(body)
  local rel, href
  local i = 0
  while true do
    local _, e = string.find(body, "<%s*[Ll][Ii][Nn][Kk]%s", i + 1)
    if not e then
      return nil
    end
    i = e
    local j = e
    while true do
      local _, stop, name, _, value = string.find(body, "^%s*(%w+)%s*=%s*([\"'])(.-)%2", j + 1)
      if not stop then
        break
      end
      j = stop
      name = string.lower(name)
      if name == "rel" then
        rel = value
      elseif name == "href" then
        href = value
      end
    end
    for word in string.gmatch(rel or "", "%S+") do
      if string.lower(word) == "icon" then
        return href
      end
    end
  end
end

-- Whether the scan's connection speaks TLS (service detection, or the
-- port table's "https" without it).
function web.tls(ctx)
  return ctx.tunnel == "ssl" or ctx.service == "https"
end

-- The request nmap's http.get would make after `resp` to `path`, as
-- { path =, tls = }, or nil when it would stop there.
function web.next_hop(ctx, path, resp)
  local location = resp.headers and resp.headers["location"]
  if not REDIRECT[resp.status] or not location then
    return nil
  end
  local u = web.parse_url(location)
  local host = u.host and string.gsub(u.host, "^%[(.*)%]$", "%1") or string.lower(ctx.ip)
  local port = u.port or DEFAULT_PORT[u.scheme or ""] or ctx.port
  local target = web.absolute(path, u.path or "/")
  if u.query then
    target = target .. "?" .. u.query
  end
  if u.userinfo or host ~= string.lower(ctx.ip) or port ~= ctx.port or target == "/" then
    return nil
  end
  if string.find(target, "[%s%c]") then
    return nil -- not a request line ctx.http sends
  end
  local tls
  if u.scheme == "https" or u.scheme == "http" then
    tls = u.scheme == "https"
  end
  return { path = target, tls = tls }
end

-- GET `path` as nmap's http.get: the final response (status, reason,
-- headers by lower-case name, body) with `locations`, the redirects
-- followed; or nil, why. `opts`: ctx.http's (max, headers, timeout).
function web.get(ctx, path, opts)
  local req = {}
  for k, v in pairs(opts or {}) do
    req[k] = v
  end
  if req.tls == nil then
    req.tls = web.tls(ctx)
  end
  local locations = {}
  local at = path
  for _ = 0, MAX_REDIRECTS do
    local resp, err = ctx.http:get(at, req)
    if not resp then
      return nil, err
    end
    resp.locations = locations
    local hop = web.next_hop(ctx, path, resp)
    if not hop or #locations == MAX_REDIRECTS then
      return resp
    end
    locations[#locations + 1] = resp.headers["location"]
    at = hop.path
    if hop.tls ~= nil then
      req.tls = hop.tls
    end
  end
end

return web
