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
-- the MD5 is printed as plain hex. The Bubble Babble and random art are
-- lib/ssh2.lua's.

local ssh2 = require "ssh2"

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
        line(ssh2.bubble_babble(bytes(hash.sha1(k.blob))))
      end
      if has("visual") then
        lines[#lines + 1] = ssh2.random_art(bytes(entry.fingerprint), kind, k.bits)
      end
      if has("full") or ctx.verbosity > 1 then
        lines[#lines + 1] = k.type .. " " .. entry.key
      end
      text[#text + 1] = "\n  " .. table.concat(lines, "\n")
    end
    return list, table.concat(text)
  end,
}
