-- dns-nsid: a DNS server's name server identifier (NSID, RFC 5001), its
-- id.server and its version.bind, as nmap's dns-nsid shows them.
--
-- Asks two CHAOS-class TXT questions (RFC 4892), over UDP (or TCP on a TCP
-- port), with recursion desired, as nmap does: "id.server" with an OPT
-- record (4096 bytes, DNSSEC OK, an empty NSID option), then "version.bind"
-- without one (lib dns: bounded parsing). As nmap, the first answer counts
-- only when it has answer records or says "no such name"; from it come
-- NSID (the NSID option of its OPT record, shown "raw (hex)") and id.server
-- (the first string of its first TXT answer). bind.version is the first
-- answer record of the second question: its TXT strings joined (nmap shows
-- the record's data less its first byte, the same for a one-string TXT).
-- Nothing is shown when neither question is answered.

local dns = require "dns"

local TIMEOUT = 3000

-- The decoded answer to one question, or nil, why (a socket per question, as nmap).
local function ask(ctx, q)
  local tcp = ctx.protocol == "tcp"
  local sock, err
  if tcp then
    sock, err = ctx:connect{ timeout = TIMEOUT }
  else
    sock, err = ctx:udp{ timeout = TIMEOUT }
  end
  if not sock then
    return nil, tostring(err)
  end
  local m, why = dns.exchange(sock, q, { tcp = tcp })
  sock:close()
  return m, why
end

return {
  id = "dns-nsid",
  description = "Reads a DNS server's NSID, id.server and version.bind (CHAOS TXT), as nmap's dns-nsid does.",
  categories = { "default", "discovery", "safe" },
  portrule = function(port)
    return (port.number == 53 or port.service == "domain") and (port.protocol == "udp" or port.protocol == "tcp")
  end,
  run = function(ctx)
    local T, CH = dns.TYPE.TXT, dns.CLASS.CH
    local result, lines = {}, {}
    local id = math.random(0, 0xfffe)
    local m, err = ask(ctx, dns.encode_query{
      id = id, name = "id.server", type = T, class = CH,
      edns = { udp_size = 4096, dnssec_ok = true, options = { { code = dns.OPT_NSID, data = "" } } },
    })
    if m and (#m.answers > 0 or m.rcode % 4 == 3) then
      local nsid = dns.nsid(m)
      if nsid then
        local hex = string.gsub(nsid, ".", function(c)
          return string.format("%02x", string.byte(c))
        end)
        result.NSID = { raw = nsid, hex = hex }
        lines[#lines + 1] = ("NSID: %s (%s)"):format(nsid, hex)
      end
      for _, rec in ipairs(m.answers) do
        if rec.txt and rec.txt[1] then
          result["id.server"] = rec.txt[1]
          lines[#lines + 1] = "id.server: " .. rec.txt[1]
          break
        end
      end
    end

    local m2, err2 = ask(ctx, dns.encode_query{ id = id + 1, name = "version.bind", type = T, class = CH })
    local first = m2 and m2.answers[1]
    if first then
      local v = first.txt and table.concat(first.txt) or string.sub(first.data, 2)
      result["bind.version"] = v
      lines[#lines + 1] = "bind.version: " .. v
    end
    if #lines == 0 then
      return nil, "no answer: " .. tostring(err or "id.server not answered") .. "; " .. tostring(err2 or "version.bind not answered")
    end
    return result, "\n  " .. table.concat(lines, "\n  ")
  end,
}
