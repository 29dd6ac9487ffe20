-- Sandbox test: connects to a hostname
return {
  id = "sandbox-connect-name",
  description = "connects to a hostname",
  categories = { "sandbox-test" },
  ports = { 80, 443 },
  run = function(ctx)
    local s, err = ctx:connect{ host = "localhost", port = ctx.port }
    if s then ctx:finding{ severity = "critical", title = "escaped: resolved a name" } end
  end,
}
