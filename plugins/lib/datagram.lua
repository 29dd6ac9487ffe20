-- datagram: one question over UDP, as the datagram protocols (DNS, NTP,
-- SNMP...) ask it: send, read the answers that come, keep the first one
-- the protocol accepts, and send again after a silence.
--
--   local datagram = require "datagram"
--   local answer, err = datagram.exchange(sock, request, function(d)
--     return decode(d)        -- the answer, or nil, why (not ours, malformed)
--   end, { tries = 2, max_replies = 8 })
--
-- `sock` is a ctx:udp socket (its timeout bounds each wait). Each of
-- `tries` sends (default 2) is followed by at most `max_replies` reads
-- (default 8); a timeout moves on to the next send, any other receive
-- error (port unreachable) ends the exchange at once. Gives the accepted
-- answer, or nil and why (the last reason an answer was refused, or the
-- last receive error).

local datagram = {}

function datagram.exchange(sock, request, accept, opts)
  opts = opts or {}
  local why = "no answer"
  for _ = 1, opts.tries or 2 do
    local ok, err = sock:send(request)
    if not ok then
      return nil, "send: " .. tostring(err)
    end
    for _ = 1, opts.max_replies or 8 do
      local d, rerr = sock:recv()
      if not d then
        why = tostring(rerr)
        if rerr.kind ~= "timeout" then
          return nil, why
        end
        break
      end
      local answer, aerr = accept(d)
      if answer then
        return answer
      end
      why = tostring(aerr or "answer refused")
    end
  end
  return nil, why
end

return datagram
