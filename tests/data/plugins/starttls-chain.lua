-- Test plugin: upgrades a plugin socket with sock:starttls() (the service's
-- own protocol, or the one named in script-arg starttls-chain.proto) and
-- reports the chain it reads, or the error.
return {
  id = "starttls-chain",
  description = "reports the leaf certificate behind STARTTLS",
  categories = { "test" },
  args = { "starttls-chain.proto" },
  ports = { 21, 25, 110, 143, 389, 5432, 80 },
  run = function(ctx)
    local sock, err = ctx:connect{}
    if not sock then
      ctx:finding{ title = "connect failed", data = { error = err } }
      return
    end
    local ok, why = sock:starttls(ctx.args["starttls-chain.proto"])
    if not ok then
      ctx:finding{ title = "starttls failed", data = { error = why } }
      return
    end
    local tls = sock:tls()
    ctx:finding{
      title = "starttls",
      data = { starttls = tls.starttls, version = tls.version, subject = tls.chain[1].subject },
    }
  end,
}
