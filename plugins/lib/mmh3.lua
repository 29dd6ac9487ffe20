-- mmh3: MurmurHash3 (x86, 32-bit), and the favicon hash search engines
-- index icons by (Shodan's http.favicon.hash).
--
--   local mmh3 = require "mmh3"
--   mmh3.hash32("hello")        --> 613153351 (unsigned, seed 0)
--   mmh3.hash32("hello", 1)     --> seed 1
--   mmh3.favicon(body)          --> signed hash of the body's base64, as
--                                   Python's mmh3.hash(base64.encodebytes(body))
--
-- Numbers are doubles: every product is split so it stays exact (below
-- 2^53) and bit32 takes results modulo 2^32. Time is linear in the input.

local mmh3 = {}

local band, bor, bxor = bit32.band, bit32.bor, bit32.bxor
local lshift, rshift, lrotate = bit32.lshift, bit32.rshift, bit32.lrotate

local C1, C2 = 0xcc9e2d51, 0x1b873593

-- a * b modulo 2^32, for a and b below 2^32.
local function mul32(a, b)
  local lo = band(a, 0xffff) * b -- below 2^48
  local hi = band(rshift(a, 16) * band(b, 0xffff), 0xffff) -- the high half's bits that survive
  return band(lo + lshift(hi, 16), 0xffffffff)
end

local function mix(k)
  return mul32(lrotate(mul32(k, C1), 15), C2)
end

-- MurmurHash3_x86_32 of the string `s` (unsigned).
function mmh3.hash32(s, seed)
  local h = band(seed or 0, 0xffffffff)
  local n = #s
  local blocks = n - n % 4
  for i = 1, blocks, 4 do
    h = bxor(h, mix((string.unpack("<I4", s, i))))
    h = band(mul32(lrotate(h, 13), 5) + 0xe6546b64, 0xffffffff)
  end
  local tail = n % 4
  if tail > 0 then
    local k = 0
    for j = tail, 1, -1 do
      k = bor(lshift(k, 8), string.byte(s, blocks + j))
    end
    h = bxor(h, mix(k))
  end
  h = bxor(h, n)
  h = mul32(bxor(h, rshift(h, 16)), 0x85ebca6b)
  h = mul32(bxor(h, rshift(h, 13)), 0xc2b2ae35)
  return bxor(h, rshift(h, 16))
end

-- base64 with a line break after every 76 characters and at the end
-- (Python's base64.encodebytes, MIME's layout).
function mmh3.mime_base64(body)
  local b64 = hash.base64(body)
  local lines = {}
  for i = 1, #b64, 76 do
    lines[#lines + 1] = string.sub(b64, i, i + 75)
  end
  return #lines > 0 and table.concat(lines, "\n") .. "\n" or ""
end

-- The favicon hash: the signed 32-bit MurmurHash3 of the body's MIME base64.
function mmh3.favicon(body)
  local h = mmh3.hash32(mmh3.mime_base64(body))
  return h >= 0x80000000 and h - 0x100000000 or h
end

return mmh3
