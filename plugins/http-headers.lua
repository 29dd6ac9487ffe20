-- http-headers: the response headers of /, as nmap's http-headers shows
-- them, and the security headers that are missing from them.
--
-- As nmap does, asks HEAD / first and falls back to GET / when HEAD does
-- not answer 200; the headers are shown as the server sent them (its case,
-- its order), then a blank line and the request type. Then one finding per
-- missing security header:
--   Strict-Transport-Security (over TLS only)          medium
--   Content-Security-Policy                            low
--   X-Content-Type-Options: nosniff                    low
--   X-Frame-Options (unless CSP has frame-ancestors)   low

local MAX_HEADER_BYTES = 65536
local MAX_HEADERS = 100
local MAX_VALUE = 300
local TIMEOUT = 5000

local text = require "text"
local web = require "web"

-- One request; its status, the raw header lines (after the status line,
-- as sent) and the headers by lower-case name; or nil, err.
local function request(ctx, verb, tls)
  local sock, err = ctx:connect{ tls = tls, timeout = TIMEOUT }
  if not sock then
    return nil, tostring(err)
  end
  local host = string.find(ctx.ip, ":", 1, true) and ("[" .. ctx.ip .. "]") or ctx.ip
  local ok, serr = sock:send(verb .. " / HTTP/1.1\r\nHost: " .. host
    .. "\r\nUser-Agent: moonscan\r\nAccept: */*\r\nConnection: close\r\n\r\n")
  if not ok then
    sock:close()
    return nil, "send: " .. tostring(serr)
  end
  local head, rerr = sock:recv_until([[\r?\n\r?\n]], MAX_HEADER_BYTES)
  if not head then
    sock:close()
    return nil, "no HTTP answer: " .. tostring(rerr)
  end
  sock:close()
  local status_line, rest = string.match(head, "^([^\r\n]*)\r?\n(.*)$")
  local status = status_line and tonumber(string.match(status_line, "^HTTP/%d[%.%d]* (%d%d%d)"))
  if not status then
    return nil, "not an HTTP answer: " .. string.sub(head, 1, 80)
  end
  -- nmap's rawheader: the lines of the header block, and the empty string
  -- its last line break leaves.
  rest = string.gsub(rest, "\r?\n$", "")
  local raw, headers = {}, {}
  local last
  for line in string.gmatch(rest .. "\n", "([^\n]*)\n") do
    line = string.gsub(line, "\r$", "")
    raw[#raw + 1] = line
    local name, value = string.match(line, "^([^:%s]+):(.*)$")
    if name then
      value = text.trim(value)
      last = string.lower(name)
      headers[last] = headers[last] and (headers[last] .. ", " .. value) or value
    elseif last and string.match(line, "^%s") then
      headers[last] ..= " " .. text.trim(line)
    end
  end
  return { status = status, raw = raw, headers = headers }
end

return {
  id = "http-headers",
  description = "Shows the HTTP response headers of / as nmap's http-headers does and reports missing security headers.",
  categories = { "default", "discovery", "safe" },
  -- Values that change from run to run: `db diff` ignores them.
  volatile = { "Date", "Expires", "Age", "Set-Cookie" },
  args = { "http-headers.useget" },
  ports = web.PORTS,
  services = web.SERVICES,
  run = function(ctx)
    local tls = web.tls(ctx)
    local kind = "HEAD"
    local resp, err
    if not ctx.args["http-headers.useget"] then
      resp, err = request(ctx, "HEAD", tls)
      -- nmap's http.can_use_head: HEAD is used when it answers 200.
      if resp and resp.status ~= 200 then
        resp = nil
      end
    end
    if not resp then
      kind = "GET"
      resp, err = request(ctx, "GET", tls)
    end
    if not resp then
      return nil, err
    end
    local h = resp.headers

    local function missing(severity, header, why)
      ctx:finding{
        severity = severity,
        title = "Missing " .. header .. " header",
        data = { header = header, status = resp.status, why = why },
      }
    end

    if tls and not h["strict-transport-security"] then
      missing("medium", "Strict-Transport-Security",
        "HTTPS without HSTS: a browser can be downgraded to plain HTTP on its first visit")
    end

    local csp = h["content-security-policy"]
    if not csp then
      missing("low", "Content-Security-Policy", "no policy restricts where scripts, frames and other content load from")
    end

    local xcto = h["x-content-type-options"]
    if not xcto or not string.find(string.lower(xcto), "nosniff", 1, true) then
      missing("low", "X-Content-Type-Options",
        xcto and ("value is " .. text.clip(xcto, MAX_VALUE) .. ", not nosniff") or "browsers may sniff content types (nosniff not set)")
    end

    local frame_ancestors = csp and string.find(string.lower(csp), "frame-ancestors", 1, true)
    if not h["x-frame-options"] and not frame_ancestors then
      missing("low", "X-Frame-Options",
        "no X-Frame-Options and no CSP frame-ancestors: the page may be framed (clickjacking)")
    end

    -- nmap's text (stdnse.format_output): each line indented two spaces
    -- (the last header line is the empty one), then the request type.
    local out = { "\n" }
    for i, line in ipairs(resp.raw) do
      if i > MAX_HEADERS then
        break
      end
      out[#out + 1] = "  " .. line .. "\n"
    end
    out[#out + 1] = "  (Request type: " .. kind .. ")\n"
    return table.concat(out)
  end,
}
