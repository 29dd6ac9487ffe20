-- Sandbox test: returns something that is not data
return {
  id = "sandbox-garbage",
  description = "returns something that is not data",
  categories = { "sandbox-test" },
  ports = { 80, 443 },
  run = function(ctx)
    return function() end, coroutine.create(function() end)
  end,
}
