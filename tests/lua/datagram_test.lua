-- datagram-test: unit tests of lib/datagram.lua with a fake ctx:udp socket
-- (answers, garbage, silence, a closed port, a flood, a failing send), offline.
local datagram = require "datagram"

-- A datagram socket answering from a list: a string is a datagram, false a
-- timeout, a table an error message. `send_fails` makes every send fail.
local function fake_udp(replies, send_fails)
  local sent, i = {}, 0
  local sock = { sent = sent, reads = 0 }
  function sock:send(data)
    if send_fails then
      return nil, "network unreachable"
    end
    sent[#sent + 1] = data
    return true
  end
  function sock:recv()
    i += 1
    self.reads = i
    local r = replies[i]
    if r == nil or r == false then
      return nil, errors.new("timeout", "timeout") -- as ctx:udp's recv says it
    elseif type(r) == "table" then
      return nil, r[1]
    end
    return r
  end
  return sock
end

-- Accepts "ok..." datagrams, refuses the rest with why.
local function accept(d)
  if string.sub(d, 1, 2) == "ok" then
    return d
  end
  return nil, "not ok: " .. d
end

return {
  id = "datagram-test",
  description = "Unit tests of the datagram library (one UDP question, bounded retries).",
  categories = { "safe" },
  ports = { 1 },
  run = function(ctx)
    local n = 0
    local function check(cond, what)
      n += 1
      if not cond then
        error("check " .. n .. " failed: " .. tostring(what), 2)
      end
    end
    local function eq(got, want, what)
      check(got == want, (what or "") .. ": got " .. tostring(got) .. ", want " .. tostring(want))
    end

    local sock = fake_udp({ "ok 1" })
    local a, err = datagram.exchange(sock, "Q", accept)
    eq(a, "ok 1", "first answer")
    eq(sock.sent[1], "Q", "sent the request")
    eq(#sock.sent, 1, "one send")

    sock = fake_udp({ "bad", "junk", "ok 2" })
    a, err = datagram.exchange(sock, "Q", accept)
    eq(a, "ok 2", "refused answers skipped")
    eq(#sock.sent, 1, "no resend while answers come")

    sock = fake_udp({ false, "ok 3" })
    a, err = datagram.exchange(sock, "Q", accept)
    eq(a, "ok 3", "answer after a resend")
    eq(#sock.sent, 2, "resent after a timeout")

    sock = fake_udp({})
    a, err = datagram.exchange(sock, "Q", accept, { tries = 3 })
    check(a == nil and err == "timeout", "silence: " .. tostring(err))
    eq(#sock.sent, 3, "three tries")

    sock = fake_udp({ "bad" })
    a, err = datagram.exchange(sock, "Q", accept, { tries = 1 })
    check(a == nil and err == "timeout", "refused then silence: last reason " .. tostring(err))

    sock = fake_udp({ { "port unreachable" } })
    a, err = datagram.exchange(sock, "Q", accept)
    check(a == nil and err == "port unreachable", "unreachable: " .. tostring(err))
    eq(#sock.sent, 1, "no resend after unreachable")

    local flood = {}
    for i = 1, 100 do
      flood[i] = "junk " .. i
    end
    sock = fake_udp(flood)
    a, err = datagram.exchange(sock, "Q", accept, { tries = 2, max_replies = 5 })
    check(a == nil and err == "not ok: junk 10", "flood: " .. tostring(err))
    eq(#sock.sent, 2, "flood: two sends")
    eq(sock.reads, 10, "flood: five reads a send")

    sock = fake_udp({ "ok" }, true)
    a, err = datagram.exchange(sock, "Q", accept)
    check(a == nil and err == "send: network unreachable", "send fails: " .. tostring(err))

    -- An accept function that errors is the caller's bug: it is not hidden.
    sock = fake_udp({ "x" })
    local ok = pcall(datagram.exchange, sock, "Q", function()
      error("boom")
    end)
    check(not ok, "an accept error propagates")

    return "ok " .. n
  end,
}
