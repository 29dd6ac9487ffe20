-- text_test: unit tests of lib/text.lua, run offline with
-- `moonscan plugins test tests/lua/text_test.lua --plugin-dir plugins`.

local text = require "text"

local passed = 0
local function check(cond, what)
  assert(cond, what)
  passed += 1
end

return {
  id = "text-test",
  description = "Unit tests of the text library.",
  categories = { "safe" },
  ports = { 80 },
  run = function()
    check(text.trim("  a b  ") == "a b", "trim both ends")
    check(text.trim("\r\n\tx\r\n") == "x", "trim line ends and tabs")
    check(text.trim("") == "" and text.trim("   ") == "", "nothing left")
    check(text.trim("x") == "x", "one byte")
    -- Linear on a long run of spaces (a quadratic pattern would trip the
    -- run's step budget here).
    local spaces = "a" .. string.rep(" ", 200000) .. "b"
    check(text.trim(spaces) == spaces, "inner spaces stay")
    check(text.trim(string.rep(" ", 200000) .. "z") == "z", "a long lead")
    check(text.clip("abc", 5) == "abc", "short enough")
    check(text.clip("abcdef", 3) == "abc...", "cut and marked")
    check(#text.clip(string.rep("x", 1000)) == 203, "default 200")
    check(text.printable("a\0b") == "a\\x00b", "NUL escaped")
    check(text.printable("\255\127ok\r\n\t") == "\\xFF\\x7Fok\r\n\t", "high bytes escaped, line ends kept")
    check(text.printable("") == "", "empty")
    -- NSE's text of an ordered table: scalars on their key's line, lists under it.
    check(text.pairs({ { "Version", "7.0" }, { "Ports", { "1", "2" } }, { "Empty", {} } })
      == "\n  Version: 7.0\n  Ports: \n    1\n    2\n  Empty: ", "ordered pairs")
    check(text.pairs({}) == "", "no pairs")
    check(text.pairs({ { "n", 3 } }) == "\n  n: 3", "a number")
    return "ok " .. passed
  end,
}
