-- http-title: the title of a web server's default page, as nmap's
-- http-title reports it (table { title, redirect_url } and its text),
-- following one redirect on the same host.
local web = require "web"

return {
  id = "http-title",
  description = "Shows the title of a web server's default page.",
  categories = { "default", "discovery", "safe" },
  ports = web.PORTS,
  services = web.SERVICES,
  run = function(ctx)
    local resp, err = ctx.http:get("/")
    if not resp then
      return nil, err
    end
    local result = {}
    local location = resp.headers["location"]
    if resp.status >= 300 and resp.status < 400 and location then
      local path = location:match("^https?://[^/]+(/.*)$") or (location:sub(1, 1) == "/" and location) or nil
      local again = path and ctx.http:get(path)
      if not again then
        return { redirect_url = location }, "Did not follow redirect to " .. location
      end
      resp, result.redirect_url = again, location
    end
    local title = resp.body:match("<[Tt][Ii][Tt][Ll][Ee][^>]*>([^<]*)</[Tt][Ii][Tt][Ll][Ee]>")
    local text
    if title and title ~= "" then
      result.title = title
      text = title:gsub("[\n\r\t]", "")
      if #text > 65 then
        text = text:sub(1, 62) .. "..."
      end
    else
      local ctype = resp.headers["content-type"]
      text = ctype and ("Site doesn't have a title (" .. ctype .. ").") or "Site doesn't have a title."
    end
    if result.redirect_url then
      text = text .. "\nRequested resource was " .. result.redirect_url
    end
    return result, text
  end,
}
