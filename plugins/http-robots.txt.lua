-- http-robots.txt: the paths a web server's /robots.txt disallows, as
-- nmap's http-robots.txt lists them.
--
-- GETs /robots.txt (following redirects as nmap's http.get does); only a
-- 200 answer counts. Each line holding "Disallow:" (or "disallow:") gives
-- what follows it, without white space before it and without a "#"
-- comment; empty values and repeats are skipped (as nmap, a value equal to
-- an earlier one as kept, line break included, less its first character
-- is a repeat too). The body is read up to 1 MB. The text is
-- nmap's: "N disallowed entries" ("(M shown)" when cut to 15, or 40 at
-- verbosity 2 to 4, all from 5), then the paths joined by spaces, a line
-- break starting a new line once a line holds 50 characters of paths (with
-- nmap's count, which starts again at 0 after each break).

local web = require "web"

local MAX_BODY = 1048576

return {
  id = "http-robots.txt",
  description = "Lists the paths a web server's /robots.txt disallows, as nmap's http-robots.txt does.",
  categories = { "default", "discovery", "safe" },
  tags = { "http" },
  ports = web.PORTS,
  services = web.SERVICES,
  run = function(ctx)
    local resp, err = web.get(ctx, "/robots.txt", { max = MAX_BODY })
    if not resp then
      return nil, err
    end
    if resp.status ~= 200 then
      return nil, "/robots.txt: status " .. resp.status
    end

    local entries, seen = {}, {}
    local width = 0
    for line in string.gmatch(resp.body, "[^\r\n]+") do
      local a, b = string.find(line, "[Dd]isallow:")
      if a then
        local path = string.sub(line, b + 1)
        path = string.sub(path, (string.find(path, "%S") or #path + 1))
        local hash = string.find(path, "#", 1, true)
        if hash then
          -- The comment and the white space before it.
          local keep = string.sub(path, 1, hash - 1)
          local last = #keep
          while last > 0 and string.find(string.sub(keep, last, last), "^%s") do
            last -= 1
          end
          path = string.sub(keep, 1, last)
        end
        if path ~= "" and not seen[path] then
          if width == 0 or width + #path <= 50 then
            width += #path
          else
            width, path = 0, "\n" .. path
          end
          entries[#entries + 1] = path
          -- nmap's repeats: an entry as kept, or less its first character.
          seen[path], seen[string.sub(path, 2)] = true, true
        end
      end
    end
    if #entries == 0 then
      return nil, "/robots.txt disallows nothing"
    end

    local level = (ctx.verbosity or 0) + 2 * (ctx.debugging or 0)
    local shown = level >= 5 and #entries or math.min(#entries, level > 1 and 40 or 15)
    local noun = #entries == 1 and "entry " or "entries "
    local count = shown == #entries and "\n" or ("(" .. shown .. " shown)\n")
    return #entries .. " disallowed " .. noun .. count .. table.concat(entries, " ", 1, shown)
  end,
}
