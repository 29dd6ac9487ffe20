-- http-methods: the methods a web server says it supports (OPTIONS /,
-- Allow and Public headers), with a medium finding naming the risky ones.
-- Nothing but OPTIONS is sent: a method is reported as the server lists
-- it, never tried.

local RISKY = { PUT = true, DELETE = true, TRACE = true, CONNECT = true, PATCH = true }
local RISKY_ORDER = { "PUT", "DELETE", "TRACE", "CONNECT", "PATCH" }
local MAX_METHODS = 64

-- Adds the methods of a comma-separated header value to `list` (once each).
local function add_methods(value, list, seen)
  if not value then
    return
  end
  for token in string.gmatch(value, "[^,%s]+") do
    if #list >= MAX_METHODS then
      return
    end
    local m = string.upper(token)
    if re.match(m, "^[A-Z][A-Z0-9_-]{0,31}$") and not seen[m] then
      seen[m] = true
      list[#list + 1] = m
    end
  end
end

return {
  id = "http-methods",
  description = "Asks OPTIONS / which HTTP methods the server supports and flags risky ones.",
  categories = { "default", "discovery", "safe" },
  services = { "http", "https", "http-proxy", "http-alt" },
  run = function(ctx)
    -- TLS when detection found it, or when the port table says https (no -sV).
    local tls = ctx.tunnel == "ssl" or ctx.service == "https"
    local resp, err = ctx.http:request("OPTIONS", "/", { max = 65536, tls = tls })
    if not resp then
      return nil, "OPTIONS / got no HTTP answer: " .. tostring(err)
    end
    local allow = resp.headers["allow"]
    local public = resp.headers["public"]
    local methods, seen = {}, {}
    add_methods(allow, methods, seen)
    add_methods(public, methods, seen)

    local data = {
      status = resp.status,
      reason = resp.reason,
      allow = allow,
      public = public,
    }
    if #methods == 0 then
      ctx:finding{
        severity = "info",
        title = string.format("OPTIONS / answered %d %s without a method list", resp.status, resp.reason),
        data = data,
      }
      return
    end
    data.methods = methods
    ctx:finding{
      severity = "info",
      title = "Supported methods: " .. table.concat(methods, ", "),
      data = data,
    }
    local risky = {}
    for _, m in ipairs(RISKY_ORDER) do
      if seen[m] then
        risky[#risky + 1] = m
      end
    end
    if #risky > 0 then
      ctx:finding{
        severity = "medium",
        title = "Potentially risky methods: " .. table.concat(risky, ", "),
        data = { risky = risky, methods = methods, status = resp.status },
      }
    end
  end,
}
