-- ssh-hostkey: the SSH server's host keys, as nmap's ssh-hostkey shows them.
--
-- The host fetches the keys (ctx.ssh:host_keys: one connection per kind of
-- key, each stopping once the server has shown its key in the key
-- exchange); this plugin only lays them out. nmap's `ssh_hostkey` argument
-- chooses the forms, several separated by spaces: `md5` (the default; `hex`
-- is the same), `sha256`, `bubble` (Bubble Babble of the SHA-1, as
-- `ssh-keygen -B`), `visual` (OpenSSH's random art of the MD5, the board
-- of `ssh-keygen -lv -E md5` in nmap's frame), `full` (the key itself;
-- also at -vv, or -v with the plugin named) and `all`. Like nmap 7.93,
-- the MD5 is printed as plain hex.

-- nmap's name for each kind of key.
local KIND = {
  ["ssh-rsa"] = "RSA",
  ["ssh-dss"] = "DSA",
  ["ecdsa-sha2-nistp256"] = "ECDSA",
  ["ecdsa-sha2-nistp384"] = "ECDSA",
  ["ecdsa-sha2-nistp521"] = "ECDSA",
  ["ssh-ed25519"] = "ED25519",
}

local FORM = { md5 = 1, hex = 1, sha256 = 2, bubble = 4, visual = 8, full = 16, all = 31 }

-- The bit set of the forms `arg` names (md5 when it names none it knows,
-- as an empty or misspelt argument: nmap prints nothing then).
local function forms(arg)
  local set = 0
  for word in (arg or "md5"):gmatch("%w+") do
    set = bit32.bor(set, FORM[word] or 0)
  end
  return set == 0 and FORM.md5 or set
end

local function bytes(hex)
  return (hex:gsub("%x%x", function(h)
    return string.char(tonumber(h, 16))
  end))
end

-- Bubble Babble (Antti Huima's encoding, as `ssh-keygen -B` prints it).
local function bubble(d)
  local vowel, consonant = "aeiouy", "bcdfghklmnprstvzx"
  local function v(i)
    return vowel:sub(i + 1, i + 1)
  end
  local function c(i)
    return consonant:sub(i + 1, i + 1)
  end
  local out, seed = { "x" }, 1
  local rounds = #d // 2 + 1
  for r = 0, rounds - 1 do
    local a = d:byte(2 * r + 1)
    if r + 1 < rounds or #d % 2 == 1 then
      out[#out + 1] = v((bit32.rshift(a, 6) + seed) % 6)
        .. c(bit32.band(bit32.rshift(a, 2), 15))
        .. v((bit32.band(a, 3) + seed // 6) % 6)
      if r + 1 < rounds then
        local b = d:byte(2 * r + 2)
        out[#out + 1] = c(bit32.rshift(b, 4)) .. "-" .. c(bit32.band(b, 15))
        seed = (seed * 5 + a * 7 + b) % 36
      end
    else
      out[#out + 1] = v(seed % 6) .. "x" .. v(seed // 6)
    end
  end
  return table.concat(out) .. "x"
end

-- OpenSSH's random art of a digest: a bishop walks a 17x9 board from its
-- middle, two bits a step (low bits first), each square showing how often
-- it was visited; S marks the start and E the end.
local function art(d, kind, bits)
  local W, H, marks = 17, 9, " .o+=*BOX@%&#/^"
  local seen, x, y = {}, 9, 5
  for i = 1, W * H do
    seen[i] = 0
  end
  for i = 1, #d do
    local b = d:byte(i)
    for _ = 1, 4 do
      x = math.clamp(x + (bit32.band(b, 1) == 1 and 1 or -1), 1, W)
      y = math.clamp(y + (bit32.band(b, 2) == 2 and 1 or -1), 1, H)
      local at = (y - 1) * W + x
      seen[at] = math.min(seen[at] + 1, #marks - 1)
      b = bit32.rshift(b, 2)
    end
  end
  local rows = { ("\n+--[%4s %4d]----+"):format(kind, bits) }
  for row = 1, H do
    local line = {}
    for col = 1, W do
      local n = seen[(row - 1) * W + col]
      local mark = marks:sub(n + 1, n + 1)
      if col == 9 and row == 5 then
        mark = "S"
      end
      if col == x and row == y then
        mark = "E"
      end
      line[col] = mark
    end
    rows[#rows + 1] = "|" .. table.concat(line) .. "|"
  end
  return table.concat(rows, "\n") .. "\n+-----------------+\n"
end

return {
  id = "ssh-hostkey",
  description = "Shows the SSH server's host keys as nmap's ssh-hostkey does: type, size, MD5 fingerprint and the key.",
  categories = { "default", "discovery", "safe" },
  ports = { 22 },
  services = { "ssh" },
  args = { "ssh_hostkey" },
  run = function(ctx)
    if #ctx.banner > 0 and not ctx.banner:find("SSH-", 1, true) then
      return nil, "the service did not send an SSH version string"
    end
    local keys, err = ctx.ssh:host_keys()
    if not keys then
      return nil, err
    end
    local want = forms(ctx.args.ssh_hostkey)
    local function has(form)
      return bit32.band(want, FORM[form]) ~= 0
    end
    -- nmap's table (one entry per key) and text (per key, its forms).
    local list, text = {}, {}
    for _, k in ipairs(keys) do
      local entry = { type = k.type, bits = tostring(k.bits), fingerprint = hash.md5(k.blob), key = hash.base64(k.blob) }
      list[#list + 1] = entry
      local kind, lines = KIND[k.type] or k.type, {}
      local function line(s)
        lines[#lines + 1] = ("%s %s (%s)"):format(entry.bits, s, kind)
      end
      if has("md5") then
        line(entry.fingerprint)
      end
      if has("sha256") then
        line("SHA256:" .. hash.base64(bytes(hash.sha256(k.blob))):gsub("=+$", ""))
      end
      if has("bubble") then
        line(bubble(bytes(hash.sha1(k.blob))))
      end
      if has("visual") then
        lines[#lines + 1] = art(bytes(entry.fingerprint), kind, k.bits)
      end
      if has("full") or ctx.verbosity > 1 then
        lines[#lines + 1] = k.type .. " " .. entry.key
      end
      text[#text + 1] = "\n  " .. table.concat(lines, "\n")
    end
    return list, table.concat(text)
  end,
}
