-- http-git: a Git repository a web server publishes (/.git/), and what its
-- small files tell, as nmap's http-git reports it.
--
-- GETs ROOT.git/HEAD (http-git.root, default "/"; "{/a/,/b/}" for several);
-- a 200 answer starting "ref: " or with a SHA-1 is a repository, a high
-- finding. Then GETs .gitignore, .git/COMMIT_EDITMSG, .git/config,
-- .git/description and .git/info/exclude under the root, each up to 64 KB
-- (nmap pipelines them and follows no redirect): the files found, the
-- words nmap looks for in them ("bug", "key", "passw", "pw", "user",
-- "secret", "uid"), the last commit message, the description, the remote
-- URLs of .git/config and the project types nmap guesses from the ignore
-- files. The table and text are nmap's; where nmap lists files in a Lua
-- hash order (matches, project types) they come in the order above.

local text = require "text"
local web = require "web"

local MAX_FILE = 65536 -- bytes read of each file
local MAX_SHOWN = 10 -- remotes in the finding, each cut to 200 bytes
local FILES = { ".gitignore", ".git/COMMIT_EDITMSG", ".git/config", ".git/description", ".git/info/exclude" }
local WORDS = { "bug", "key", "passw", "pw", "user", "secret", "uid" }
local IGNORE_FILES = { ".gitignore", ".git/info/exclude" }
local SHOWN = { -- key, file, label
  { "repository-description", ".git/description", "Repository description: " },
  { "last-commit-message", ".git/COMMIT_EDITMSG", "Last commit message: " },
}
local TYPES = { -- nmap's fingerprints (Lua patterns), the specific ones first
  { "%.scala_dependencies", "Scala application" }, { "npm%-debug%.log", "node.js application" },
  { "joomla%.xml", "Joomla! site" }, { "jboss/server", "JBoss Java web application" },
  { "wp%-%*%.php", "WordPress site" }, { "app/config/database%.php", "CakePHP web application" },
  { "sites/default/settings%.php", "Drupal site" }, { "local_settings%.py", "Django web application" },
  { "/%.bundle", "Ruby on Rails web application" }, { "%.py[dco]", "Python application" },
  { "%.jsp", "JSP web application" }, { "%.bundle", "Ruby application" },
  { "%.class", "Java application" }, { "%.php", "PHP application" },
}

-- nmap's summary of a text: "<unknown>" when empty, else 60 bytes with
-- control characters as spaces, "..." when cut.
local function summarize(s)
  if s == "" then
    return "<unknown>"
  end
  return (string.gsub(string.sub(s, 1, 60), "%c", " ")) .. (#s > 60 and "..." or "")
end

-- Appends `value` to t[key][name] (making the tables); returns that list.
local function push(t, key, name, value)
  t[key] = t[key] or {}
  t[key][name] = t[key][name] or {}
  table.insert(t[key][name], value)
  return t[key][name]
end

-- What ROOT.git/ holds: nmap's table for it and its text lines; or nil.
local function probe(ctx, root)
  local head = web.get(ctx, root .. ".git/HEAD", { max = 4096 })
  if not head or head.status ~= 200 or not (string.find(head.body, "^ref: ") or string.find(head.body, "^" .. string.rep("%x", 40))) then
    return nil
  end
  local loc, body, found = { ["files-found"] = {} }, {}, 0
  for _, name in ipairs(FILES) do
    local resp = ctx.http:get(root .. name, { tls = web.tls(ctx), max = MAX_FILE })
    body[name] = resp and resp.status == 200 and resp.body or nil
    loc["files-found"][name] = body[name] ~= nil
    found += body[name] and 1 or 0
  end
  local lines = { #FILES - found <= 2 and "Git repository found!"
    or ("Potential Git repository found (found %d/%d expected files)"):format(found + 1, #FILES + 1) }
  for _, name in ipairs(FILES) do
    local words
    for _, word in ipairs(body[name] and WORDS or {}) do
      words = string.find(body[name], word, 1, true) and push(loc, "interesting-matches", name, word) or words
    end
    if words then
      lines[#lines + 1] = ("%s matched patterns '%s'"):format(name, table.concat(words, "' '"))
    end
  end
  for _, f in ipairs(SHOWN) do
    if body[f[2]] then
      loc[f[1]] = body[f[2]]
      lines[#lines + 1] = f[3] .. summarize(body[f[2]])
    end
  end
  for url in string.gmatch(body[".git/config"] or "", "\n%s*url%s*=%s*(%S*/%S*)") do
    loc.remotes = loc.remotes or {}
    loc.remotes[#loc.remotes + 1] = url
    lines[#lines + 1] = (#loc.remotes == 1 and "Remotes:\n" or "") .. "  " .. url
  end
  for _, name in ipairs(IGNORE_FILES) do
    local types
    for _, t in ipairs(body[name] and TYPES or {}) do
      types = string.find(body[name], t[1]) and push(loc, "project-type", name, t[2]) or types
    end
    if types then
      lines[#lines + 1] = "Project type: " .. types[1] .. " (guessed from " .. name .. ")"
    end
  end
  return loc, lines
end

return {
  id = "http-git",
  description = "Finds a Git repository published in a web site's root (/.git/) and reports what it tells, as nmap's http-git does.",
  categories = { "default", "safe", "vuln" },
  cwe = { "CWE-527" },
  remediation = "Do not deploy the .git folder with the site, or deny access to it (nginx: location ~ /\\.git { deny all; }).",
  tags = { "http", "exposure" },
  args = { "http-git.root" },
  ports = web.PORTS,
  services = web.SERVICES,
  run = function(ctx)
    local arg = ctx.args["http-git.root"] or "/"
    local roots = {}
    for root in string.gmatch(string.match(arg, "^{(.*)}$") or arg, "[^,]+") do
      root = text.trim(root)
      root = string.find(root, "/$") and root or root .. "/"
      roots[#roots + 1] = #roots < 16 and (string.find(root, "^/") and root or "/" .. root) or nil
    end
    local out, lines_out = {}, { "\n" }
    for _, root in ipairs(roots) do
      local loc, lines = probe(ctx, root)
      if loc then
        local location = ctx.ip .. ":" .. ctx.port .. root .. ".git/"
        out[location] = loc
        lines_out[#lines_out + 1] = "  " .. location .. "\n"
        for _, l in ipairs(lines) do
          lines_out[#lines_out + 1] = "    " .. string.gsub(l, "\n", "\n    ") .. "\n"
        end
        local remotes = {}
        for i = 1, math.min(#(loc.remotes or {}), MAX_SHOWN) do
          remotes[i] = text.clip(loc.remotes[i], 200)
        end
        ctx:finding{
          severity = "high",
          title = "Git repository exposed",
          data = { url = location, status = lines[1], remotes = remotes, files = loc["files-found"] },
        }
      end
    end
    if #lines_out == 1 then
      return nil, "no Git repository under " .. table.concat(roots, ", ")
    end
    return out, table.concat(lines_out)
  end,
}
