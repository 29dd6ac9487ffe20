-- rdp: the start of an RDP connection (MS-RDPBCGR 2.2.1.1-2.2.1.2): the
-- X.224 Connection Request with its RDP Negotiation Request, the server's
-- Connection Confirm, and the CredSSP (MS-CSSP) TSRequest that carries
-- SPNEGO/NTLM tokens once TLS is up.
--
--   local rdp = require "rdp"
--   sock:send(rdp.connection_request(bit32.bor(rdp.SSL, rdp.HYBRID)))
--   local c, err = rdp.read_confirm(sock)     -- { selected = 2 } or { failure = 5 } or {}
--   sock:tls_handshake()
--   sock:send(rdp.ts_request(token))
--   local tok, err = rdp.nego_token(rdp.receive_ts_request(sock))
--
-- A TPKT (RFC 1006) is version 3, a reserved byte and the whole length
-- (big-endian); the X.224 TPDU in it is its length indicator, its code
-- (0xE0 request, 0xD0 confirm), two references and a class, then the RDP
-- negotiation: type (1 request, 2 response, 3 failure), flags, length 8
-- and a 32-bit value (the protocols asked, the one selected, or the
-- failure code). Every length is checked; anything malformed is nil, why.

local ber = require "ber"

local rdp = {}

-- Security protocols (requestedProtocols / selectedProtocol).
rdp.RDP, rdp.SSL, rdp.HYBRID, rdp.RDSTLS, rdp.HYBRID_EX = 0, 1, 2, 4, 8

-- The failure codes of an RDP Negotiation Failure, by name.
rdp.FAILURES = {
  [1] = "SSL_REQUIRED_BY_SERVER", [2] = "SSL_NOT_ALLOWED_BY_SERVER", [3] = "SSL_CERT_NOT_ON_SERVER",
  [4] = "INCONSISTENT_FLAGS", [5] = "HYBRID_REQUIRED_BY_SERVER", [6] = "SSL_WITH_USER_AUTH_REQUIRED_BY_SERVER",
}

-- Longest TPKT taken from a server in the negotiation.
local MAX_TPKT = 512
-- Longest TSRequest taken from a server (a CHALLENGE is a few hundred bytes).
rdp.MAX_TS_REQUEST = 65536

-- A TPKT holding an X.224 TPDU of `code` with `data` after the class byte.
local function tpkt(code, data)
  local tpdu = string.pack(">BBI2I2B", #data + 6, code, 0, 0, 0) .. data
  return string.pack(">BBI2", 3, 0, #tpdu + 4) .. tpdu
end

-- An X.224 Connection Request asking for `protocols` (a bit set), with
-- the routing cookie "mstshash=COOKIE" (default "nmap", as nmap sends).
function rdp.connection_request(protocols, cookie)
  return tpkt(0xE0, "Cookie: mstshash=" .. (cookie or "nmap") .. "\r\n"
    .. string.pack("<BBI2I4", 1, 0, 8, protocols))
end

-- A Connection Confirm's TPDU (the bytes after the TPKT header): a table
-- with selected (the protocol chosen) and flags, or failure (a code), or
-- neither (an old server: standard RDP security only); or nil, why.
function rdp.parse_confirm(tpdu)
  if type(tpdu) ~= "string" or #tpdu < 7 then
    return nil, "X.224 TPDU too short"
  end
  local li, code = string.byte(tpdu, 1, 2)
  if code ~= 0xD0 then
    return nil, string.format("not an X.224 Connection Confirm (code 0x%02X)", code)
  end
  if li + 1 > #tpdu or li < 6 then
    return nil, "X.224 length indicator out of the TPKT"
  end
  if li < 14 then
    return {} -- no RDP negotiation in the confirm
  end
  local kind, flags, len, value = string.unpack("<BBI2I4", tpdu, 8)
  if len ~= 8 then
    return nil, "RDP negotiation of length " .. len
  end
  if kind == 2 then
    return { selected = value, flags = flags }
  elseif kind == 3 then
    return { failure = value, reason = rdp.FAILURES[value] }
  end
  return nil, "unknown RDP negotiation type " .. kind
end

-- Reads one TPKT from `sock` (recv_exact) and parses it as a Connection
-- Confirm (rdp.parse_confirm); or nil, why.
function rdp.read_confirm(sock)
  local head, err = sock:recv_exact(4)
  if not head then
    return nil, "no X.224 Connection Confirm: " .. tostring(err)
  end
  local version, _, len = string.unpack(">BBI2", head)
  if version ~= 3 then
    return nil, "not a TPKT (version " .. version .. ")"
  end
  if len < 11 or len > MAX_TPKT then
    return nil, "TPKT of " .. len .. " bytes"
  end
  local tpdu
  tpdu, err = sock:recv_exact(len - 4)
  if not tpdu then
    return nil, "X.224 Connection Confirm cut short: " .. tostring(err)
  end
  return rdp.parse_confirm(tpdu)
end

-- A TSRequest (MS-CSSP 2.2.1) of `version` (default 6) carrying one
-- negoToken, DER-encoded.
function rdp.ts_request(token, version)
  local nego = ber.sequence{ ber.sequence{ ber.context(0, ber.octets(token), true) } }
  return ber.sequence{
    ber.context(0, ber.integer(version or 6), true),
    ber.context(1, nego, true),
  }
end

-- The first context-tagged child [n] of a constructed node, or nil.
local function tagged(node, n)
  for _, child in ipairs(node) do
    if child.class == "context" and child.tag == n then
      return child
    end
  end
  return nil
end

-- The first negoToken of a DER TSRequest (its bytes), or nil, why (a
-- TSRequest with an errorCode says it: "CredSSP error 0xC000006D").
function rdp.nego_token(der)
  if type(der) ~= "string" then
    return nil, "no TSRequest"
  end
  local req, err = ber.decode_whole(der)
  if not req then
    return nil, "TSRequest: " .. err
  end
  if req.class ~= "universal" or req.tag ~= ber.SEQUENCE then
    return nil, "TSRequest is not a SEQUENCE"
  end
  local nego = tagged(req, 1)
  local list = nego and nego[1]
  local item = list and list[1]
  local wrapped = item and tagged(item, 0)
  local octets = wrapped and wrapped[1]
  if octets and octets.tag == ber.OCTET_STRING and octets.class == "universal" and octets.data then
    return octets.data
  end
  local code = tagged(req, 4)
  if code and code[1] and code[1].tag == ber.INTEGER and type(code[1].value) == "number" then
    return nil, string.format("CredSSP error 0x%08X", code[1].value % 2 ^ 32)
  end
  return nil, "TSRequest without a negoToken"
end

-- One whole TSRequest from a TLS socket, of at most rdp.MAX_TS_REQUEST
-- bytes; or nil, why.
function rdp.receive_ts_request(sock)
  return ber.receive(sock, rdp.MAX_TS_REQUEST)
end

return rdp
