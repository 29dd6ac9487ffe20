-- robots-txt: the paths a web server's robots.txt asks crawlers to avoid
-- (often the interesting ones).
return {
  id = "robots-txt",
  description = "Lists the Disallow entries of /robots.txt.",
  categories = { "discovery", "safe" },
  services = { "http", "https" },
  ports = { 80, 443, 8080, 8443 },
  run = function(ctx)
    local resp, err = ctx.http:get("/robots.txt", { max = 65536 })
    if not resp then
      return nil, err
    end
    if resp.status ~= 200 then
      return nil, "no robots.txt (status " .. resp.status .. ")"
    end
    local disallowed = {}
    for line in resp.body:gmatch("[^\r\n]+") do
      local path = line:match("^%s*[Dd]isallow:%s*(%S+)")
      if path and #disallowed < 100 then
        disallowed[#disallowed + 1] = path
      end
    end
    if #disallowed > 0 then
      ctx:finding{ severity = "info", title = #disallowed .. " disallowed path(s) in robots.txt", data = { disallowed = disallowed } }
    end
  end,
}
