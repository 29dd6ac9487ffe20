-- smb_test: unit tests of lib/smb.lua on fixed bytes, run offline with
-- `moonscan plugins test libtests/smb_test.lua --plugin-dir plugins`.
--
-- The replies below were captured from the lab's Samba 4 (198.18.0.5:445,
-- SMBv1 off, SMB2 02 to 3.1.1 on) by capture/capture_smb.py, which sends
-- the requests smb.lua builds. The SMBv1 reply that accepts NT LM 0.12 is
-- built here from MS-CIFS 2.2.4.52.2 (the lab has no SMBv1 server).

local smb = require "smb"

-- Captured replies, each with its 4-byte length (Lua decimal escapes).
local CAP_smb1 = "\000\000\000%\255SMBr\000\000\000\000\136\007@\000\000\000\000\000\000\000\000\000\000\000\000\000\000\255\254\000\000\001\000\001\255\255\000\000"
local CAP_all = "\000\000\000\254\254SMB@\000\000\000\000\000\000\000\000\000\001\000\001\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000A\000\001\000\017\003\001\000mslab\000\000\000\000\000\000\000\000\000\000\000\007\000\000\000\000\000\128\000\000\000\128\000\000\000\128\000b\208\220\184\144|\221\001\000\000\000\000\000\000\000\000\128\000J\000\208\000\000\000`H\006\006+\006\001\005\005\002\160>0<\160\0140\012\006\010+\006\001\004\001\1307\002\002\010\163*0(\160&\027$not_defined_in_RFC4178@please_ignore\000\000\000\000\000\000\001\000&\000\000\000\000\000\001\000 \000\001\000\152\226j2\2285\242\253`\251\217\171\026\163\030\149\002\005m\161\166J\1365\249\015\012-\239\210X\028"
local CAP_d202 = "\000\000\000\202\254SMB@\000\000\000\000\000\000\000\000\000\001\000\001\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000A\000\001\000\002\002\000\000mslab\000\000\000\000\000\000\000\000\000\000\000\001\000\000\000\000\000\001\000\000\000\001\000\000\000\001\000\252\002\222\184\144|\221\001\000\000\000\000\000\000\000\000\128\000J\000\000\000\000\000`H\006\006+\006\001\005\005\002\160>0<\160\0140\012\006\010+\006\001\004\001\1307\002\002\010\163*0(\160&\027$not_defined_in_RFC4178@please_ignore"
local CAP_d210 = "\000\000\000\202\254SMB@\000\000\000\000\000\000\000\000\000\001\000\001\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000A\000\001\000\016\002\000\000mslab\000\000\000\000\000\000\000\000\000\000\000\007\000\000\000\000\000\128\000\000\000\128\000\000\000\128\000\184\145\222\184\144|\221\001\000\000\000\000\000\000\000\000\128\000J\000\000\000\000\000`H\006\006+\006\001\005\005\002\160>0<\160\0140\012\006\010+\006\001\004\001\1307\002\002\010\163*0(\160&\027$not_defined_in_RFC4178@please_ignore"
local CAP_d300 = "\000\000\000\202\254SMB@\000\000\000\000\000\000\000\000\000\001\000\001\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000A\000\001\000\000\003\000\000mslab\000\000\000\000\000\000\000\000\000\000\000\007\000\000\000\000\000\128\000\000\000\128\000\000\000\128\000\240z\224\184\144|\221\001\000\000\000\000\000\000\000\000\128\000J\000\000\000\000\000`H\006\006+\006\001\005\005\002\160>0<\160\0140\012\006\010+\006\001\004\001\1307\002\002\010\163*0(\160&\027$not_defined_in_RFC4178@please_ignore"
local CAP_d302 = "\000\000\000\202\254SMB@\000\000\000\000\000\000\000\000\000\001\000\001\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000A\000\001\000\002\003\000\000mslab\000\000\000\000\000\000\000\000\000\000\000\007\000\000\000\000\000\128\000\000\000\128\000\000\000\128\000\170)\225\184\144|\221\001\000\000\000\000\000\000\000\000\128\000J\000\000\000\000\000`H\006\006+\006\001\005\005\002\160>0<\160\0140\012\006\010+\006\001\004\001\1307\002\002\010\163*0(\160&\027$not_defined_in_RFC4178@please_ignore"
local CAP_d311 = "\000\000\000\254\254SMB@\000\000\000\000\000\000\000\000\000\001\000\001\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000A\000\001\000\017\003\001\000mslab\000\000\000\000\000\000\000\000\000\000\000\007\000\000\000\000\000\128\000\000\000\128\000\000\000\128\000\236O\226\184\144|\221\001\000\000\000\000\000\000\000\000\128\000J\000\208\000\000\000`H\006\006+\006\001\005\005\002\160>0<\160\0140\012\006\010+\006\001\004\001\1307\002\002\010\163*0(\160&\027$not_defined_in_RFC4178@please_ignore\000\000\000\000\000\000\001\000&\000\000\000\000\000\001\000 \000\001\000\149J\000\139\140\151^\204\190\232{\136c/A7\127\186\238\146\026\0045\030\154\205II\196\250\026P"
local CAP_bad = "\000\000\000I\254SMB@\000\000\000\187\000\000\192\000\000\001\000\001\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\009\000\000\000\000\000\000\000\000"

