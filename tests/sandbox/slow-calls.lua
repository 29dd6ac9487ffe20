-- Host calls that each take a while (regex and hashing over the largest
-- inputs they accept), in a loop: the run must still end at its deadline,
-- and must not hold up discovery, detection or Ctrl-C meanwhile. Inputs
-- past the caps are refused; the refusals are swallowed and the loop goes on.
-- The last pattern makes a lazy DFA thrash: the regex crate alone takes
-- seconds on it (its PikeVM fallback); the host's search gives up at once.
return {
    id = "sandbox-slow-calls",
    description = "Loops over slow host calls.",
    categories = { "sandbox-test" },
    ports = { 80, 443 },
    run = function(ctx)
        local s = string.rep("ab", 512 * 1024)
        local big = s .. s .. s .. s
        while true do
            re.find(s, "(a|b)*[c-z]")
            hash.sha256(s)
            pcall(re.find, big, "x")
            pcall(hash.md5, big .. big)
            pcall(re.find, s, "[ab]*b[ab]{2000}[cd]")
        end
    end,
}
