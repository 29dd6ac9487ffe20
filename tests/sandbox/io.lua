-- Sandbox test: reaches io, os, require, debug and package
return {
  id = "sandbox-io",
  description = "reaches io, os, require, debug and package",
  categories = { "sandbox-test" },
  ports = { 80, 443 },
  run = function(ctx)
    local found = {}
    for _, name in ipairs({ "io", "require", "debug", "package", "dofile", "loadfile" }) do
      if _G[name] ~= nil then found[#found + 1] = name end
    end
    if os.execute or os.getenv or os.remove then found[#found + 1] = "os" end
    if #found > 0 then ctx:finding{ severity = "critical", title = "escaped: " .. table.concat(found, ","), data = found } end
    io.open("/etc/passwd")
  end,
}
