-- smb-protocols: the SMB dialects a server accepts, as nmap's smb-protocols
-- lists them, and a finding when it still speaks SMBv1.
--
-- On port 445 (direct TCP), as nmap's smb.list_dialects: an SMBv1
-- NEGOTIATE offering "NT LM 0.12", then an SMB2 NEGOTIATE offering 2.0.2,
-- 2.1, 3.0, 3.0.2 and 3.1.1 (the server picks its highest), then each
-- older dialect offered alone, each on its own connection (lib/smb.lua).
-- The table is nmap's: dialects, a list of names ("202" ... "311", as nmap
-- 7.93 prints them; SMBv1 as "NT LM 0.12 (SMBv1) [dangerous, but default]").
-- nmap runs it as a host script; here it runs on port 445 only.

local smb = require "smb"

local SMB1_NAME = "NT LM 0.12 (SMBv1) [dangerous, but default]"
local CWE = { "CWE-327" }
local REFERENCES = {
  "https://techcommunity.microsoft.com/t5/storage-at-microsoft/stop-using-smb1/ba-p/425858",
  "https://learn.microsoft.com/en-us/windows-server/storage/file-server/troubleshoot/detect-enable-and-disable-smbv1-v2-v3",
}
local REMEDIATION = "Disable SMBv1: on Samba set 'server min protocol = SMB2_02' (the default since 4.11); "
  .. "on Windows remove the SMB1Protocol feature (Disable-WindowsOptionalFeature -Online -FeatureName SMB1Protocol)."

return {
  id = "smb-protocols",
  description = "Lists the SMB dialects (SMBv1, 2.0.2 to 3.1.1) a server accepts, as nmap's smb-protocols does, and flags SMBv1.",
  categories = { "safe", "discovery" },
  cwe = CWE,
  references = REFERENCES,
  remediation = REMEDIATION,
  tags = { "smb" },
  ports = { 445 },
  -- nmap's host script: the result is about the host (Host script results).
  scope = "host",
  run = function(ctx)
    local names, smb1 = smb.list_dialects(ctx)
    if not names then
      return nil, smb1
    end
    if smb1 then
      names[1] = SMB1_NAME
      ctx:finding{
        severity = "medium",
        title = "SMBv1 is enabled",
        data = { dialect = "NT LM 0.12", why = "SMBv1 lacks pre-authentication integrity and secure negotiation, and is deprecated" },
        cwe = CWE,
        references = REFERENCES,
        remediation = REMEDIATION,
        tags = { "smb", "weak-protocol" },
      }
    end
    if #names == 0 then
      if (ctx.verbosity or 0) > 1 then
        return "No dialects accepted. Something may be blocking the responses"
      end
      return nil, "no dialect accepted"
    end
    return { dialects = names }, "\n  dialects: \n    " .. table.concat(names, "\n    ")
  end,
}
