-- text: string helpers for what servers send.
--
--   local text = require "text"
--   text.trim("  a b  ")          --> "a b"
--   text.clip(s, 80)              --> s cut to 80 bytes, "..." marking a cut
--   text.printable("a\0b")        --> "a\\x00b": bytes as nmap prints them
--   text.pairs({ { "Version", "7.0" }, { "Ports", { "1", "2" } } })
--                                 --> NSE's text of an ordered table
--
-- Each runs in time linear in its input: a pattern such as "(.-)%s*$" is
-- quadratic on a long run of spaces a server can send.

local text = {}

-- `s` without white space around it.
function text.trim(s)
  local a = string.find(s, "%S")
  if not a then
    return ""
  end
  local b = #s
  while b > a and string.find(string.sub(s, b, b), "^%s") do
    b -= 1
  end
  return string.sub(s, a, b)
end

-- `s` cut to at most `max` bytes (default 200), "..." ending a cut one.
function text.clip(s, max)
  max = max or 200
  if #s <= max then
    return s
  end
  return string.sub(s, 1, max) .. "..."
end

-- `s` as nmap prints a server's bytes: \xHH (upper case) for every byte
-- but printable ASCII, tab, CR and LF.
function text.printable(s)
  return (string.gsub(s, "[^\32-\126\t\r\n]", function(c)
    return string.format("\\x%02X", string.byte(c))
  end))
end

-- NSE's text of an ordered list of { key, value } pairs, as nmap prints
-- a script's output table: "\n  key: value" each, and a list value's
-- items under its key, "\n    item" each.
function text.pairs(entries)
  local out = {}
  for _, e in ipairs(entries) do
    out[#out + 1] = "\n  " .. e[1] .. ": "
    if type(e[2]) == "table" then
      for _, v in ipairs(e[2]) do
        out[#out + 1] = "\n    " .. v
      end
    else
      out[#out + 1] = e[2]
    end
  end
  return table.concat(out)
end

return text
