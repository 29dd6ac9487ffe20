-- Sandbox test: returns a table whose metamethods loop or error
return {
  id = "sandbox-meta-return",
  description = "returns a table whose metamethods loop or error",
  categories = { "sandbox-test" },
  ports = { 80, 443 },
  run = function(ctx)
    return setmetatable({ ok = true }, {
      __index = function() while true do end end,
      __pairs = function() error("pairs called") end,
      __len = function() error("len called") end,
      __tostring = function() while true do end end,
    })
  end,
}
