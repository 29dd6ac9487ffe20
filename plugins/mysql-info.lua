-- mysql-info: the facts a MySQL or MariaDB server gives away in its
-- greeting (the protocol 10 handshake packet), as nmap's mysql-info shows
-- them: protocol, version, thread id, capability flags and names, status,
-- salt and authentication plugin.
--
-- The greeting is what the server sends first, so service detection has
-- usually kept it in ctx.banner; otherwise the plugin connects and reads
-- one packet (at most MAX_PACKET bytes). Nothing is ever sent. A greeting
-- that is an error (a host the server refuses) is an info finding; nmap
-- shows it ("MySQL Error") only at verbosity 2 and more, and so does the
-- result here.

local MAX_PACKET = 8192
local TIMEOUT = 5000

-- nmap's names of the capability flags (the lower 16 bits), bit by bit.
local CAPABILITIES = {
  "LongPassword", "FoundRows", "LongColumnFlag", "ConnectWithDatabase",
  "DontAllowDatabaseTableColumn", "SupportsCompression", "ODBCClient", "SupportsLoadDataLocal",
  "IgnoreSpaceBeforeParenthesis", "Speaks41ProtocolNew", "InteractiveClient", "SwitchToSSLAfterHandshake",
  "IgnoreSigpipes", "SupportsTransactions", "Speaks41ProtocolOld", "Support41Auth",
}
-- And of the upper 16 bits nmap knows ([sic]: "Statments").
local EXT_CAPABILITIES = {
  [1] = "SupportsMultipleStatments", [2] = "SupportsMultipleResults", [4] = "SupportsAuthPlugins",
}

-- The names of the bits set in `value` (names[i] is bit i - 1), in bit order.
local function flag_names(value, names, out)
  out = out or {}
  for i = 1, 16 do
    local name = names[i]
    if name and bit32.btest(value, bit32.lshift(1, i - 1)) then
      out[#out + 1] = name
    end
  end
  return out
end

-- Bytes as nmap prints and writes them: \xHH for all but printable ASCII,
-- tab, CR and LF.
local function printable(s)
  return (string.gsub(s, "[^\32-\126\t\r\n]", function(c)
    return string.format("\\x%02X", string.byte(c))
  end))
end

-- Splits one packet (3-byte length, sequence byte, payload) off `raw`.
local function payload_of(raw)
  if #raw < 5 then
    return nil, "shorter than a packet header"
  end
  local len, seq = string.unpack("<I3B", raw)
  if len == 0 or len > MAX_PACKET then
    return nil, "packet length " .. len .. " is not a greeting's"
  end
  local p = string.sub(raw, 5, 4 + len)
  return p, nil, seq, #p < len
end

-- Decodes a greeting payload as nmap's mysql library does; errors (caught
-- by pcall) on a cut-short one.
local function decode(p)
  local out = {}
  local proto = string.byte(p, 1)
  out.protocol = proto
  if proto == 0xff then
    local code = string.unpack("<I2", p, 2)
    out.error_code = code
    -- nmap's message: everything after the code, as sent.
    out.message = printable(string.sub(p, 4, 303))
    local msg = string.sub(p, 4)
    if string.sub(msg, 1, 1) == "#" then
      msg = string.sub(msg, 7)
    end
    out.error = printable(string.sub(msg, 1, 300))
    return out
  end
  if proto ~= 10 and proto ~= 9 then
    error("protocol version " .. proto .. " (only 9 and 10 are decoded)")
  end
  local version, pos = string.unpack("z", p, 2)
  if #version > 255 then
    error("version string too long")
  end
  out.version = printable(version)
  out.thread_id, pos = string.unpack("<I4", p, pos)
  if proto ~= 10 then
    return out
  end
  local salt
  salt, out.capabilities, pos = string.unpack("<c8xI2", p, pos)
  if pos < #p then
    local charset, status, ext, auth_len, _reserved
    charset, status, ext, auth_len, _reserved, pos = string.unpack("<BI2I2Bc10", p, pos)
    out.charset, out.status, out.ext_capabilities = charset, status, ext
    if bit32.btest(out.capabilities, 0x8000) then
      local more
      more, pos = string.unpack("c" .. (math.max(13, auth_len - 8) - 1) .. "x", p, pos)
      salt ..= more
    end
    if bit32.btest(ext, 0x8) then
      out.auth_plugin = printable(string.sub((string.unpack("z", p, pos)), 1, 64))
    end
  end
  out.salt = printable(salt)
  return out
