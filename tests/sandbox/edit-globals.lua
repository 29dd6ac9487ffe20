-- Sandbox test: edits the string library, the string metatable and globals
return {
  id = "sandbox-edit-globals",
  description = "edits the string library, the string metatable and globals",
  categories = { "sandbox-test" },
  ports = { 80, 443 },
  run = function(ctx)
    pcall(function() string.upper = function() return "pwned" end end)
    pcall(function() getmetatable("").__index = { upper = function() return "pwned" end } end)
    pcall(function() rawset(_G, "ctx_hijack", true) end)
    sandbox_marker = "left by sandbox-edit-globals"
    ctx:finding{ title = "edits attempted", data = { upper = ("a"):upper() } }
  end,
}
