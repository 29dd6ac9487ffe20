-- pgsql-version: what a PostgreSQL server reveals about itself before
-- anyone authenticates (nmap 7.93 has no script of this id). Up to three
-- short connections (lib/pgsql.lua):
--   1. an SSLRequest, answered 'S' (SSL offered) or 'N' (not);
--   2. a startup packet for protocol 3.65535 (user "moonscan"): a server
--      patched since 2018 answers NegotiateProtocolVersion with the newest
--      minor version it speaks and goes on to authentication (an
--      AuthenticationRequest names the method, a pg_hba.conf refusal is a
--      FATAL error); an older one refuses the version outright;
--   3. unless 2 told it, a startup for protocol 4.0, which every server
--      refuses with "server supports X to Y".
-- The protocol range, the errors' SQLSTATE and file/line/routine fields
-- give the version family. No password is ever sent: each connection
-- closes at the first request for one. The result is a table under the
-- keys below, and its text nmap's way: one "key: value" line each.
local pgsql = require "pgsql"
local text = require "text"

local USER = "moonscan"
local ORDER = {
  "SSL", "Protocol versions", "Newest protocol", "Version family", "Authentication", "Server version",
  "Startup error", "Startup error source", "Protocol error", "Protocol error source",
}

-- A connection with `packet` sent, or nil, why.
local function open(ctx, packet)
  local sock, err = ctx:connect{ timeout = 5000 }
  local ok, serr = sock and sock:send(packet)
  if not ok then
    return nil, sock and ("send: " .. tostring(serr)) or ("connect: " .. tostring(err))
  end
  return sock
end

-- "FATAL 28000 message" and "file:line routine" of an error's fields.
local function describe(e)
  local head = (e.V or e.S or "ERROR") .. (e.C and (" " .. e.C) or "") .. " " .. (e.M or "")
  local where = e.F and (e.F .. (e.L and (":" .. e.L) or "") .. (e.R and (" " .. e.R) or ""))
  return head, where
end

return {
  id = "pgsql-version",
  description = "Reports what PostgreSQL reveals before authentication: SSL, protocol versions, errors' SQLSTATE and source fields, and the version family they imply.",
  categories = { "discovery", "safe" },
  ports = { 5432 },
  services = { "postgresql" },
  run = function(ctx)
    local sock, err = open(ctx, pgsql.ssl_request())
    if not sock then
      return nil, err
    end
    local answer = sock:recv_exact(1)
    sock:close()
    local r = { SSL = ({ S = "offered", N = "not offered", E = "refused (an error)" })[answer or ""] }
    if not r.SSL then
      return nil, "not a PostgreSQL answer to SSLRequest"
    end
    local seen, errors = {}, {}
    for i, version in ipairs({ { 3, 65535 }, { 4, 0 } }) do
      sock = (i == 1 or not r["Protocol versions"]) and open(ctx, pgsql.startup(version[1], version[2], { { "user", USER } }))
      seen[i] = sock and pgsql.after_startup(sock) or { params = {} }
      if sock then
        sock:close()
      end
      local e = seen[i].error
      local lo, hi = pgsql.supported_range(e and e.M)
      local kind = e and (lo and "Protocol error" or "Startup error")
      if kind and not errors[kind] then
        errors[kind], r[kind], r[kind .. " source"] = e, describe(e)
        r["Protocol versions"] = r["Protocol versions"] or (lo and (lo .. " to " .. hi))
      end
    end
    local neg, auth, pe = seen[1].negotiate, seen[1].auth, errors["Protocol error"]
    r["Newest protocol"] = neg and (neg.major .. "." .. neg.minor)
    r.Authentication = auth and (auth.method .. (auth.mechanisms and (" (" .. table.concat(auth.mechanisms, ", ") .. ")") or ""))
    r["Server version"] = seen[1].params.server_version
    local lo, hi = string.match(r["Protocol versions"] or "", "^(%S+) to (%S+)$")
    local startup = pe and pe.R == "ProcessStartupPacket" and pe.F or nil
    local any_v = (pe and pe.V) or (errors["Startup error"] and errors["Startup error"].V)
    local flo, fhi = pgsql.version_family({ range_lo = lo, range_hi = hi, startup_file = startup, negotiates = neg ~= nil, v_field = any_v ~= nil })
    r["Version family"] = (flo or fhi) and pgsql.family_text(flo, fhi) or nil
    local lines = {}
    for _, k in ipairs(ORDER) do
      r[k] = r[k] and text.printable(r[k]) -- the server's bytes, as nmap prints them
      lines[#lines + 1] = r[k] and (k .. ": " .. r[k]) or nil
    end
    return r, "\n  " .. table.concat(lines, "\n  ")
  end,
}
