-- ssl-date: the server's clock, as the ServerHello's random tells it, as
-- nmap's ssl-date shows it.
--
-- Before TLS 1.3 the first four bytes of the ServerHello's random were the
-- server's time (gmt_unix_time); many servers now send noise there. One
-- ClientHello (ctx:server_hello, through STARTTLS on the ports -sV found
-- speaking it) gives a sample. A sample more than 90 minutes off the
-- scanner's clock is checked with a second one, as nmap does: a clock
-- moves forward with the scanner's (within 5 s); noise does not. The
-- result is nmap's table (date, delta) and text ("DATE; +Ns from scanner
-- time."), or "TLS randomness does not represent time".

local rules = require "rules"

local MAX_SKEW = 90 * 60
local MAX_JITTER = 5

local function sample(ctx, starttls)
  local hello, err = ctx:server_hello{ starttls = starttls }
  if not hello then
    return nil, err
  end
  return { target = hello.time, scanner = os.time() }
end

-- nmap's difference of two times: "+1s", "-3m12s", "+2d01h00m05s".
local function difftime(delta)
  local sign = delta < 0 and "-" or "+"
  local s = math.abs(delta)
  local d, h, m = s // 86400, s % 86400 // 3600, s % 3600 // 60
  s %= 60
  if d > 0 then
    return ("%s%dd%02dh%02dm%02ds"):format(sign, d, h, m, s)
  elseif h > 0 then
    return ("%s%dh%02dm%02ds"):format(sign, h, m, s)
  elseif m > 0 then
    return ("%s%dm%02ds"):format(sign, m, s)
  end
  return ("%s%ds"):format(sign, s)
end

return {
  id = "ssl-date",
  description = "Reads a TLS server's clock from its ServerHello random, and says when that random is noise, as nmap's ssl-date does.",
  categories = { "discovery", "safe", "default" },
  -- Values that change from run to run: `db diff` ignores them.
  volatile = { "date", "delta" },
  ports = rules.TLS_PORTS,
  portrule = function(port)
    return rules.tls(port) or port.tunnel == "starttls"
  end,
  run = function(ctx)
    local starttls = ctx.tunnel == "starttls" and ctx.tls and ctx.tls.starttls or nil
    local tm, err = sample(ctx, starttls)
    if not tm then
      return nil, err
    end
    if math.abs(tm.target - tm.scanner) > MAX_SKEW then
      local again, err2 = sample(ctx, starttls)
      if not again then
        return nil, err2
      end
      local tchange, schange = again.target - tm.target, again.scanner - tm.scanner
      if tchange < 0 or math.abs(tchange - schange) > MAX_JITTER or (tchange == 0 and schange > 0) then
        return {}, "TLS randomness does not represent time"
      end
      tm = again
    end
    local delta = tm.target - tm.scanner
    local date = os.date("!%Y-%m-%dT%H:%M:%S+00:00", tm.target)
    return { date = date, delta = delta }, ("%s; %s from scanner time."):format(date, difftime(delta))
  end,
}
