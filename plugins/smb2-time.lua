-- smb2-time: an SMB2/3 server's clock and start time, as nmap's smb2-time
-- shows them.
--
-- On port 445 (direct TCP): one SMB2 NEGOTIATE offering 2.0.2 to 3.1.1
-- (lib/smb.lua); the reply carries SystemTime and ServerStartTime
-- (FILETIMEs). nmap's table: date and start_date in UTC,
-- "2024-05-01T12:34:56", start_date "N/A" when the server gives 0 (Samba
-- does). A server that refuses SMB2 gets nmap's line "Protocol negotiation
-- failed (SMB2)". nmap runs it as a host script; here it runs on 445 only.

local smb = require "smb"

return {
  id = "smb2-time",
  description = "Shows the current date and start date an SMB2/3 server reports, as nmap's smb2-time does.",
  categories = { "discovery", "safe", "default" },
  -- Values that change from run to run: `db diff` ignores them.
  volatile = { "date" },
  tags = { "smb" },
  ports = { 445 },
  -- nmap's host script: the result is about the host (Host script results).
  scope = "host",
  run = function(ctx)
    local r, err, unreached = smb.negotiate2(ctx)
    if unreached then
      return nil, err
    end
    if not r or r.status ~= 0 then
      return "Protocol negotiation failed (SMB2)"
    end
    local date = smb.format_time(r.system_time)
    local start_date = r.start_time and smb.format_time(r.start_time) or "N/A"
    return { date = date, start_date = start_date }, "\n  date: " .. date .. "\n  start_date: " .. start_date
  end,
}
