-- Sandbox test: loads bytecode or dumps a function
return {
  id = "sandbox-bytecode",
  description = "loads bytecode or dumps a function",
  categories = { "sandbox-test" },
  ports = { 80, 443 },
  run = function(ctx)
    local f = loadstring or load
    local chunk = f and f("\27Lua") or string.dump(function() end)
    ctx:finding{ severity = "critical", title = "escaped: bytecode", data = { chunk = tostring(chunk) } }
  end,
}
