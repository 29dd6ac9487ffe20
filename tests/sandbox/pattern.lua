-- Sandbox test: runs a pathological string pattern
return {
  id = "sandbox-pattern",
  description = "runs a pathological string pattern",
  categories = { "sandbox-test" },
  ports = { 80, 443 },
  run = function(ctx)
    local s = string.rep("a", 20000)
    while true do pcall(string.find, s, string.rep("a-", 40) .. "b") end
  end,
}
