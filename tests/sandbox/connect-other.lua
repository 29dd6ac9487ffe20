-- Sandbox test: connects to another lab address
return {
  id = "sandbox-connect-other",
  description = "connects to another lab address",
  categories = { "sandbox-test" },
  ports = { 80, 443 },
  run = function(ctx)
    local s, err = ctx:connect{ host = "198.18.0.3", port = 22 }
    if s then ctx:finding{ severity = "critical", title = "escaped: connected to 198.18.0.3" } end
  end,
}
