-- A portrule that never answers: the port must not stall, and an error
-- event must say why the plugin did not run.
return {
    id = "sandbox-slow-portrule",
    description = "Decides in a loop of slow host calls.",
    categories = { "sandbox-test" },
    portrule = function(port)
        local s = string.rep("ab", 512 * 1024)
        while true do
            hash.sha256(s)
        end
    end,
    run = function(ctx)
        ctx:finding({ title = "escaped: the portrule returned" })
    end,
}
