-- rdp-ntlm-info: what an RDP server with NLA (CredSSP) tells about itself
-- in its NTLM CHALLENGE (names, domain, OS build, clock), as nmap's
-- rdp-ntlm-info shows it -- as far as the plugin API allows.
--
-- Sends nmap's X.224 Connection Request (cookie "mstshash=nmap", RDP
-- negotiation asking for TLS, CredSSP and CredSSP with early user auth)
-- and reads the Connection Confirm: the protocol the server selects, or
-- its negotiation failure. nmap then starts TLS on the same connection,
-- sends an NTLM NEGOTIATE in a CredSSP TSRequest and shows the CHALLENGE
-- (lib ntlm: ntlm.negotiate, ntlm.parse_challenge, ntlm.info). The
-- plugin API has no TLS after a plain exchange for RDP (sock:starttls
-- knows mail, LDAP, database and XMPP exchanges only), so this stops at
-- the negotiation: a server that selects CredSSP is an error naming what
-- is missing; one that selects plain TLS or RDP security (xrdp) gives no
-- result, as in nmap, which finds no NTLM there.

local TIMEOUT = 5000
local PROTOCOL_SSL, PROTOCOL_HYBRID, PROTOCOL_HYBRID_EX = 1, 2, 8

-- A TPKT (RFC 1006) holding an X.224 TPDU of `code` with `data`.
local function tpkt(code, data)
  local tpdu = string.pack("BB", #data + 1, code) .. data
  return string.pack(">BBI2", 3, 0, #tpdu + 4) .. tpdu
end

return {
  id = "rdp-ntlm-info",
  description = "Asks an RDP server for CredSSP (NLA); nmap's rdp-ntlm-info then reads the server's NTLM CHALLENGE, which needs TLS after X.224 that the plugin API lacks.",
  categories = { "default", "discovery", "safe" },
  ports = { 3389 },
  services = { "ms-wbt-server" },
  run = function(ctx)
    local sock, err = ctx:connect{ timeout = TIMEOUT }
    if not sock then
      return nil, "connect: " .. tostring(err)
    end
    local request = string.pack(">I2I2B", 0, 0, 0) .. "Cookie: mstshash=nmap\r\n"
      .. string.pack("<BBI2I4", 1, 0, 8, bit32.bor(PROTOCOL_SSL, PROTOCOL_HYBRID, PROTOCOL_HYBRID_EX))
    local ok, serr = sock:send(tpkt(0xE0, request))
    local head = ok and sock:recv_exact(4)
    local len = head and string.byte(head, 1) == 3 and string.unpack(">I2", head, 3)
    local body = len and len >= 11 and len <= 512 and sock:recv_exact(len - 4)
    sock:close()
    if not body then
      return nil, "no X.224 Connection Confirm: " .. tostring(serr or "not a TPKT")
    end
    if string.byte(body, 2) ~= 0xD0 then
      return nil, "not an X.224 Connection Confirm"
    end
    -- After LI, code, two references and the class: the RDP negotiation.
    if #body < 15 then
      ctx:log("no RDP negotiation: standard RDP security only")
      return
    end
    local kind, _, _, value = string.unpack("<BBI2I4", body, 8)
    if kind == 3 then
      ctx:log("RDP negotiation failure, code " .. value)
      return
    elseif kind ~= 2 then
      return nil, "unknown RDP negotiation type " .. kind
    end
    if bit32.band(value, PROTOCOL_HYBRID + PROTOCOL_HYBRID_EX) ~= 0 then
      return nil, "the server selected CredSSP (NLA, protocol " .. value
        .. "): its NTLM CHALLENGE comes inside TLS started after X.224, which sock:starttls cannot do for RDP"
    end
    ctx:log("the server selected protocol " .. value .. " (no CredSSP): no NTLM to read")
  end,
}
