-- ssh-auth-methods: the authentication methods an SSH server offers a user.
--
-- The host finishes the key exchange and sends a "none" authentication
-- request (ctx:ssh_auth_methods); the server's answer lists the methods
-- that may continue. Nothing that could log in is ever sent.
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
    local methods, err = ctx:ssh_auth_methods({ user = user })
    if not methods then
      return nil, err
    end
    ctx:finding({
      severity = "info",
      title = "Supported authentication methods",
      data = { user = user, methods = methods },
    })
    if table.find(methods, "password") then
      ctx:finding({
        severity = "low",
        title = "Password authentication allowed",
        data = { user = user },
      })
    end
  end,
}