local passed = 0
local function check(cond, what)
  assert(cond, what)
  passed += 1
end

-- A fake socket replaying `data`; it records what is sent to it.
local function fake_socket(data, sent)
  local pos = 1
  return {
    send = function(_, s)
      sent[#sent + 1] = s
      return true
    end,
    recv_exact = function(_, n)
      if pos + n - 1 > #data then
        local had = #data - pos + 1
        pos = #data + 1
        return nil, ("closed after %d of %d bytes"):format(had, n)
      end
      local s = string.sub(data, pos, pos + n - 1)
      pos += n
      return s
    end,
    close = function() end,
  }
end

-- A fake ctx whose connections answer with `replies`, one per connection.
local function fake_ctx(replies)
  local ctx = { sent = {}, conns = 0 }
  function ctx:connect()
    self.conns += 1
    local r = replies[self.conns]
    if r == nil then
      return nil, "refused"
    end
    return fake_socket(r, self.sent)
  end
  return ctx
end

local function payload(framed)
  return string.sub(framed, 5)
end

-- An SMBv1 NEGOTIATE reply choosing dialect 0, extended security, 17 words.
local GUID = "0123456789abcdef"
local function smb1_reply(status, index, flags2, data)
  local words = string.pack("<I2BI2I2I4I4I4I4I4I4i2B", index, 0x03, 50, 1, 16644, 65536, 0, 0x8001f3fd,
    0x0ac91000, 0x01dc8798, 0, 0) -- time: 2026-01-17T10:00:00 as a FILETIME
  local p = "\255SMB" .. string.pack("<BI4BI2", 0x72, status, 0x88, flags2) .. string.rep("\0", 20)
    .. string.char(#words // 2) .. words .. string.pack("<I2", #data) .. data
  return string.pack(">I4", #p) .. p
end
local SMB1_YES = smb1_reply(0, 0, 0xC853, GUID .. "blob")

return {
  id = "smb-test",
  description = "Unit tests of lib/smb.lua (SMB NEGOTIATE) on fixed bytes.",
  categories = { "safe" },
  ports = { 445 },
  run = function(_ctx)
    -- Times.
    check(smb.filetime_seconds(0xd53e8000, 0x019db1de) == 0, "FILETIME of 1970")
    check(smb.format_time(0) == "1970-01-01T00:00:00", "epoch")
    check(smb.format_time(951782400) == "2000-02-29T00:00:00", "leap day")
    check(smb.format_time(-1) == "1969-12-31T23:59:59", "before 1970")
    check(smb.format_time(4102444799) == "2099-12-31T23:59:59", "2099")
    check(smb.format_time(smb.filetime_seconds(0xffffffff, 0xffffffff)) == "60056-05-28T05:36:10", "largest FILETIME")

    -- Requests.
    local r202 = smb.negotiate2_request({ 0x0202 })
    check(#r202 == 4 + 64 + 36 + 2, "2.0.2 request size")
    check(string.unpack(">I4", r202) == #r202 - 4, "length prefix")
    check(string.sub(r202, 5, 8) == "\254SMB" and string.unpack("<I2", r202, 4 + 67) == 1, "one dialect")
    check(string.unpack("<I2", r202, 4 + 101) == 0x0202, "dialect 0x0202")
    local rall = smb.negotiate2_request(smb.DIALECTS)
    local ctx_off, ctx_count = string.unpack("<I4I2", rall, 4 + 93)
    check(ctx_off % 8 == 0 and ctx_count == 2, "3.1.1 contexts aligned")
    check(string.unpack("<I2", rall, 4 + ctx_off + 1) == 1, "preauth context first")
    local v1 = smb.negotiate1_request()
    check(string.sub(v1, 5, 9) == "\255SMBr" and string.find(v1, "\2NT LM 0.12\0", 1, true), "SMBv1 request")

    -- Captured SMB2 replies.
    local all = smb.parse_negotiate2(payload(CAP_all))
    check(all and all.status == 0 and all.dialect == 0x0311, "highest is 3.1.1")
    check(all.security_mode == 1, "signing enabled, not required")
    check(smb.format_time(all.system_time) == "2026-11-25T03:54:50", "Samba's clock")
    check(all.start_time == nil, "Samba gives no start time")
    check(all.server_guid == "mslab" .. string.rep("\0", 11), "server GUID")
    for name, want in pairs({ d202 = 0x0202, d210 = 0x0210, d300 = 0x0300, d302 = 0x0302, d311 = 0x0311 }) do
      local caps = { d202 = CAP_d202, d210 = CAP_d210, d300 = CAP_d300, d302 = CAP_d302, d311 = CAP_d311 }
      local r = smb.parse_negotiate2(payload(caps[name]))
      check(r and r.status == 0 and r.dialect == want, "dialect " .. name)
    end
    local bad = smb.parse_negotiate2(payload(CAP_bad))
    check(bad and bad.status == 0xC00000BB and bad.dialect == nil, "STATUS_NOT_SUPPORTED")

    -- Captured SMBv1 reply: Samba without SMBv1 chooses no dialect.
    local no1 = smb.parse_negotiate1(payload(CAP_smb1))
    check(no1 and no1.enabled == false and no1.dialect_index == 0xFFFF, "SMBv1 off")
    local yes1 = smb.parse_negotiate1(payload(SMB1_YES))
    check(yes1 and yes1.enabled and yes1.dialect_index == 0, "SMBv1 on")
    check(smb.format_time(yes1.system_time) == "2026-01-17T10:00:00", "SMBv1 time")
    local short_guid = smb.parse_negotiate1(payload(smb1_reply(0, 0, 0xC853, "short")))
    check(short_guid and not short_guid.enabled, "extended security without a GUID")
    local refused = smb.parse_negotiate1(payload(smb1_reply(0xC0000002, 0, 0xC853, GUID)))
    check(refused and not refused.enabled, "SMBv1 error status")
    check(smb.parse_negotiate1(payload(CAP_all)) == nil, "SMB2 reply to SMBv1")

    -- Every truncation of every reply: nil or a table, never an error.
    for _, framed in ipairs({ CAP_all, CAP_d202, CAP_bad, CAP_smb1, SMB1_YES }) do
      local p = payload(framed)
      for n = 0, #p - 1 do
        local cut = string.sub(p, 1, n)
        local a = smb.parse_negotiate2(cut)
        local b = smb.parse_negotiate1(cut)
        check(a == nil or a.dialect == nil or n >= 128, "cut SMB2 reply at " .. n)
        check(b == nil or not b.enabled, "cut SMBv1 reply at " .. n)
      end
    end
    -- Garbage.
    for _, g in ipairs({ "", "HTTP/1.1 400 Bad Request\r\n\r\n", string.rep("\255", 300), "\254SMB" .. string.rep("\0", 200),
      "\255SMBr" .. string.rep("\255", 200), 42 }) do
      local a = smb.parse_negotiate2(g)
      local b = smb.parse_negotiate1(g)
      check((a == nil or a.dialect == nil) and (b == nil or not b.enabled), "garbage")
    end
    -- A body claiming structure size 65 but otherwise zeros still parses.
    local zeros = "\254SMB" .. string.pack("<I2", 64) .. string.rep("\0", 58) .. string.pack("<I2", 65) .. string.rep("\0", 62)
    check(smb.parse_negotiate2(zeros).dialect == 0, "zero body")

    -- Framing.
    local function read(bytes, max)
      return smb.read_packet(fake_socket(bytes, {}), max)
    end
    check(read(CAP_d202) == payload(CAP_d202), "whole message")
    check(read("\0\0") == nil, "length cut short")
    check(read("\0\0\0\0") == nil, "empty message")
    check(read("\0\255\255\255" .. "x") == nil, "16 MiB message refused")
    check(read(CAP_d202, 100) == nil, "message over max")
    check(read(string.sub(CAP_d202, 1, 50)) == nil, "body cut short")
    check(read("\133\0\0\0") == nil, "keepalive alone")

    -- nmap's procedure on the captured replies (Samba: SMBv1 off, SMB2 all).
    local ctx = fake_ctx({ CAP_smb1, CAP_all, CAP_d202, CAP_d210, CAP_d300, CAP_d302 })
    local names, smb1 = smb.list_dialects(ctx)
    check(names and table.concat(names, ",") == "202,210,300,302,311" and smb1 == false, "Samba's dialects")
    check(ctx.conns == 6, "six connections")
    check(string.sub(ctx.sent[3], -2) == "\2\2" and string.sub(ctx.sent[6], -2) == "\2\3", "one dialect each")
    -- SMBv1 on, SMB2 answered with 2.1 as the highest.
    ctx = fake_ctx({ SMB1_YES, CAP_d210, CAP_bad })
    names, smb1 = smb.list_dialects(ctx)
    check(names and table.concat(names, ",") == "NT LM 0.12,210" and smb1 == true, "SMBv1 and 2.1")
    -- SMB2 refused altogether.
    names, smb1 = smb.list_dialects(fake_ctx({ SMB1_YES, CAP_bad }))
    check(names and #names == 1 and smb1, "SMBv1 only")
    -- Nothing listens.
    local none, err = smb.list_dialects(fake_ctx({}))
    check(none == nil and string.find(err, "connect", 1, true), "no connection")
    -- A server that closes after the SMBv1 request, then garbles SMB2.
    names = smb.list_dialects(fake_ctx({ "", "\0\0\0\5hello" }))
    check(names and #names == 0, "garbled everywhere")
    -- negotiate2 on garbage.
    check(smb.negotiate2(fake_ctx({ "\0\0\0\3abc" })) == nil, "negotiate2 on garbage")

    check(smb.dialect_name(0x0311) == "311" and smb.dialect_name(0x02FF) == nil, "names")
    return "ok " .. passed
  end,
}
