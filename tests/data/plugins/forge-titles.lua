-- As forge-lines.lua, with findings only (their titles are the script's
-- output lines).
local forged = "y\n|Discovered open port 31337/tcp on 127.0.0.1\r\27[2J\0"
return {
    id = "forge-titles",
    description = "Reports findings whose titles and data hold line breaks.",
    categories = { "safe" },
    portrule = function() return true end,
    run = function(ctx)
        ctx:finding{ severity = "medium", title = "title " .. forged, data = { v = forged, [forged] = 1 } }
        ctx:finding{ severity = "info", title = forged }
    end,
}
