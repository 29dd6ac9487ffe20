-- ssh2-enum-algos: the algorithms an SSH-2 server offers (key exchange,
-- host key, encryption, MAC, compression), as nmap's ssh2-enum-algos
-- shows them, and the weak ones among them as findings.
--
-- Exchanges version lines and reads the server's SSH_MSG_KEXINIT (RFC 4253
-- section 7.1; lib ssh2: bounded reads), then closes: no key exchange is
-- made. As nmap: kex_algorithms and server_host_key_algorithms, then
-- encryption, MAC and compression lists, each shown once when both
-- directions are the same and as _client_to_server and _server_to_client
-- otherwise. The text gives each list's count, and with verbosity (a
-- script named on the command line) its names. Each kind of weak
-- algorithm the server offers (ssh2.weak: SHA-1 and 1024-bit key
-- exchanges, ssh-dss, arcfour, CBC ciphers, HMAC-MD5, HMAC-SHA1-96, none)
-- is one finding listing them.

local ssh2 = require "ssh2"

local TIMEOUT = 5000
local C2S, S2C = "_client_to_server", "_server_to_client"

return {
  id = "ssh2-enum-algos",
  description = "Lists the key exchange, host key, encryption, MAC and compression algorithms an SSH-2 server offers, as nmap's ssh2-enum-algos does, and flags weak ones.",
  categories = { "discovery", "safe" },
  cwe = { "CWE-327" },
  ports = { 22 },
  services = { "ssh" },
  run = function(ctx)
    local sock, err = ctx:connect{ timeout = TIMEOUT }
    if not sock then
      return nil, "connect: " .. tostring(err)
    end
    local ok, kind, payload
    ok, err = ssh2.exchange_versions(sock, "SSH-2.0-Nmap_SSH2_Enum_Algos")
    if ok then
      kind, payload = ssh2.next_message(sock)
    end
    sock:close()
    if not ok or not kind then
      return nil, ok and payload or err
    end
    local kex, kerr = ssh2.parse_kexinit(payload)
    if not kex then
      return nil, kerr
    end

    -- nmap's order, the two directions merged when they are the same.
    local order = { "kex_algorithms", "server_host_key_algorithms" }
    for _, l in ipairs({ "encryption_algorithms", "mac_algorithms", "compression_algorithms" }) do
      if kex[l .. C2S] == kex[l .. S2C] then
        kex[l] = kex[l .. C2S]
        order[#order + 1] = l
      else
        order[#order + 1] = l .. C2S
        order[#order + 1] = l .. S2C
      end
    end
    local result, lines, offered = {}, {}, {}
    for _, l in ipairs(order) do
      local names, nerr = ssh2.name_list(kex[l])
      if not names then
        return nil, l .. ": " .. nerr
      end
      result[l] = names
      local head = ("\n  %s: (%d)"):format(l, #names)
      lines[#lines + 1] = ctx.verbosity > 0 and head .. "\n      " .. table.concat(names, "\n      ") or head
      local base = string.gsub(l, "_[a-z]+_to_[a-z]+$", "")
      offered[base] = offered[base] or {}
      table.move(names, 1, #names, #offered[base] + 1, offered[base])
    end

    for _, w in ipairs(ssh2.weak(offered)) do
      ctx:finding{
        severity = w.severity,
        title = "SSH server offers " .. w.what,
        data = { algorithms = w.algorithms, why = w.why },
        references = { w.reference },
        cve = w.cve and { w.cve } or nil,
        cwe = { "CWE-327" },
        remediation = ("Remove these algorithms from the server's %s setting."):format(w.option),
      }
    end
    return result, table.concat(lines)
  end,
}
