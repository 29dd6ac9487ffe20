-- Sandbox test: asks string.rep for 1e10 and 1e9 bytes
return {
  id = "sandbox-rep-bomb",
  description = "asks string.rep for 1e10 and 1e9 bytes",
  categories = { "sandbox-test" },
  ports = { 80, 443 },
  run = function(ctx)
    local small = string.rep("x", 1e10)
    local big = string.rep("x", 1e9)
    ctx:finding{ severity = "critical", title = "escaped: got " .. #big .. " bytes" }
  end,
}
