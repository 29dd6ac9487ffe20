-- Sandbox test: loops forever
return {
  id = "sandbox-loop",
  description = "loops forever",
  categories = { "sandbox-test" },
  ports = { 80, 443 },
  run = function(ctx)
    while true do end
  end,
}
