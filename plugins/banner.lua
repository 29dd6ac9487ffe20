-- banner: what a service sent first, as printable text.
--
-- Service detection keeps the first bytes each service sent (ctx.banner);
-- this plugin shows them with every non-printable byte written as \xHH,
-- at most 256 characters, like nmap's banner script.

local MAX_CHARS = 256

-- Printable ASCII stays; a backslash is doubled so \xHH is never ambiguous;
-- every other byte becomes \xHH. Stops before MAX_CHARS characters.
local function printable(s)
  local out = {}
  local used = 0
  local truncated = false
  local n = math.min(#s, MAX_CHARS) -- each byte yields at least one character
  for i = 1, n do
    local b = string.byte(s, i)
    local piece
    if b == 0x5c then
      piece = "\\\\"
    elseif b >= 0x20 and b <= 0x7e then
      piece = string.char(b)
    else
      piece = string.format("\\x%02X", b)
    end
    if used + #piece > MAX_CHARS then
      truncated = true
      break
    end
    out[#out + 1] = piece
    used += #piece
  end
  if #s > n then
    truncated = true
  end
  return table.concat(out), truncated
end

return {
  id = "banner",
  description = "Shows the banner a service sent first, non-printable bytes as \\xHH (at most 256 characters).",
  categories = { "discovery", "safe" },
  portrule = function(port)
    return true
  end,
  run = function(ctx)
    local raw = ctx.banner or ""
    if raw == "" then
      -- No service detection ran (or it read nothing): connect and wait
      -- for the service to speak first, as nmap's banner script does.
      -- The bytes on the wire, in the clear even on a TLS port (tls = false).
      local sock, err = ctx:connect{ tls = false, timeout = 5000 }
      if not sock then
        return nil, "connect: " .. tostring(err)
      end
      raw = sock:recv(1024) or ""
      sock:close()
    end
    -- As nmap: the line ends at the end are not shown.
    raw = string.gsub(raw, "[\r\n]+$", "")
    if raw == "" then
      return nil, "no banner"
    end
    -- nmap's banner script returns the text alone.
    local text = printable(raw)
    return text
  end,
}
