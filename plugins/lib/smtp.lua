-- smtp: opening an SMTP session the way nmap's smtp library does, on the
-- plain ports (25, submission on 587) and on implicit-TLS SMTPS (465).
--
--   local smtp = require "smtp"
--   local sock, greeting, err = smtp.connect(ctx, { timeout = 10000 })
--   local domain = smtp.domain(ctx, "smtp-commands")  -- for EHLO
--   ... reply.command(sock, "EHLO " .. domain, smtp.REPLY) ...
--   smtp.quit(sock)
--
-- connect tries TLS first where TLS is likely from the first byte (service
-- detection found the service inside TLS, the port is a usual TLS port
-- such as 465, or the service is smtps), plain TCP first elsewhere, and the
-- other way when the first gives no greeting, as nmap's comm.tryssl. It
-- returns the socket and the greeting's lines once a whole reply was read.
-- `timeout` (ms, default 10000 as nmap's smtp-commands) bounds each read;
-- a second try after a first that timed out fits in the run's wall budget
-- (10 s by default) only when it is under half of it. A failed TLS
-- handshake fails fast, so TLS-first ports fall back in time whatever it is.
-- TLS offers no ALPN: ctx:connect{tls = true} offers http/1.1, and Exim
-- refuses a TLS client with an ALPN it does not speak (a fatal
-- no_application_protocol alert); nmap offers none either.

local reply = require "reply"
local rules = require "rules"

local smtp = {}

-- Bounds of one SMTP reply (RFC 5321: a line is at most 512 bytes; some
-- servers send longer ones, so 2048) and strict codes.
smtp.REPLY = { max_lines = 128, max_line = 2048, strict = true }

local TLS = { alpn = {} }

-- Whether TLS is likely from the first byte on this port.
function smtp.tls_first(ctx)
  return ctx.tunnel == "ssl" or ctx.service == "smtps" or table.find(rules.TLS_PORTS, ctx.port) ~= nil
end

-- One try: connect (TLS or not) and read the greeting.
local function try(ctx, tls, timeout)
  local sock, err = ctx:connect{ tls = tls and TLS or false, timeout = timeout }
  if not sock then
    return nil, nil, "connect: " .. tostring(err)
  end
  local code, lines, rerr = reply.read(sock, smtp.REPLY)
  if not code then
    sock:close()
    local got = #lines > 0 and table.concat(lines, " | ") or tostring(rerr)
    return nil, lines, "no greeting: " .. string.sub(got, 1, 300)
  end
  return sock, lines
end

-- A socket past the greeting, and the greeting's lines; or nil, nil, err.
function smtp.connect(ctx, opts)
  local timeout = opts and opts.timeout or 10000
  local first = smtp.tls_first(ctx)
  local sock, lines, err = try(ctx, first, timeout)
  -- As nmap: the other way only when the first gave nothing at all.
  if not sock and (lines == nil or #lines == 0) then
    local err2
    sock, lines, err2 = try(ctx, not first, timeout)
    if not sock then
      return nil, nil, ("%s: %s; %s: %s"):format(first and "TLS" or "plain", err, first and "plain" or "TLS", err2)
    end
  end
  if not sock then
    return nil, nil, err
  end
  return sock, lines
end

-- The domain for EHLO/HELO: the script's own argument ("<id>.domain"),
-- then smtp.domain, then nmap's default.
function smtp.domain(ctx, id)
  local args = ctx.args or {}
  return args[id .. ".domain"] or args["smtp.domain"] or "nmap.scanme.org"
end

-- Says QUIT, reads the answer (bounded) and closes.
function smtp.quit(sock)
  reply.command(sock, "QUIT", smtp.REPLY)
  sock:close()
end

return smtp
