-- Sandbox test: loops forever inside pcall, again and again
return {
  id = "sandbox-loop-pcall",
  description = "loops forever inside pcall, again and again",
  categories = { "sandbox-test" },
  ports = { 80, 443 },
  run = function(ctx)
    while true do pcall(function() while true do end end) end
  end,
}
