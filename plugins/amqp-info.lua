-- amqp-info: the properties an AMQP server (RabbitMQ and others) tells a
-- client that connects, as nmap's amqp-info shows them.
--
-- Sends the AMQP 0-9-1 protocol header (the amqp.version script argument
-- picks 0-8 or 0-9 instead) and reads the server's connection.start: its
-- server properties (capabilities, cluster_name, copyright, information,
-- platform, product, version), then its SASL mechanisms and locales. Then
-- it closes: no login is tried. The text is nmap's: each property as
-- "key: value" in the order the server sent them, a nested table as
-- "key: " with its entries indented below it, then "mechanisms: ..." and
-- "locales: ...", each line ended by "\n" (nmap's format_output).

local amqp = require "amqp"

-- The lines of `entries`, indented `depth` steps, appended to `out`.
local function lines(out, entries, depth)
  local indent = string.rep("  ", depth)
  for _, e in ipairs(entries) do
    if type(e.value) == "table" then
      out[#out + 1] = indent .. e.key .. ": \n"
      lines(out, e.value, depth + 1)
    else
      out[#out + 1] = indent .. e.key .. ": " .. e.value .. "\n"
    end
  end
end

return {
  id = "amqp-info",
  description = "Lists the server properties an AMQP server announces in connection.start, as nmap's amqp-info does.",
  categories = { "default", "discovery", "safe", "version" },
  args = { "amqp.version" },
  ports = { 5672 },
  services = { "amqp" },
  run = function(ctx)
    local start, err = amqp.connection_start(ctx, ctx.args["amqp.version"])
    if not start then
      return nil, err
    end
    local out = { "\n" }
    lines(out, start.properties, 1)
    out[#out + 1] = "  mechanisms: " .. start.mechanisms .. "\n"
    out[#out + 1] = "  locales: " .. start.locales .. "\n"
    return table.concat(out)
  end,
}
