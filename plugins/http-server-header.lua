-- http-server-header: the Server header a web server sends, as nmap's
-- http-server-header reports it (a list of values and their text). HEAD /
-- first; GET / when HEAD fails or the answer has no Server header (some
-- servers answer HEAD differently).

local web = require "web"

local MAX_VALUE = 300

return {
  id = "http-server-header",
  description = "Reports the HTTP Server header of the default page.",
  categories = { "default", "discovery", "safe" },
  ports = web.PORTS,
  services = web.SERVICES,
  run = function(ctx)
    local tls = web.tls(ctx)
    local resp, err = ctx.http:head("/", { max = 65536, tls = tls })
    local method = "HEAD"
    if not resp or not resp.headers["server"] then
      local again, err2 = ctx.http:get("/", { max = 65536, tls = tls })
      if again then
        resp, method = again, "GET"
      elseif not resp then
        return nil, "no HTTP answer: " .. tostring(err2 or err)
      end
    end
    local server = resp.headers["server"]
    if not server then
      return nil, string.format("no Server header (%s / answered %d)", method, resp.status)
    end
    server = string.sub(server, 1, MAX_VALUE)
    return { server }, server == "" and "<empty>" or server
  end,
}
