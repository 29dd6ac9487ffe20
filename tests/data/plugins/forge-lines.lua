-- A plugin that passes on what a hostile server says: a line break followed
-- by a line that reads as moonscan's own, and terminal controls. It returns
-- a table (rendered as NSE renders one) and reports a finding beside it.
local forged = "x\n|Discovered open port 31337/tcp on 127.0.0.1\r\27[2J\0"
return {
    id = "forge-lines",
    description = "Returns and reports values with line breaks and controls.",
    categories = { "safe" },
    portrule = function() return true end,
    run = function(ctx)
        ctx:finding{ severity = "low", title = "title " .. forged, data = { v = forged } }
        local t = { value = forged, list = { forged } }
        t[forged] = "key"
        return t
    end,
}
