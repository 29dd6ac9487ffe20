-- mysql-info: the facts a MySQL or MariaDB server gives away in its
-- greeting (the protocol 10 handshake packet), as nmap's mysql-info
-- reports them: protocol, version, thread id, capability and status
-- flags, authentication plugin and salt length.
--
-- The greeting is what the server sends first, so service detection has
-- usually kept it in ctx.banner; otherwise the plugin connects and reads
-- one packet (at most MAX_PACKET bytes). Nothing is ever sent.

local MAX_PACKET = 8192
local MAX_READS = 64
local TIMEOUT = 5000

-- Capability flags, bit by bit (MySQL's names).
local CAPABILITIES = {
  "LONG_PASSWORD", "FOUND_ROWS", "LONG_FLAG", "CONNECT_WITH_DB",
  "NO_SCHEMA", "COMPRESS", "ODBC", "LOCAL_FILES",
  "IGNORE_SPACE", "PROTOCOL_41", "INTERACTIVE", "SSL",
  "IGNORE_SIGPIPE", "TRANSACTIONS", "RESERVED", "SECURE_CONNECTION",
  "MULTI_STATEMENTS", "MULTI_RESULTS", "PS_MULTI_RESULTS", "PLUGIN_AUTH",
  "CONNECT_ATTRS", "PLUGIN_AUTH_LENENC_CLIENT_DATA", "CAN_HANDLE_EXPIRED_PASSWORDS", "SESSION_TRACK",
  "DEPRECATE_EOF", "OPTIONAL_RESULTSET_METADATA", "ZSTD_COMPRESSION_ALGORITHM", "QUERY_ATTRIBUTES",
  "MULTI_FACTOR_AUTHENTICATION", "CAPABILITY_EXTENSION", "SSL_VERIFY_SERVER_CERT", "REMEMBER_OPTIONS",
}
-- MariaDB's extended capabilities (in the reserved bytes when bit 0 is clear).
local MARIADB_CAPABILITIES = {
  "MARIADB_CLIENT_PROGRESS", "MARIADB_CLIENT_COM_MULTI", "MARIADB_CLIENT_STMT_BULK_OPERATIONS",
  "MARIADB_CLIENT_EXTENDED_METADATA", "MARIADB_CLIENT_CACHE_METADATA", "MARIADB_CLIENT_BULK_UNIT_RESULTS",
}
local STATUS = {
  "IN_TRANS", "AUTOCOMMIT", "RESERVED_0x0004", "MORE_RESULTS_EXISTS",
  "NO_GOOD_INDEX_USED", "NO_INDEX_USED", "CURSOR_EXISTS", "LAST_ROW_SENT",
  "DB_DROPPED", "NO_BACKSLASH_ESCAPES", "METADATA_CHANGED", "QUERY_WAS_SLOW",
  "PS_OUT_PARAMS", "IN_TRANS_READONLY", "SESSION_STATE_CHANGED",
}

local function flag_names(value, names)
  local out = {}
  for i, name in ipairs(names) do
    if bit32.btest(value, bit32.lshift(1, i - 1)) then
      out[#out + 1] = name
    end
  end
  return out
end

local function printable(s)
  return (string.gsub(s, "[^\32-\126]", function(c)
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

-- Decodes a greeting payload; errors (caught by pcall) on a cut-short one.
local function decode(p)
  local out = {}
  local proto = string.byte(p, 1)
  out.protocol = proto
  if proto == 0xff then
    local code = string.unpack("<I2", p, 2)
    local msg = string.sub(p, 4)
    if string.sub(msg, 1, 1) == "#" then
      msg = string.sub(msg, 7)
    end
    out.error_code = code
    out.error = printable(string.sub(msg, 1, 300))
    return out
  end
  if proto ~= 10 then
    error("protocol version " .. proto .. " (only 10 is decoded)")
  end
  local version, pos = string.unpack("z", p, 2)
  if #version > 255 then
    error("version string too long")
  end
  out.version = printable(version)
  out.thread_id, pos = string.unpack("<I4", p, pos)
  local salt1 = string.sub(p, pos, pos + 7)
  if #salt1 < 8 then
    error("greeting cut short in the salt")
  end
  pos += 9 -- 8 salt bytes and a filler byte
  local caps
  caps, pos = string.unpack("<I2", p, pos)
  local salt_len = 8
  if pos <= #p then
    local charset, status, caps_hi, auth_len
    charset, status, caps_hi, auth_len, pos = string.unpack("<BI2I2B", p, pos)
    caps = bit32.bor(caps, bit32.lshift(caps_hi, 16))
    out.charset = charset
    out.status = status
    out.status_flags = flag_names(status, STATUS)
    if not bit32.btest(caps, 1) and pos + 9 <= #p then
      -- MariaDB: 6 reserved bytes, then 4 bytes of extended capabilities.
      local ext = string.unpack("<I4", p, pos + 6)
      out.mariadb_capabilities = ext
      out.mariadb_capability_flags = flag_names(ext, MARIADB_CAPABILITIES)
    end
    pos += 10
    if bit32.btest(caps, 0x8000) then
      local n2 = math.max(13, auth_len - 8)
      local salt2 = string.sub(p, pos, pos + n2 - 1)
      pos += n2
      if #salt2 < n2 then
        salt_len = nil -- cut short: the length is unknown
      else
        -- The second part ends with a NUL that is not salt.
        salt2 = (string.gsub(salt2, "%z$", ""))
        salt_len = 8 + #salt2
      end
    end
    if bit32.btest(caps, 0x80000) and pos <= #p then
      local name = string.match(string.sub(p, pos), "^([^%z]*)")
      out.auth_plugin = printable(string.sub(name, 1, 64))
    end
  end
  out.capabilities = caps
  out.capability_flags = flag_names(caps, CAPABILITIES)
  out.salt_length = salt_len
  return out
end

local function read_exactly(sock, n)
  local parts, got = {}, 0
  for _ = 1, MAX_READS do
    if got >= n then
      break
    end
    local chunk, err = sock:recv(n - got)
    if not chunk then
      return table.concat(parts), err
    end
    parts[#parts + 1] = chunk
    got += #chunk
  end
  return table.concat(parts)
end

-- The greeting read from a connection of our own.
local function fetch(ctx)
  local sock, err = ctx:connect{ tls = ctx.tunnel == "ssl", timeout = TIMEOUT }
  if not sock then
    return nil, "connect: " .. tostring(err)
  end
  local head, herr = read_exactly(sock, 4)
  if #head < 4 then
    sock:close()
    return nil, "no greeting: " .. tostring(herr)
  end
  local len = string.unpack("<I3", head)
  if len == 0 or len > MAX_PACKET then
    sock:close()
    return nil, "packet length " .. len .. " is not a greeting's"
  end
  local body = read_exactly(sock, len)
  sock:close()
  return head .. body
end

return {
  id = "mysql-info",
  description = "Decodes a MySQL/MariaDB server greeting: version, thread id, capabilities, status, auth plugin.",
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
    info.source = source
    info.sequence = seq
    info.truncated = short or nil

    if info.error_code then
      ctx:finding{
        severity = "info",
        title = string.format("MySQL error %d: %s", info.error_code, info.error),
        data = info,
      }
      return
    end
    local product = "MySQL"
    local real = string.match(info.version, "^5%.5%.5%-(.*MariaDB.*)$")
    if real then
      product = "MariaDB"
      info.mariadb_version = real
    elseif string.find(info.version, "MariaDB", 1, true) then
      product = "MariaDB"
    end
    info.product = product
    ctx:finding{
      severity = "info",
      title = string.format("%s %s (protocol %d, thread %d)", product, real or info.version, info.protocol,
        info.thread_id),
      data = info,
    }
  end,
}
