-- snmp-sysdescr: an SNMP agent's system description and uptime, as nmap's
-- snmp-sysdescr shows them.
--
-- Sends two SNMPv1 GetRequests with the community "public" (script arg
-- snmpcommunity) over UDP: one for sysDescr.0 (1.3.6.1.2.1.1.1.0), then one
-- for sysUpTime.0 (1.3.6.1.2.1.1.3.0), and reads each GetResponse (lib
-- snmp on lib ber: bounded, strict BER). The text is nmap's: the
-- description, then "  System uptime: 9m39.19s (57919 timeticks)" when
-- the agent gave it. An agent that answers "public" is a medium finding:
-- anyone who reaches it can read what it tells.

local snmp = require "snmp"
local rules = require "rules"

local SYS_DESCR, SYS_UPTIME = "1.3.6.1.2.1.1.1.0", "1.3.6.1.2.1.1.3.0"
local TIMEOUT = 5000

-- nmap's datetime.format_time(ticks, 100): "5d02h03m04.56s" without the
-- leading zero units ("9m39.19s", "0.00s").
local function uptime_text(ticks)
  local sec = (ticks % 6000) / 100
  local minutes = ticks // 6000
  local s = string.format("%.0fd%02.0fh%02.0fm%02.2fs", minutes // 1440, (minutes // 60) % 24, minutes % 60, sec)
  return string.match(s, "([1-9].*)") or "0.00s"
end

return {
  id = "snmp-sysdescr",
  description = "Reads an SNMP agent's sysDescr and sysUpTime with SNMPv1 community public, as nmap's snmp-sysdescr does.",
  categories = { "default", "discovery", "safe" },
  -- Values that change from run to run: `db diff` ignores them.
  volatile = { "System uptime" },
  args = { "snmpcommunity" },
  cwe = { "CWE-1392" },
  remediation = "Disable SNMPv1/v2c or change the default community, and allow only management hosts to reach UDP 161.",
  portrule = rules.port_or_service({ 161 }, { "snmp" }, "udp"),
  run = function(ctx)
    local community = ctx.args.snmpcommunity or "public"
    local sock, err = ctx:udp{ port = ctx.port, timeout = TIMEOUT }
    if not sock then
      return nil, "udp: " .. tostring(err)
    end
    local resp, rerr = snmp.get(sock, community, { SYS_DESCR }, { id = 28428 })
    local descr = resp and resp.error_status == 0 and resp.varbinds[1]
    if not descr or descr.type ~= "octets" then
      sock:close()
      return nil, "no sysDescr: " .. tostring(rerr or (resp and "error status " .. resp.error_status))
    end
    if community == "public" then
      ctx:finding{
        severity = "medium",
        title = "SNMP agent answers the default community \"public\"",
        data = { community = community, version = "v1", sysDescr = string.sub(descr.value, 1, 300) },
      }
    end
    local text = descr.value
    resp = snmp.get(sock, community, { SYS_UPTIME }, { id = 28429 })
    sock:close()
    if not resp then
      return text -- as nmap: no answer, the description alone
    end
    local ticks = resp.varbinds[1] and resp.varbinds[1].value
    if type(ticks) ~= "number" then
      -- nmap shows nothing at all when the agent answers without a value.
      return nil, "the agent answered without sysUpTime"
    end
    text ..= ("\n  System uptime: %s (%d timeticks)"):format(uptime_text(ticks), ticks)
    return text
  end,
}
