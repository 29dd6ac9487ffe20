-- Unit tests of lib/mmh3.lua on fixed bytes (vectors from a Python
-- implementation checked against mmh3's published "hello" = 613153351).
local mmh3 = require "mmh3"

return {
  id = "mmh3-test",
  description = "Unit tests of the mmh3 library module.",
  categories = { "safe" },
  ports = { 1 },
  run = function(ctx)
    local n = 0
    local function check(cond, what)
      assert(cond, what)
      n += 1
    end
    local vectors = {
      { "", 0, 1364076727, 2180083513 },
      { "a", 1009084850, 1485495528, 711476519 },
      { "ab", 2613040991, 3087506246, 2944253413 },
      { "abc", 3017643002, 2859854335, 4236296879 },
      { "abcd", 1139631978, 2616542610, 729662808 },
      { "hello", 613153351, 3142237357, 595297739 },
      { "The quick brown fox jumps over the lazy dog", 776992547, 2028379687, 590642366 },
    }
    for _, v in ipairs(vectors) do
      check(mmh3.hash32(v[1]) == v[2], "hash32 " .. v[1] .. " = " .. mmh3.hash32(v[1]))
      check(mmh3.hash32(v[1], 1) == v[3], "hash32 seed 1 " .. v[1])
      check(mmh3.hash32(v[1], 0xffffffff) == v[4], "hash32 seed max " .. v[1])
    end
    local bytes = {}
    for i = 0, 255 do
      bytes[#bytes + 1] = string.char(i)
    end
    local all = table.concat(bytes)
    check(mmh3.hash32(all) == 3825864278, "hash32 of bytes 0-255")
    -- The favicon hash: base64 lines of 76 characters, signed result.
    check(mmh3.mime_base64("abc") == "YWJj\n", "mime base64 short")
    check(mmh3.mime_base64("") == "", "mime base64 empty")
    local b64 = mmh3.mime_base64(string.rep(all, 3))
    check(string.sub(b64, 77, 77) == "\n" and string.sub(b64, -1) == "\n", "mime base64 line breaks")
    check(mmh3.favicon("abc") == -868969266, "favicon hash negative")
    check(mmh3.favicon(string.rep(all, 3)) == 1836528006, "favicon hash of 768 bytes")
    check(mmh3.favicon("") == 0, "favicon hash of nothing")
    check(hash.md5(string.rep(all, 3)) == "e6899eaaf06fd702f3ed3f988eb19362", "md5 of the same bytes")
    return "ok " .. n
  end,
}
