-- vnc-info: a VNC server's protocol version and the security types it
-- offers, as nmap's vnc-info shows them, and whether it asks for no
-- authentication at all.
--
-- Reads the server's "RFB xxx.yyy" version, answers with a version nmap's
-- library would, and reads the security types offered (lib/vnc.lua). When
-- VeNCrypt (19) is among them, chooses it and lists its auth subtypes
-- (nmap's "VeNCrypt auth subtypes"). No password is tried; the connection
-- is closed before any authentication. "WARNING: Server does not require
-- authentication" is nmap's: for the None type (1), or VeNCrypt's "None,
-- Anonymous TLS" (257). nmap's Tight and TLS (18) sub-negotiations are not
-- done here. A server that needs no password is also a high finding
-- (VeNCrypt's "None, Server-authenticated TLS", 260, counts there too).

local vnc = require "vnc"

local TIMEOUT = 5000

-- NSE's text for a list of { name, type }: "name (type)" a line.
local function list_text(key, items)
  local out = { "\n  " .. key .. ": " }
  for _, t in ipairs(items) do
    out[#out + 1] = ("\n    %s (%d)"):format(t.name, t.type)
  end
  return table.concat(out)
end

return {
  id = "vnc-info",
  description = "Shows a VNC server's protocol version and the security types it offers, as nmap's vnc-info does.",
  categories = { "default", "discovery", "safe" },
  cwe = { "CWE-306" },
  remediation = "Require a password (or VeNCrypt with authentication) for every VNC session, and reach VNC only through a VPN or SSH tunnel.",
  ports = { 5900, 5901, 5902 },
  services = { "vnc" },
  run = function(ctx)
    local sock, err = ctx:connect{ timeout = TIMEOUT }
    if not sock then
      return nil, "connect: " .. tostring(err)
    end
    local hs, herr = vnc.handshake(sock)
    if not hs then
      sock:close()
      return nil, herr
    end
    local result = { ["Protocol version"] = hs.version }
    local text = { "\n  Protocol version: " .. hs.version }
    if #hs.types > 0 then
      result["Security types"] = vnc.named(hs.types, vnc.SECTYPES)
      text[#text + 1] = list_text("Security types", result["Security types"])
    end
    local no_auth = vnc.has(hs.types, vnc.NONE)
    local subtypes
    if vnc.has(hs.types, vnc.VENCRYPT) and hs.client ~= "RFB 003.003" and sock:send(string.char(vnc.VENCRYPT)) then
      local verr
      subtypes, verr = vnc.vencrypt(sock)
      if subtypes then
        result["VeNCrypt auth subtypes"] = vnc.named(subtypes, vnc.VENCRYPT_SUBTYPES)
        text[#text + 1] = list_text("VeNCrypt auth subtypes", result["VeNCrypt auth subtypes"])
        no_auth = no_auth or vnc.has(subtypes, 257)
      else
        ctx:log("vnc-info: VeNCrypt: " .. tostring(verr))
      end
    end
    sock:close()
    if no_auth then
      result.WARNING = "Server does not require authentication"
      text[#text + 1] = "\n  WARNING: " .. result.WARNING
    end
    if no_auth or (subtypes and vnc.has(subtypes, 260)) then
      ctx:finding{
        severity = "high",
        title = "VNC server requires no authentication",
        data = { version = hs.version, why = "anyone who reaches this port can see and control the desktop" },
      }
    end
    return result, table.concat(text)
  end,
}
