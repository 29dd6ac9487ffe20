-- Sandbox test: runs after sandbox-edit-globals and checks nothing leaked
return {
  id = "sandbox-zcheck-globals",
  description = "runs after sandbox-edit-globals and checks nothing leaked",
  categories = { "sandbox-test" },
  ports = { 80, 443 },
  run = function(ctx)
    ctx:finding{ title = "globals seen", data = { upper = ("a"):upper(), marker = sandbox_marker or "none", hijack = tostring(ctx_hijack) } }
  end,
}
