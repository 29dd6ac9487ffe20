-- socks-auth-info: which authentication methods a SOCKS5 proxy accepts,
-- as nmap's socks-auth-info lists them.
--
-- For each method (0 none, 1 GSSAPI, 2 username and password) a new
-- connection sends the SOCKS5 greeting offering only that method,
-- 05 01 <method> (RFC 1928 section 3), and reads the two-byte answer
-- 05 <chosen>; a chosen method other than FF (none acceptable) is one the
-- server accepts. No authentication is attempted and nothing is proxied.
-- A timeout ends the tries, so a silent server costs one TIMEOUT or two.

local TIMEOUT = 3000 -- ms per operation
local METHODS = { 0, 1, 2 }
local NAMES = { [0] = "No authentication", [1] = "GSSAPI", [2] = "Username and password" }

-- The method the server chooses when offered only `method`, or nil, why
-- (the host's error values keep their kind through errors.wrap).
local function chosen(ctx, method)
  local sock, err = ctx:connect{ timeout = TIMEOUT }
  if not sock then
    return nil, errors.wrap(err, "connect: ")
  end
  local ok, serr = sock:send(string.pack("BBB", 5, 1, method))
  if not ok then
    sock:close()
    return nil, errors.wrap(serr, "send: ")
  end
  local answer, rerr = sock:recv_exact(2)
  sock:close()
  if not answer then
    return nil, errors.wrap(rerr, "no answer: ")
  end
  local version, picked = string.unpack("BB", answer)
  if version ~= 5 then
    return nil, ("Unsupported SOCKS version (%d)"):format(version)
  end
  if picked == 0xFF then
    return nil, "No acceptable authentication methods"
  end
  return picked
end

return {
  id = "socks-auth-info",
  description = "Lists the authentication methods (none, GSSAPI, username and password) a SOCKS5 proxy accepts, as nmap's socks-auth-info does.",
  categories = { "discovery", "safe", "default" },
  tags = { "socks", "proxy", "authentication" },
  ports = { 1080, 9050 },
  services = { "socks", "socks5", "socks4", "tor-socks" },
  run = function(ctx)
    local result, lines, why = {}, {}, {}
    for _, method in ipairs(METHODS) do
      local picked, err = chosen(ctx, method)
      if picked then
        local name = NAMES[picked] or ("Unknown method (%d)"):format(picked)
        result[#result + 1] = { method = picked, name = name }
        lines[#lines + 1] = "\n  " .. name
      else
        why[#why + 1] = NAMES[method] .. ": " .. err
        -- A server that lets one greeting time out will not answer the next.
        if err.kind == "timeout" then
          break
        end
      end
    end
    if #result == 0 then
      return nil, "no method accepted (" .. table.concat(why, "; ") .. ")"
    end
    -- nmap prints each entry by its name (the entries' __tostring).
    return result, table.concat(lines)
  end,
}
