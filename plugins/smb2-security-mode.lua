-- smb2-security-mode: an SMB2/3 server's message-signing setting, as nmap's
-- smb2-security-mode shows it.
--
-- On port 445 (direct TCP): one SMB2 NEGOTIATE offering 2.0.2 to 3.1.1
-- (lib/smb.lua); the reply's SecurityMode has bit 0x01 (signing enabled)
-- and 0x02 (signing required). The setting is the server's, not a
-- dialect's, so as nmap only the dialect the server picks is shown: nmap's
-- table, that dialect's name ("311", as nmap 7.93 prints it) holding one
-- line. nmap runs it as a host script; here it runs on port 445 only.

local smb = require "smb"

local MODES = {
  [0] = "Message signing is disabled and not required!",
  [1] = "Message signing enabled but not required",
  [2] = "Message signing is disabled!",
  [3] = "Message signing enabled and required",
}

return {
  id = "smb2-security-mode",
  description = "Shows whether an SMB2/3 server enables and requires message signing, as nmap's smb2-security-mode does.",
  categories = { "safe", "discovery", "default" },
  tags = { "smb" },
  ports = { 445 },
  -- nmap's host script: the result is about the host (Host script results).
  scope = "host",
  run = function(ctx)
    local r, err, unreached = smb.negotiate2(ctx)
    local name = r and r.status == 0 and smb.dialect_name(r.dialect)
    if not name then
      if (ctx.verbosity or 0) > 1 and (r or not unreached) then
        return "Couldn't establish a SMBv2 connection."
      end
      if not r then
        return nil, err
      end
      return nil, r.status ~= 0 and ("SMB2 NEGOTIATE refused: 0x%08x"):format(r.status)
        or ("the server chose dialect 0x%04x, not one offered"):format(r.dialect)
    end
    local line = MODES[r.security_mode % 4]
    return { [name] = { line } }, "\n  " .. name .. ": \n    " .. line
  end,
}