end

-- nmap's mysql-info table and its text (Some Capabilities on one line).
local function nmap_result(info)
  local result = { Protocol = info.protocol, Version = info.version, ["Thread ID"] = info.thread_id }
  local lines = {
    "Protocol: " .. info.protocol,
    "Version: " .. info.version,
    "Thread ID: " .. info.thread_id,
  }
  if info.protocol == 10 then
    result["Capabilities flags"] = info.capabilities
    lines[#lines + 1] = "Capabilities flags: " .. info.capabilities
    local caps = flag_names(info.capabilities, CAPABILITIES)
    if info.ext_capabilities then
      flag_names(info.ext_capabilities, EXT_CAPABILITIES, caps)
    end
    if #caps > 0 then
      result["Some Capabilities"] = caps
      lines[#lines + 1] = "Some Capabilities: " .. table.concat(caps, ", ")
    end
    if info.status then
      local status = info.status == 2 and "Autocommit" or info.status
      result.Status = status
      lines[#lines + 1] = "Status: " .. status
    end
    result.Salt = info.salt
    lines[#lines + 1] = "Salt: " .. info.salt
    if info.auth_plugin then
      result["Auth Plugin Name"] = info.auth_plugin
      lines[#lines + 1] = "Auth Plugin Name: " .. info.auth_plugin
    end
  end
  return result, "\n  " .. table.concat(lines, "\n  ")
end

-- The greeting read from a connection of our own.
local function fetch(ctx)
  local sock, err = ctx:connect{ tls = ctx.tunnel == "ssl", timeout = TIMEOUT }
  if not sock then
    return nil, "connect: " .. tostring(err)
  end
  local head, herr = sock:recv_exact(4)
  if not head then
    sock:close()
    return nil, "no greeting: " .. tostring(herr)
  end
  local len = string.unpack("<I3", head)
  if len == 0 or len > MAX_PACKET then
    sock:close()
    return nil, "packet length " .. len .. " is not a greeting's"
  end
  -- A greeting cut short is decoded as far as it goes (what came is still there to read).
  local body = sock:recv_exact(len) or sock:recv(len) or ""
  sock:close()
  return head .. body
end

return {
  id = "mysql-info",
  description = "Decodes a MySQL/MariaDB server greeting as nmap's mysql-info does: protocol, version, thread id, capabilities, status, salt, auth plugin.",
  categories = { "default", "discovery", "safe" },
  ports = { 3306 },
  services = { "mysql" },
  run = function(ctx)
    local raw = ctx.banner or ""
    local source = "banner"
    local info, why, seq, short
    local p
    p, why, seq, short = payload_of(raw)
    if p then
      local ok, decoded = pcall(decode, p)
      if ok then
        info = decoded
      else
        why = tostring(decoded)
      end
    end
    if not info then
      -- No usable greeting kept by detection: read one ourselves.
      local fetched, err = fetch(ctx)
      if not fetched then
        return nil, (raw == "" and "" or ("banner is not a greeting (" .. why .. "); ")) .. err
      end
      source = "connection"
      p, why, seq, short = payload_of(fetched)
      if not p then
        return nil, "not a MySQL greeting: " .. why
      end
      local ok, decoded = pcall(decode, p)
      if not ok then
        return nil, "not a MySQL greeting: " .. tostring(decoded)
      end
      info = decoded
    end
    if info.error_code then
      if (ctx.verbosity or 0) > 1 then
        return { ["MySQL Error"] = info.message }, "\n  MySQL Error: " .. info.message
      end
      info.message = nil
      info.source = source
      info.sequence = seq
      info.truncated = short or nil
      ctx:finding{
        severity = "info",
        title = string.format("MySQL error %d: %s", info.error_code, info.error),
        data = info,
      }
      return
    end
    return nmap_result(info)
  end,
}
