-- Keys the host does not know are refused by name, never ignored: an `ip`
-- in ctx:connect once connected to the scanned host instead. A host name
-- too long to be an address is refused before it is copied out of the VM.
return {
    id = "sandbox-unknown-keys",
    description = "Passes keys the host API does not have, and an 8 MB host.",
    categories = { "sandbox-test" },
    ports = { 80, 443 },
    run = function(ctx)
        local function refused(f, ...)
            local ok, err = pcall(f, ...)
            if ok then
                ctx:finding({ title = "escaped: an unknown key was taken" })
            end
            return tostring(err)
        end
        local data = {
            connect = refused(ctx.connect, ctx, { ip = "198.18.0.3", port = 80 }),
            finding = refused(ctx.finding, ctx, { title = "t", cves = { "CVE-2024-0001" } }),
            tls = refused(ctx.connect, ctx, { tls = { verify = true } }),
            http = refused(ctx.http.get, ctx.http, "/", { follow = true }),
            ssh = refused(ctx.ssh_auth_methods, ctx, { password = "x" }),
            host_keys = refused(ctx.ssh.host_keys, ctx.ssh, { host = "198.18.0.3" }),
            udp = refused(ctx.udp, ctx, { tls = true }),
        }
        -- 16 of these would be 128 MB outside the VM if each were copied and quoted.
        local huge = string.rep("h", 8 * 1024 * 1024)
        for _ = 1, 16 do
            data.host = refused(ctx.connect, ctx, { host = huge, port = 80 })
        end
        ctx:finding({ title = "refused", data = data })
    end,
}
