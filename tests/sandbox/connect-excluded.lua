-- Sandbox test: connects to an address the scan excludes
return {
  id = "sandbox-connect-excluded",
  description = "connects to an address the scan excludes",
  categories = { "sandbox-test" },
  ports = { 80, 443 },
  run = function(ctx)
    local s, err = ctx:connect{ host = "198.18.0.4", port = ctx.port }
    if s then ctx:finding{ severity = "critical", title = "escaped: connected to an excluded address" } end
  end,
}
