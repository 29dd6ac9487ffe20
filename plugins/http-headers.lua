-- http-headers: the response headers of GET /, and the security headers
-- that are missing from them.
--
-- One info finding lists every header in the order received; then one
-- finding per missing security header:
--   Strict-Transport-Security (over TLS only)          medium
--   Content-Security-Policy                            low
--   X-Content-Type-Options: nosniff                    low
--   X-Frame-Options (unless CSP has frame-ancestors)   low
-- and an info finding when the Server header carries a version number.

local MAX_HEADERS = 100
local MAX_VALUE = 300

local function clip(s)
  if #s > MAX_VALUE then
    return string.sub(s, 1, MAX_VALUE) .. "..."
  end
  return s
end

return {
  id = "http-headers",
  description = "Lists the HTTP response headers of / and reports missing security headers.",
  categories = { "default", "discovery", "safe" },
  services = { "http", "https", "http-proxy", "http-alt" },
  run = function(ctx)
    -- TLS when detection found it, or when the port table says https (no -sV).
    local tls = ctx.tunnel == "ssl" or ctx.service == "https"
    local resp, err = ctx.http:get("/", { max = 262144, tls = tls })
    if not resp then
      return nil, "no HTTP answer: " .. tostring(err)
    end
    local h = resp.headers

    local lines = {}
    for i, pair in ipairs(resp.header_list) do
      if i > MAX_HEADERS then
        break
      end
      lines[#lines + 1] = pair[1] .. ": " .. clip(pair[2])
    end
    ctx:finding{
      severity = "info",
      title = string.format("HTTP headers (%d %s)", resp.status, resp.reason),
      data = {
        status = resp.status,
        version = resp.version,
        tls = tls,
        headers = lines,
        count = #resp.header_list,
      },
    }

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
        xcto and ("value is " .. clip(xcto) .. ", not nosniff") or "browsers may sniff content types (nosniff not set)")
    end

    local frame_ancestors = csp and string.find(string.lower(csp), "frame-ancestors", 1, true)
    if not h["x-frame-options"] and not frame_ancestors then
      missing("low", "X-Frame-Options",
        "no X-Frame-Options and no CSP frame-ancestors: the page may be framed (clickjacking)")
    end

    local server = h["server"]
    if server and re.match(server, [[\d+\.\d+|/\d]]) then
      ctx:finding{
        severity = "info",
        title = "Server version disclosed",
        data = { server = clip(server) },
      }
    end
  end,
}
