-- Test plugin: ctx:tls_enum twice in one run, reporting what each returned.
return {
  id = "tls-enum-limits",
  description = "calls ctx:tls_enum twice and reports both results",
  categories = { "test" },
  ports = { 443 },
  run = function(ctx)
    for i = 1, 2 do
      local found, err = ctx:tls_enum{}
      local versions = 0
      if found then versions = #found.versions end
      ctx:finding{ title = "call " .. i, data = { ok = found ~= nil, err = err, versions = versions, hellos = found and found.hellos, capped = found and found.capped } }
    end
  end,
}
