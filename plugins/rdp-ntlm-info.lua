-- rdp-ntlm-info: what an RDP server with NLA (CredSSP) tells about itself
-- in its NTLM CHALLENGE (names, domain, OS build, clock), as nmap's
-- rdp-ntlm-info shows it.
--
-- Asks for TLS and CredSSP in the X.224 negotiation (lib rdp); a server
-- that selects CredSSP gets TLS on the same connection and a TSRequest
-- with an NTLM NEGOTIATE (no credentials), and answers with the CHALLENGE
-- (lib ntlm). A server that selects plain TLS or RDP security (xrdp) has
-- no NTLM to read: no result, as in nmap.

local ntlm = require "ntlm"
local rdp = require "rdp"

return {
  id = "rdp-ntlm-info",
  description = "Reads the NTLM CHALLENGE of an RDP server with NLA (CredSSP): NetBIOS and DNS names, domain, OS build and clock, as nmap's rdp-ntlm-info does.",
  categories = { "default", "discovery", "safe" },
  -- Values that change from run to run: `db diff` ignores them.
  volatile = { "System_Time" },
  ports = { 3389 },
  services = { "ms-wbt-server" },
  run = function(ctx)
    local sock, err = ctx:connect{ timeout = 5000 }
    if not sock then
      return nil, "connect: " .. tostring(err)
    end
    local asked = bit32.bor(rdp.SSL, rdp.HYBRID, rdp.HYBRID_EX)
    local ok, serr = sock:send(rdp.connection_request(asked))
    local confirm, cerr = ok and rdp.read_confirm(sock)
    if not confirm then
      sock:close()
      return nil, tostring(serr or cerr)
    end
    if not confirm.selected or bit32.band(confirm.selected, rdp.HYBRID + rdp.HYBRID_EX) == 0 then
      sock:close()
      ctx:log("no CredSSP: " .. (confirm.reason or ("protocol " .. tostring(confirm.selected or "RDP"))))
      return
    end
    local der
    ok, err = sock:tls_handshake()
    if ok then
      ok, err = sock:send(rdp.ts_request(ntlm.negotiate()))
    end
    if ok then
      der, err = rdp.receive_ts_request(sock)
    end
    sock:close()
    if not der then
      return nil, "CredSSP: " .. tostring(err)
    end
    local token, why = rdp.nego_token(der)
    if not token then
      return nil, why
    end
    local challenge, nerr = ntlm.parse_challenge(ntlm.find(token))
    if not challenge then
      return nil, "NTLM: " .. tostring(nerr)
    end
    return ntlm.info(challenge)
  end,
}
