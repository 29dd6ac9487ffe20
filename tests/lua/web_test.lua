-- Unit tests of lib/web.lua: URL parts, path resolution, and GET with
-- nmap's redirect rules over a fake ctx.http that answers from a table.
local web = require "web"

-- A fake ctx on 198.18.0.5:`port` whose ctx.http:get answers from `site`
-- (path -> response, or a function of the request); it logs each request.
local function fake(port, site, tunnel)
  local log = {}
  local ctx = { ip = "198.18.0.5", port = port, tunnel = tunnel, service = "http" }
  ctx.http = {
    get = function(_, path, opts)
      log[#log + 1] = { path = path, tls = opts and opts.tls }
      local r = site[path]
      if type(r) == "function" then
        r = r(path)
      end
      if not r then
        return nil, "connection refused"
      end
      return { status = r[1], headers = r[2] or {}, body = r[3] or "" }
    end,
  }
  return ctx, log
end

return {
  id = "web-test",
  description = "Unit tests of the web library module.",
  categories = { "safe" },
  ports = { 1 },
  run = function(ctx)
    local n = 0
    local function check(cond, what)
      assert(cond, what)
      n += 1
    end

    -- parse_url
    local u = web.parse_url("HTTPS://user:pw@Example.COM:8443/a/b?x=1&y#frag")
    check(u.scheme == "https" and u.userinfo == "user:pw" and u.host == "example.com", "url authority")
    check(u.port == 8443 and u.path == "/a/b" and u.query == "x=1&y", "url port, path, query")
    u = web.parse_url("/favicon.ico?v=2")
    check(u.scheme == nil and u.host == nil and u.path == "/favicon.ico" and u.query == "v=2", "relative url")
    u = web.parse_url("http://[2001:2::2]:81/")
    check(u.host == "[2001:2::2]" and u.port == 81 and u.path == "/", "IPv6 literal")
    u = web.parse_url("//198.18.0.5/x")
    check(u.scheme == nil and u.host == "198.18.0.5" and u.port == nil and u.path == "/x", "scheme-relative")
    u = web.parse_url("http://h:notaport/")
    check(u.port == nil, "garbage port is no port")
    u = web.parse_url("")
    check(u.path == nil and u.host == nil, "empty url")
    u = web.parse_url("/" .. string.rep("b", 4999) .. "?")
    check(#u.path == 5000 and u.query == "", "long url")

    -- absolute
    check(web.absolute("/a/b.html", "c.png") == "/a/c.png", "relative to the base's folder")
    check(web.absolute("/a/b/", "../c") == "/a/c", "dot dot")
    check(web.absolute("/", "../../x") == "/x", "dot dot above the root")
    check(web.absolute("/a/b", "/x/./y") == "/x/y", "absolute with a dot")
    check(web.absolute("/a/b", "./") == "/a/", "dot at the end")
    check(web.absolute("/robots.txt", "x") == "/x", "file at the root")

    -- icon_link: nmap's parse of <link> elements
    check(web.icon_link('<head><link rel="icon" href="/a.ico"></head>') == "/a.ico", "icon link")
    check(web.icon_link("<LINK href='x.png' rel='shortcut icon'>") == "x.png", "upper case, single quotes")
    check(web.icon_link('<link rel="stylesheet" href="s.css"><link rel="icon" href="i.png">') == "i.png", "second link")
    check(web.icon_link('<link rel="icon"><link href="h">') == nil, "an icon link without href")
    check(web.icon_link('<link rel="x" href="s"><link data-x="1" rel="icon" href="i">') == nil,
      "attributes stop at a name with a dash")
    check(web.icon_link('<link rel=icon href=x>') == nil, "unquoted values are not read")
    check(web.icon_link('<link rel="icon') == nil and web.icon_link("") == nil, "truncated and empty")
    check(web.icon_link(string.rep("<link ", 20000)) == nil, "many empty links")

    -- next_hop: nmap's rules
    local c = fake(8080, {})
    local function hop(status, location, from)
      return web.next_hop(c, from or "/p", { status = status, headers = { location = location } })
    end
    check(hop(301, "/q").path == "/q", "relative redirect followed")
    check(hop(302, "http://198.18.0.5:8080/q?a=1").path == "/q?a=1", "same host and port followed")
    check(hop(301, "http://198.18.0.5/q") == nil, "port 80 by the scheme: not this port")
    check(hop(301, "http://198.18.0.6:8080/q") == nil, "another host")
    check(hop(301, "http://u:p@198.18.0.5:8080/q") == nil, "credentials")
    check(hop(301, "/") == nil, "back to the root of the same host")
    check(hop(308, "/q") == nil and hop(304, "/q") == nil, "not a redirect nmap follows")
    check(hop(301, nil) == nil, "no location")
    check(hop(303, "q", "/d/e").path == "/d/q", "relative to the original path")
    check(hop(307, "https://198.18.0.5:8080/s").tls == true, "scheme https: TLS")
    check(hop(301, "/a b") == nil, "not a request line")

    -- get: follows up to 5, returns the sixth redirect itself
    local loop = function(path)
      local i = tonumber(string.match(path, "%d+")) or 0
      return { 302, { location = "/r" .. (i + 1) } }
    end
    local site = setmetatable({}, { __index = function(_, k)
      return loop
    end })
    local lctx, log = fake(80, site)
    local resp = web.get(lctx, "/r0")
    check(resp.status == 302 and #log == 6 and #resp.locations == 5, "at most 5 redirects")
    check(log[6].path == "/r5" and log[1].tls == false, "the requests made")

    local octx, olog = fake(443, {
      ["/robots.txt"] = { 301, { location = "/robots2.txt" } },
      ["/robots2.txt"] = { 200, { ["content-type"] = "text/plain" }, "Disallow: /x\n" },
    }, "ssl")
    resp = web.get(octx, "/robots.txt", { max = 1000 })
    check(resp.status == 200 and resp.body == "Disallow: /x\n", "followed to the body")
    check(#olog == 2 and olog[2].tls == true and resp.locations[1] == "/robots2.txt", "over TLS")

    local ectx = fake(80, {})
    local none, err = web.get(ectx, "/")
    check(none == nil and err == "connection refused", "a failed request gives nil, why")
    return "ok " .. n
  end,
}
