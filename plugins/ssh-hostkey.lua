-- ssh-hostkey: the SSH server's host keys, as nmap's ssh-hostkey shows them.
--
-- The host fetches the keys (ctx.ssh:host_keys: one connection per kind of
-- key, each stopping once the server has shown its key in the key
-- exchange); this plugin only lays them out: type, size, the MD5 of the key
-- blob in plain hex (nmap prints it with colons) and the blob in base64.

-- nmap's name for each kind of key.
local KIND = {
  ["ssh-rsa"] = "RSA",
  ["ssh-dss"] = "DSA",
  ["ecdsa-sha2-nistp256"] = "ECDSA",
  ["ecdsa-sha2-nistp384"] = "ECDSA",
  ["ecdsa-sha2-nistp521"] = "ECDSA",
  ["ssh-ed25519"] = "ED25519",
}

return {
  id = "ssh-hostkey",
  description = "Shows the SSH server's host keys as nmap's ssh-hostkey does: type, size, MD5 fingerprint and the key.",
  categories = { "default", "discovery", "safe" },
  ports = { 22 },
  services = { "ssh" },
  run = function(ctx)
    if #ctx.banner > 0 and not ctx.banner:find("SSH-", 1, true) then
      return nil, "the service did not send an SSH version string"
    end
    local keys, err = ctx.ssh:host_keys()
    if not keys then
      return nil, err
    end
    -- nmap's table (one entry per key) and text ("bits md5 (KIND)" lines).
    local list, lines = {}, {}
    for _, k in ipairs(keys) do
      local entry = { type = k.type, bits = tostring(k.bits), fingerprint = hash.md5(k.blob), key = hash.base64(k.blob) }
      list[#list + 1] = entry
      lines[#lines + 1] = ("\n  %s %s (%s)"):format(entry.bits, entry.fingerprint, KIND[k.type] or k.type)
    end
    return list, table.concat(lines)
  end,
}
