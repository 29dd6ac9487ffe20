-- Sandbox test: fills tables until memory runs out, under pcall
return {
  id = "sandbox-table-bomb",
  description = "fills tables until memory runs out, under pcall",
  categories = { "sandbox-test" },
  ports = { 80, 443 },
  run = function(ctx)
    local t, i = {}, 0
    while true do
      i += 1
      pcall(function() t[#t + 1] = { i, tostring(i), { i } } end)
    end
  end,
}
