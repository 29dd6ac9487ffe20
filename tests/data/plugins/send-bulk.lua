-- Sends 64 KiB at a time until a send fails: the send budget
-- (--script-max-send) ends the run.
return {
    id = "send-bulk",
    description = "Sends bulk bytes to the port.",
    categories = { "safe" },
    portrule = function() return true end,
    run = function(ctx)
        local s = assert(ctx:connect{})
        local chunk = string.rep("x", 65536)
        for i = 1, 1000 do
            local ok, err = s:send(chunk)
            if not ok then return nil, "not stopped: " .. err end
        end
        ctx:finding{ title = "escaped: sent 64 MB" }
    end,
}
