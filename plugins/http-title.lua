-- http-title: the title of a web server's default page, following one
-- redirect on the same host as nmap's http-title does.
return {
  id = "http-title",
  description = "Shows the title of a web server's default page.",
  categories = { "default", "discovery", "safe" },
  ports = { 80, 443, 8000, 8008, 8080, 8443 },
  services = { "http", "https", "http-proxy", "http-alt" },
  run = function(ctx)
    local resp, err = ctx.http:get("/")
    if not resp then
      return nil, err
    end
    local data = { status = resp.status }
    local location = resp.headers["location"]
    if resp.status >= 300 and resp.status < 400 and location then
      data.redirect = location
      local path = location:match("^https?://[^/]+(/.*)$") or (location:sub(1, 1) == "/" and location) or nil
      if path then
        local again = ctx.http:get(path)
        if again then
          resp = again
        end
      end
    end
    local title = resp.body:match("<[Tt][Ii][Tt][Ll][Ee][^>]*>([^<]*)</[Tt][Ii][Tt][Ll][Ee]>")
    if title then
      title = title:gsub("%s+", " "):gsub("^ ", ""):gsub(" $", "")
      data.title = title
      ctx:finding{ severity = "info", title = title, data = data }
    else
      data.title = nil
      ctx:finding{ severity = "info", title = "Site doesn't have a title", data = data }
    end
  end,
}
