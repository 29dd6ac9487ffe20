-- http-methods: the methods a web server supports, as nmap's http-methods
-- finds and shows them, with a medium finding naming the risky ones it
-- lists.
--
-- As nmap does: asks OPTIONS <path> (the Allow and Public headers, in that
-- order), then a random method, then each of GET, HEAD, POST and OPTIONS
-- the headers did not list, keeping those answered neither 405 nor 501
-- nor the random method's 4xx status. The result is nmap's table:
-- "Supported Methods" (at verbosity 1 and more), "Potentially risky
-- methods" (all but GET, HEAD, POST and OPTIONS), "Path tested" (when not
-- /); nothing when it is empty. Methods other than these are never sent.
-- The finding comes from the OPTIONS answer alone: the risky methods the
-- server itself lists.

local web = require "web"

local RISKY = { PUT = true, DELETE = true, TRACE = true, CONNECT = true, PATCH = true }
local RISKY_ORDER = { "PUT", "DELETE", "TRACE", "CONNECT", "PATCH" }
local SAFE = { "GET", "HEAD", "POST", "OPTIONS" }
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

-- nmap's merge_headers: the Allow and Public values split on commas, as sent, once each.
local function merge_headers(headers)
  local out, seen = {}, {}
  for _, name in ipairs({ "allow", "public" }) do
    local value = headers[name]
    if value then
      for item in string.gmatch(value .. ",", "(.-),%s*") do
        if #out >= MAX_METHODS then
          return out
        end
        if not seen[item] then
          out[#out + 1] = item
        end
        seen[item] = true
      end
    end
  end
  return out
end

local function contains(list, v)
  return table.find(list, v) ~= nil
end

-- Four random capital letters, as nmap's rand.random_alpha(4):upper().
local function random_method()
  local s = {}
  for i = 1, 4 do
    s[i] = string.char(math.random(65, 90))
  end
  return table.concat(s)
end

return {
  id = "http-methods",
  description = "Finds the HTTP methods a server supports (OPTIONS, then probing GET, HEAD, POST, OPTIONS) as nmap's http-methods does, and flags risky ones it lists.",
  categories = { "default", "discovery", "safe" },
  args = { "http-methods.url-path" },
  ports = web.PORTS,
  services = web.SERVICES,
  run = function(ctx)
    local tls = web.tls(ctx)
    local path = ctx.args["http-methods.url-path"] or "/"
    local opts = { max = 65536, tls = tls }
    local resp, err = ctx.http:request("OPTIONS", path, opts)
    if not resp then
      ctx:log("http-methods: OPTIONS " .. path .. " got no HTTP answer: " .. tostring(err))
    end
    local headers = resp and resp.headers or {}

    -- The finding: risky methods the server lists itself.
    if resp then
      local listed, seen = {}, {}
      add_methods(headers["allow"], listed, seen)
      add_methods(headers["public"], listed, seen)
      local risky = {}
      for _, m in ipairs(RISKY_ORDER) do
        if seen[m] and RISKY[m] then
          risky[#risky + 1] = m
        end
      end
      if #risky > 0 then
        ctx:finding{
          severity = "medium",
          title = "Potentially risky methods: " .. table.concat(risky, ", "),
          data = { risky = risky, methods = listed, status = resp.status },
        }
      end
    end

    -- nmap's probing of the safe methods the headers did not list.
    local methods = merge_headers(headers)
    local random = ctx.http:request(random_method(), path, opts)
    for _, m in ipairs(SAFE) do
      if not contains(methods, m) then
        local r = ctx.http:request(m, path, opts)
        if r then
          local refused = r.status == 405 or r.status == 501
            or (r.status >= 400 and r.status < 600 and random and r.status == random.status)
          if not refused then
            methods[#methods + 1] = m
          end
        end
      end
    end

    local result, lines = {}, {}
    if (ctx.verbosity or 0) > 0 and #methods > 0 then
      result["Supported Methods"] = methods
      lines[#lines + 1] = "Supported Methods: " .. table.concat(methods, " ")
    end
    local interesting = {}
    for _, m in ipairs(methods) do
      if not contains(SAFE, m) then
        interesting[#interesting + 1] = m
      end
    end
    if #interesting > 0 then
      result["Potentially risky methods"] = interesting
      lines[#lines + 1] = "Potentially risky methods: " .. table.concat(interesting, " ")
    end
    if path ~= "/" then
      result["Path tested"] = path
      lines[#lines + 1] = "Path tested: " .. path
    end
    if #lines == 0 then
      return nil, "no method to show at this verbosity"
    end
    return result, "\n  " .. table.concat(lines, "\n  ")
  end,
}
