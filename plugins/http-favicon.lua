-- http-favicon: a web site's favicon and its hashes, as nmap's
-- http-favicon finds it.
--
-- As nmap: GETs the page at the root (the favicon.root argument, default
-- ""), and on a 200 or 503 answer takes the icon its first
-- <link rel="icon" href=...> names; nmap uses that icon only when it is
-- on the scanned address and port (a link without a port means the
-- scheme's, 80 for a relative one), a relative path being taken from the
-- root's folder. Without one, or when it does not answer 200, GETs
-- ROOT/favicon.ico. The favicon.uri argument names the icon instead.
-- nmap names the icons of its database of MD5 hashes; moonscan ships no
-- such database, so the text is nmap's line for an icon it does not know,
-- "Unknown favicon MD5: <MD5 in upper case>" (at verbosity 1 or more, as
-- nmap; a plugin named in --script has 1). An info finding holds the
-- icon's path, size, MD5 and its MurmurHash3 as search engines index
-- favicons (Shodan's http.favicon.hash).

local mmh3 = require "mmh3"
local text = require "text"
local web = require "web"

local MAX_BODY = 1048576
local MAX_MMH3 = 256 * 1024 -- larger icons get no MurmurHash3 (linear, but slow in Lua)

-- The icon path nmap's http-favicon takes from `href`, or nil.
local function icon_path(ctx, href, root)
  local u = web.parse_url(href)
  local scheme = u.scheme or "http"
  if scheme ~= "http" and scheme ~= "https" then
    return nil
  end
  local host = u.host or ctx.ip
  local port = u.port or (scheme == "https" and 443 or 80)
  if host ~= ctx.ip or port ~= ctx.port then
    return nil
  end
  local path = u.path or ""
  if string.sub(path, 1, 1) ~= "/" then
    path = (string.match(root, "^(.*)/") or "") .. "/" .. path
  end
  return path
end

return {
  id = "http-favicon",
  description = "Fetches a web site's favicon and reports its MD5 (and MurmurHash3) as nmap's http-favicon does.",
  categories = { "default", "discovery", "safe" },
  tags = { "http" },
  args = { "favicon.root", "favicon.uri" },
  ports = web.PORTS,
  services = web.SERVICES,
  run = function(ctx)
    local root = ctx.args["favicon.root"] or ""
    local uri = ctx.args["favicon.uri"]
    local opts = { max = MAX_BODY }
    local answer, path, err
    if uri then
      path = root .. "/" .. uri
      answer, err = web.get(ctx, path, opts)
    else
      local index = web.get(ctx, root .. "/", opts)
      local href = index and (index.status == 200 or index.status == 503) and web.icon_link(index.body)
      path = href and icon_path(ctx, href, root)
      answer = path and web.get(ctx, path, opts)
      if not answer or answer.status ~= 200 then
        path = root .. "/favicon.ico"
        answer, err = web.get(ctx, path, opts)
      end
    end
    if not answer or answer.status ~= 200 then
      return nil, "no favicon at " .. text.clip(path) .. ": " .. (answer and ("status " .. answer.status) or tostring(err))
    end

    local md5 = string.upper(hash.md5(answer.body))
    -- nmap's text (no favicon database here: every hash is "unknown"), and the hashes as data.
    local data = {
      path = text.clip(path),
      bytes = #answer.body,
      md5 = md5,
      mmh3 = #answer.body <= MAX_MMH3 and mmh3.favicon(answer.body) or nil,
      content_type = answer.headers["content-type"] and text.clip(answer.headers["content-type"]),
    }
    return data, "Unknown favicon MD5: " .. md5
  end,
}
