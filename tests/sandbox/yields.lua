-- Sandbox test: yields garbage from its run
return {
  id = "sandbox-yields",
  description = "yields garbage from its run",
  categories = { "sandbox-test" },
  ports = { 80, 443 },
  run = function(ctx)
    coroutine.yield("garbage", 1, {})
    ctx:finding{ title = "resumed after a yield" }
  end,
}
