-- As finding-bomb, through the value `run` returns.
return {
    id = "sandbox-return-bomb",
    description = "Returns data that repeats one large string.",
    categories = { "sandbox-test" },
    ports = { 80, 443 },
    run = function(ctx)
        local s = string.rep("B", 65536)
        local t = {}
        for i = 1, 9999 do
            t[i] = s
        end
        return t
    end,
}
