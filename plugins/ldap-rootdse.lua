-- ldap-rootdse: an LDAP server's root DSE (RFC 4512 section 5.1: naming
-- contexts, supported versions, controls, extensions and SASL mechanisms),
-- as nmap's ldap-rootdse shows it.
--
-- Searches the empty base with scope base and the filter (objectclass=*),
-- anonymously, asking for no attributes (lib ldap on lib ber: every reply
-- bounded). A server that answers without namingContexts or
-- supportedLDAPVersion (OpenLDAP gives only objectClass) is asked again,
-- on the same connection, for nmap's list of root DSE attributes. The text
-- is nmap's: "LDAP Results", each entry ("<ROOT>" or "dn: ...") and its
-- "attribute: value" lines. A search that ends in an error before any
-- entry shows nothing, as in nmap.

local ldap = require "ldap"
local rules = require "rules"

local TIMEOUT = 10000

-- nmap's list: what Active Directory and RFC 4512 put in the root DSE.
local ATTRIBUTES = {
  "_domainControllerFunctionality", "configurationNamingContext", "currentTime", "defaultNamingContext",
  "dnsHostName", "domainFunctionality", "dsServiceName", "forestFunctionality", "highestCommittedUSN",
  "isGlobalCatalogReady", "isSynchronized", "ldap-get-baseobject", "ldapServiceName", "namingContexts",
  "rootDomainNamingContext", "schemaNamingContext", "serverName", "subschemaSubentry",
  "supportedCapabilities", "supportedControl", "supportedLDAPPolicies", "supportedLDAPVersion",
  "supportedSASLMechanisms", "altServer", "supportedExtension",
}

-- nmap's stdnse.format_output of its table: each value's lines (split as
-- nmap splits them) indented by six spaces under its entry's name.
local function nse_text(entries)
  local out = { "\nLDAP Results\n" }
  for _, e in ipairs(entries) do
    out[#out + 1] = "  " .. (e.dn ~= "" and "dn: " .. e.dn or "<ROOT>") .. "\n"
    for _, a in ipairs(e.attributes) do
      for _, v in ipairs(a.values) do
        for line in string.gmatch(a.type .. ": " .. v .. "\n", "([^\r\n]-)\n") do
          out[#out + 1] = "      " .. line .. "\n"
        end
      end
    end
  end
  return table.concat(out)
end

return {
  id = "ldap-rootdse",
  description = "Reads an LDAP server's root DSE (naming contexts, versions, controls, SASL mechanisms), as nmap's ldap-rootdse does.",
  categories = { "discovery", "safe" },
  portrule = rules.port_or_service({ 389, 636 }, { "ldap", "ldapssl" }),
  run = function(ctx)
    -- TLS on ldapssl; else the port's tunnel decides (tls = nil).
    local sock, err = ctx:connect{ tls = ctx.service == "ldapssl" or nil, timeout = TIMEOUT }
    if not sock then
      return nil, "connect: " .. tostring(err)
    end
    local query = { base = "", scope = ldap.SCOPE.base, present = "objectclass" }
    local entries, done = ldap.search(sock, 1, query)
    local refused = entries and #entries == 0 and done.code ~= 0
    if entries and not refused and not ldap.values(entries, "namingContexts") and not ldap.values(entries, "supportedLDAPVersion") then
      query.attributes = ATTRIBUTES
      entries, done = ldap.search(sock, 2, query)
    end
    sock:close()
    if not entries then
      return nil, done
    end
    if #entries == 0 then
      return nil, ("no root DSE (result code %d: %s)"):format(done.code, done.message:sub(1, 200))
    end
    return nse_text(entries)
  end,
}
