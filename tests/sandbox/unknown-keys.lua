-- Keys the host does not know are refused by name, never ignored: an `ip`
-- in ctx:connect once connected to the scanned host instead.
return {
    id = "sandbox-unknown-keys",
    description = "Passes keys the host API does not have.",
    categories = { "sandbox-test" },
    ports = { 80, 443 },
    run = function(ctx)
        local ok, err = pcall(ctx.connect, ctx, { ip = "198.18.0.3", port = 80 })
        if ok then
            ctx:finding({ title = "escaped: connect took an unknown key" })
        end
        local ok2, err2 = pcall(ctx.finding, ctx, { title = "t", cve = "CVE-2024-0001" })
        if ok2 then
            ctx:finding({ title = "escaped: finding took an unknown key" })
        end
        ctx:finding({ title = "refused", data = { connect = tostring(err), finding = tostring(err2) } })
    end,
}
