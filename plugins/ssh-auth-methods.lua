-- ssh-auth-methods: the authentication methods an SSH server offers a user.
--
-- The host finishes the key exchange and sends a "none" authentication
-- request (ctx.ssh:auth_methods); the server's answer lists the methods
-- that may continue. Nothing that could log in is ever sent. The result is
-- nmap's ssh-auth-methods table ("Supported authentication methods": the
-- list); a server that offers passwords is a low finding.
return {
  id = "ssh-auth-methods",
  description = "Lists the authentication methods an SSH server offers a user (script arg ssh.user, default root).",
  categories = { "auth", "default", "safe" },
  args = { "ssh.user" },
  ports = { 22 },
  services = { "ssh" },
  run = function(ctx)
    local user = ctx.args["ssh.user"]
    if user == nil or user == "" then
      user = "root"
    end
    local methods, err = ctx.ssh:auth_methods({ user = user })
    if not methods then
      return nil, err
    end
    if table.find(methods, "password") then
      ctx:finding({
        severity = "low",
        title = "Password authentication allowed",
        data = { user = user },
      })
    end
    return { ["Supported authentication methods"] = methods }
  end,
}
