-- Sandbox test: raises an error
return {
  id = "sandbox-errors",
  description = "raises an error",
  categories = { "sandbox-test" },
  ports = { 80, 443 },
  run = function(ctx)
    error({ code = 42 })
  end,
}
