# shellcheck shell=bash
# The web content of the lab: the files the http-robots.txt, http-favicon and
# http-git plugins find (nginx 80/443 on every mstarget address, apache2 8080
# and lighttpd 8081 on 198.18.0.5 all serve $STATE/www). Sourced by
# scripts/lab.sh; make_www runs in make_state after index.html is written.

make_www() {
    local W="$STATE/www"
    # http-robots.txt: 16 distinct disallowed entries (so nmap shows "(15 shown)"),
    # a comment, a repeat, a repeat without its first character, an empty value,
    # a lower-case "disallow:", and an Allow line that is not counted.
    cat >"$W/robots.txt" <<'ROBOTS'
# moonscan lab robots.txt
User-agent: *
Disallow: /admin/
Disallow: /private/   # staff only
Disallow: /cgi-bin/
disallow: /tmp/
Disallow:
Disallow: /admin/
Disallow: admin/
Disallow: /backup/old-site/
Disallow: /search?q=*
Disallow: /a
Disallow: /b
Disallow: /checkout/
Disallow: /cart/
Disallow: /account/settings/
Disallow: /wp-admin/
Disallow: /api/v1/internal/
Disallow: /downloads/*.zip$
Disallow: /print/
Disallow: /very/long/path/that/does/not/fit/on/one/line/at/all/
Allow: /public/
ROBOTS
    # http-favicon: a 1x1 icon nmap's favicon-db does not know (MD5 6E5F7064AE24497CD1FECEE0A9316303),
    # and a page under /site/ whose <link rel="icon"> names another 1x1 icon
    # (MD5 17AADA8D804631C2CB4A9B0D075A8986; with --script-args favicon.root=/site,
    # nmap fetches it as /lab-icon.png, and only on port 80).
    echo 'AAABAAEAAQEAAAEAIAAwAAAAFgAAACgAAAABAAAAAgAAAAEAIAAAAAAACAAAAAAAAAAAAAAAAAAAAAAAAABvb03/AAAAAA==' |
        base64 -d >"$W/favicon.ico"
    echo 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mPwzc//DwAEYwIrH+ZwswAAAABJRU5ErkJggg==' |
        base64 -d >"$W/lab-icon.png"
    mkdir -p "$W/site"
    echo '<!doctype html><html><head><title>lab site</title><link rel="icon" type="image/png" href="lab-icon.png"></head><body>site</body></html>' \
        >"$W/site/index.html"
    # http-git with --script-args http-git.root=/damaged/ : a partial repository
    # (HEAD by SHA-1, an empty description, a config with two remotes and
    # secrets): "Potential Git repository found (found 3/6 expected files)".
    mkdir -p "$W/damaged/.git"
    echo 0123456789abcdef0123456789abcdef01234567 >"$W/damaged/.git/HEAD"
    : >"$W/damaged/.git/description"
    printf '[core]\n\tbare = false\n[remote "origin"]\n\turl = git@git.lab.moonscan.test:lab/damaged.git\n[remote "backup"]\n\turl = https://backup:passw0rd@backup.lab.moonscan.test/damaged.git\n[credential]\n\thelper = store --file /srv/key\n' \
        >"$W/damaged/.git/config"
    # http-git with --script-args http-git.root=/long/ : a commit message longer
    # than 60 bytes with a tab and line breaks, and a .gitignore that says
    # JBoss (then Java): the text shows the first type only.
    mkdir -p "$W/long/.git"
    echo 'ref: refs/heads/main' >"$W/long/.git/HEAD"
    printf 'Fix the\tbuild: a message that goes on and on past sixty bytes\n\nwith a body\n' >"$W/long/.git/COMMIT_EDITMSG"
    printf 'target/\n*.class\njboss/server/default/tmp/\n' >"$W/long/.gitignore"
    printf '[core]\n\tbare = false\n' >"$W/long/.git/config"
    # http-git: the document root is a Git repository (.git/ served as files):
    # a remote whose URL holds "user", a .gitignore that says "Python
    # application", one commit (made once).
    cat >"$W/.gitignore" <<'IGNORE'
*.pyc
__pycache__/
IGNORE
    if [ ! -d "$W/.git" ]; then
        git -C "$W" init -q
        git -C "$W" remote add origin https://deploy-user@git.lab.moonscan.test/lab/site.git
    fi
    if ! git -C "$W" rev-parse -q --verify HEAD >/dev/null; then
        git -C "$W" add index.html robots.txt favicon.ico lab-icon.png site/index.html .gitignore
        git -C "$W" -c user.name='moonscan lab' -c user.email=lab@lab.moonscan.test \
            commit -q -m 'Lab site: robots.txt, favicon and a page'
    fi
    chmod -R a+rX "$W"
}
