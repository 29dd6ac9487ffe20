-- One 64 KiB string referenced ten thousand times in a finding's data: the
-- host copies every reference out of the VM, so each copy must be charged
-- to the run's output budget before it is made (it once became 655 MB of
-- JSON per finding and got the scanner OOM-killed).
return {
    id = "sandbox-finding-bomb",
    description = "Reports findings whose data repeats one large string.",
    categories = { "sandbox-test" },
    ports = { 80, 443 },
    run = function(ctx)
        local s = string.rep("A", 65536)
        local t = {}
        for i = 1, 9999 do
            t[i] = s
        end
        for i = 1, 20 do
            pcall(ctx.finding, ctx, { title = "bomb " .. i, data = t })
        end
        ctx:finding({ title = "escaped: the output budget did not trip" })
    end,
}
