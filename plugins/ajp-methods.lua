-- ajp-methods: which methods an AJP13 connector (Tomcat, JBoss...) allows,
-- from an OPTIONS request, as nmap's ajp-methods shows them.
--
-- Sends one AJP13 FORWARD_REQUEST for OPTIONS (lib/ajp.lua, with the
-- values nmap's ajp library sends) and reads the container's SEND_HEADERS.
-- A 200 with an Allow header gives the methods; anything else is nmap's
-- "Failed to get a valid response for the OPTION request" (a Tomcat with
-- nothing deployed at "/" answers 404, one requiring a secret 403; "OPTIONS
-- *", with --script-args ajp-methods.path=*, gets Tomcat's own Allow).
-- Methods other than GET, HEAD, POST and OPTIONS are listed as potentially
-- risky. No packet is begun after DEADLINE.

local ajp = require "ajp"

local TIMEOUT = 2000 -- ms per read
local DEADLINE = 5 -- seconds from the start: no packet is begun after it
local FAILED = "Failed to get a valid response for the OPTION request"
local BORING = { GET = true, HEAD = true, POST = true, OPTIONS = true }

return {
  id = "ajp-methods",
  description = "Lists the methods an AJP13 connector allows, from an OPTIONS request, and the potentially risky ones, as nmap's ajp-methods does.",
  categories = { "default", "safe" },
  tags = { "ajp", "http" },
  args = { "ajp-methods.path" },
  ports = { 8009 },
  services = { "ajp13" },
  run = function(ctx)
    local path = ctx.args["ajp-methods.path"] or "/"
    local deadline = os.clock() + DEADLINE
    local sock, err = ctx:connect{ timeout = TIMEOUT }
    if not sock then
      -- nmap says "Failed to connect to server" only when debugging.
      return nil, "connect: " .. tostring(err)
    end
    local response, why = ajp.exchange(sock, ajp.forward_request(ctx, path), deadline)
    sock:close()
    local allow = response and response.headers and response.headers.allow
    if not response or response.status ~= 200 or not allow then
      ctx:log("ajp-methods: " .. (why or ("status " .. tostring(response.status) .. " " .. tostring(response.message))))
      return FAILED
    end

    -- nmap splits the Allow header on ", " (stringaux.strsplit(",%s", ...)).
    local methods, risky = {}, {}
    local start = 1
    while true do
      local a, b = string.find(allow, ",%s", start)
      methods[#methods + 1] = string.sub(allow, start, (a or 0) - 1)
      if not a then
        break
      end
      start = b + 1
    end
    for _, m in ipairs(methods) do
      if not BORING[m] then
        risky[#risky + 1] = m
      end
    end
    -- stdnse.format_output's layout: a newline, then each line indented two spaces.
    local text = "\n  Supported methods: " .. table.concat(methods, " ") .. "\n"
    if #risky > 0 then
      text ..= "  Potentially risky methods: " .. table.concat(risky, " ") .. "\n"
      text ..= "  See https://nmap.org/nsedoc/scripts/ajp-methods.html\n"
    end
    return text
  end,
}
