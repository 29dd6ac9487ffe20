-- Unit tests of lib/smtp.lua through a fake ctx and fake sockets: which
-- way (TLS or plain) is tried first, the fallback when the first way gives
-- nothing, no fallback after a non-SMTP answer, the greeting read, the EHLO
-- domain and QUIT. Prints "ok N" (N assertions).

local smtp = require "smtp"

-- A socket that serves `bytes` line by line and keeps what it is sent.
local function fake(bytes)
  local pos = 1
  return {
    sent = {},
    closed = false,
    send = function(self, d)
      self.sent[#self.sent + 1] = d
      return true
    end,
    recv_line = function(_, max)
      local nl = string.find(bytes, "\n", pos, true)
      if not nl then
        return nil, "timeout"
      end
      if nl - pos + 1 > max then
        return nil, "no line end"
      end
      local line = string.sub(bytes, pos, nl - 1)
      pos = nl + 1
      return (string.gsub(line, "\r$", ""))
    end,
    close = function(self)
      self.closed = true
    end,
  }
end

-- A ctx whose connects hand out `answers` in turn (a string: a socket
-- serving it; false: a failed connect), recording each connect's options.
local function fake_ctx(fields, answers)
  local ctx = { port = fields.port, service = fields.service, tunnel = fields.tunnel, args = fields.args or {}, opened = {} }
  function ctx:connect(opts)
    local a = table.remove(answers, 1)
    self.opened[#self.opened + 1] = opts
    if not a then
      return nil, "TLS handshake failed"
    end
    return fake(a)
  end
  return ctx
end

local GREETING = "220-lab.moonscan.test ESMTP Exim 4.96\r\n220 ready\r\n"

-- Runs every check; returns how many passed (an assert stops it at the first failure).
local function tests()
  local n = 0
  local function check(cond, what)
    n += 1
    assert(cond, what)
  end

  check(smtp.tls_first({ port = 465 }), "465 is TLS first")
  check(not smtp.tls_first({ port = 25, service = "smtp" }), "25 is plain first")
  check(not smtp.tls_first({ port = 587, service = "submission" }), "587 is plain first")
  check(smtp.tls_first({ port = 2525, tunnel = "ssl" }), "ssl tunnel is TLS first")
  check(smtp.tls_first({ port = 2525, service = "smtps" }), "smtps is TLS first")

  -- 465: TLS without ALPN, a two-line greeting.
  local ctx = fake_ctx({ port = 465, tunnel = "ssl" }, { GREETING })
  local sock, lines = smtp.connect(ctx)
  check(sock and #lines == 2 and lines[2] == "220 ready", "greeting read")
  check(type(ctx.opened[1].tls) == "table" and #ctx.opened[1].tls.alpn == 0, "TLS offered no ALPN")
  check(ctx.opened[1].timeout == 10000, "default timeout")

  -- 465 whose TLS fails: plain next.
  ctx = fake_ctx({ port = 465 }, { false, GREETING })
  sock = smtp.connect(ctx, { timeout = 3000 })
  check(sock and #ctx.opened == 2 and ctx.opened[2].tls == false, "plain after failed TLS")
  check(ctx.opened[2].timeout == 3000, "timeout passed on")

  -- 25 that says nothing in the clear: TLS next.
  ctx = fake_ctx({ port = 25, service = "smtp" }, { "", GREETING })
  sock = smtp.connect(ctx)
  check(sock and ctx.opened[1].tls == false and type(ctx.opened[2].tls) == "table", "TLS after a silent plain try")

  -- 587 answering something else: no second try.
  ctx = fake_ctx({ port = 587 }, { "SSH-2.0-OpenSSH_9.2\r\n", GREETING })
  local s, l, err = smtp.connect(ctx)
  check(s == nil and l == nil and string.find(err, "no greeting: SSH%-2.0") and #ctx.opened == 1, "no fallback after an answer")

  -- Both ways fail.
  ctx = fake_ctx({ port = 25 }, { "", false })
  s, l, err = smtp.connect(ctx)
  check(s == nil and string.find(err, "^plain: no greeting") and string.find(err, "TLS: connect"), "both fail")

  -- A greeting cut off, or with lines of differing codes.
  ctx = fake_ctx({ port = 25 }, { "220-first\r\n", false })
  s, l, err = smtp.connect(ctx)
  check(s == nil and string.find(err, "no greeting: 220%-first"), "greeting cut short")
  ctx = fake_ctx({ port = 25 }, { "220-first\r\n554 no\r\n" })
  s, l, err = smtp.connect(ctx)
  check(s == nil and string.find(err, "220%-first | 554 no"), "codes differ")
  ctx = fake_ctx({ port = 25 }, { string.rep("2", 5000) .. "\r\n" })
  s, l, err = smtp.connect(ctx)
  check(s == nil and type(err) == "string", "overlong line")
  ctx = fake_ctx({ port = 25 }, { string.rep("220-x\r\n", 500) })
  s, l, err = smtp.connect(ctx)
  check(s == nil and string.find(err, "no greeting"), "too many lines")

  -- EHLO domain.
  check(smtp.domain({ args = {} }, "smtp-commands") == "nmap.scanme.org", "default domain")
  check(smtp.domain({ args = { ["smtp.domain"] = "a.test" } }, "smtp-commands") == "a.test", "smtp.domain")
  check(smtp.domain({ args = { ["smtp.domain"] = "a.test", ["smtp-commands.domain"] = "b.test" } }, "smtp-commands") == "b.test", "script's own domain first")

  -- QUIT.
  local q = fake("221 bye\r\n")
  smtp.quit(q)
  check(q.sent[1] == "QUIT\r\n" and q.closed, "quit")
  q = fake("")
  smtp.quit(q)
  check(q.closed, "quit without an answer still closes")
  return n
end

return {
  id = "smtp-test",
  description = "Unit tests of lib/smtp.lua.",
  categories = { "safe" },
  ports = { 25 },
  run = function()
    return "ok " .. tests()
  end,
}
