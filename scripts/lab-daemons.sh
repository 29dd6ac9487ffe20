# shellcheck shell=bash
# The lab's daemon zoo, sourced by scripts/lab.sh: real Debian daemons on
# 198.18.0.5 inside mstarget, for service detection as a real network shows
# it (tests/lab/daemons.rs compares moonscan -sV with nmap -sV on them).
#
# Each daemon runs from a configuration of its own under $ZOO_DIR, bound to
# 198.18.0.5 only, as nothing of its package's (no systemd, no init script,
# no /etc file changed). Most run in the foreground, detached with setsid, so
# the pid recorded is the daemon's own; "down" stops exactly those.
# Services made for inetd (fingerd, telnetd, CVS pserver, micro-httpd,
# inetutils' ftpd, and xinetd's own echo, daytime and chargen) each run from
# an xinetd of their own (zoo_xinetd).
# proftpd, pure-ftpd and inetutils-ftpd conflict with vsftpd as packages:
# they are unpacked (dpkg -x) under /var/cache/moonscan-lab and run from
# there. Packages whose postinst would start a daemon on the host are kept
# from it by lab.sh (policy-rc.d while installing, then
# stop_new_root_daemons for the units they enabled: ROOT_UNITS).
#
# Tried and left out, as nmap 7.93 -sV names them no better than "open":
# oidentd, ZNC 1.8 (no nmap rule knows its replies), NRPE, Privoxy
# 3.0.34, HAProxy 2.6, Monit and the Zabbix agent (both close a silent
# client, which nmap takes for tcpwrapped), PgBouncer 1.18; gunicorn 20
# (nmap calls it Nagios NSCA); leafnode (refuses a lab host name) and
# ircd-hybrid unpacked (its module path is compiled in), LPRng's lpd (it
# reads /etc/printcap whatever its configuration says), Bacula 9.6's file
# daemon.
#
# 198.18.0.5 also reaches mstarget's wildcard listeners (nginx 80/443, sshd
# 22, redis 6379), so the zoo's own ports avoid those.

ZOO=198.18.0.5
ZOO_DIR=$STATE/zoo
ZOO_CACHE=/var/cache/moonscan-lab

# name:comm:ports (comm: the process name its pid file must show).
ZOO_DAEMONS=(
    apache2:apache2:8080
    lighttpd:lighttpd:8081
    proftpd:proftpd:21
    pure-ftpd:pure-ftpd:2121
    dovecot:dovecot:110,143,993,995
    mariadb:mariadbd:3306
    slapd:slapd:389
    named:named:53
    smbd:smbd:139,445
    squid:squid:3128
    tinyproxy:tinyproxy:8888
    cupsd:cupsd:631
    mosquitto:mosquitto:1883,8883
    ngircd:ngircd:6667
    epmd:epmd:4369
    rabbitmq:rabbitmq-server:5672
    tor:tor:9001
    xrdp:xrdp:3389
    xvnc:Xvnc:5901
    openvpn:openvpn:1194
    svnserve:svnserve:3690
    git-daemon:git-daemon:9418
    munin-node:munin-node:4949
    dictd:dictd:2628
    mpd:mpd:6600
    gearmand:gearmand:4730
    beanstalkd:beanstalkd:11300
    distccd:distccd:3632
    danted:danted:1080
    spamd:spamd:783
    tomcat:java:8009,8180
    prosody:lua5.4:5222,5269
    rpcbind:rpcbind:111
    xinetd:xinetd:37
    fingerd:xinetd:79
    telnetd:xinetd:23
    cvs:xinetd:2401
    dropbear:dropbear:2222
    inspircd:inspircd:7000
    bitlbee:bitlbee:6668
    icecast2:icecast2:8000
    krb5kdc:krb5kdc:88
    kadmind:kadmind:464
    upsd:upsd:3493
    webfs:webfsd:8083
    mini-httpd:mini_httpd:8084
    caddy:caddy:8085
    unbound:unbound:5300
    nsd:nsd:5301
    knot:knotd:5302
    pdns:pdns_server:5303
    transmission:transmission-da:9091
    rsyncd:rsync:873
    supervisord:supervisord:9002
    micro-httpd:xinetd:8088
    twistd:twistd3:8087
    inetutils-ftpd:xinetd:2100
    apt-cacher-ng:apt-cacher-ng:3142
    kamailio:kamailio:5060
    inetd-small:xinetd:7,13,19
    yaws:beam.smp:8089
    pdns-recursor:pdns_recursor:5304
    gdnsd:gdnsd:5305
)

# Debian packages of the zoo (the unpacked FTP daemons' libraries included).
zoo_missing_packages() {
    local -A need=(
        [/usr/sbin/apache2]=apache2 [/usr/sbin/lighttpd]=lighttpd
        [/usr/sbin/dovecot]=dovecot-imapd [/usr/lib/dovecot/pop3]=dovecot-pop3d
        [/usr/sbin/mariadbd]=mariadb-server [/usr/sbin/slapd]=slapd [/usr/sbin/named]=bind9
        [/usr/sbin/smbd]=samba [/usr/sbin/squid]=squid [/usr/bin/tinyproxy]=tinyproxy
        [/usr/sbin/cupsd]=cups-daemon [/usr/sbin/mosquitto]=mosquitto [/usr/sbin/ngircd]=ngircd
        [/usr/bin/epmd]=erlang-base [/usr/sbin/rabbitmq-server]=rabbitmq-server [/usr/sbin/tor]=tor
        [/usr/sbin/xrdp]=xrdp [/usr/bin/Xvnc]=tigervnc-standalone-server [/usr/bin/vncpasswd]=tigervnc-tools [/usr/sbin/openvpn]=openvpn
        [/usr/bin/svnserve]=subversion [/usr/lib/git-core/git-daemon]=git
        [/usr/sbin/munin-node]=munin-node [/usr/sbin/dictd]=dictd [/usr/bin/mpd]=mpd
        [/usr/sbin/gearmand]=gearman-job-server [/usr/bin/beanstalkd]=beanstalkd
        [/usr/bin/distccd]=distcc [/usr/sbin/danted]=dante-server [/usr/sbin/spamd]=spamd
        [/usr/share/tomcat10/bin/catalina.sh]=tomcat10
        [/usr/bin/prosody]=prosody [/usr/sbin/rpcbind]=rpcbind [/usr/sbin/xinetd]=xinetd
        [/usr/sbin/in.fingerd]=fingerd [/usr/bin/finger]=finger [/usr/sbin/telnetd]=telnetd [/usr/bin/cvs]=cvs
        [/usr/sbin/dropbear]=dropbear-bin [/usr/sbin/inspircd]=inspircd [/usr/sbin/bitlbee]=bitlbee
        [/usr/bin/icecast2]=icecast2 [/usr/sbin/krb5kdc]=krb5-kdc [/usr/sbin/kadmind]=krb5-admin-server
        [/lib/nut/upsd]=nut-server [/usr/bin/webfsd]=webfs [/usr/sbin/mini_httpd]=mini-httpd
        [/usr/bin/caddy]=caddy [/usr/sbin/unbound]=unbound [/usr/sbin/nsd]=nsd [/usr/sbin/knotd]=knot
        [/usr/sbin/pdns_server]=pdns-server [/usr/lib/x86_64-linux-gnu/pdns/libbindbackend.so]=pdns-backend-bind
        [/usr/bin/transmission-daemon]=transmission-daemon [/usr/bin/rsync]=rsync [/usr/bin/supervisord]=supervisor
        [/usr/sbin/micro-httpd]=micro-httpd [/usr/bin/twistd3]=python3-twisted [/usr/sbin/apt-cacher-ng]=apt-cacher-ng
        [/usr/sbin/kamailio]=kamailio [/usr/bin/yaws]=yaws [/usr/sbin/pdns_recursor]=pdns-recursor
        [/usr/sbin/gdnsd]=gdnsd
        [/usr/lib/x86_64-linux-gnu/libwrap.so.0]=libwrap0
        [/usr/lib/x86_64-linux-gnu/libhiredis.so.0.14]=libhiredis0.14
        [/usr/lib/x86_64-linux-gnu/libmemcachedutil.so.2]=libmemcachedutil2
        [/usr/lib/x86_64-linux-gnu/libsodium.so.23]=libsodium23
        [/usr/lib/x86_64-linux-gnu/libpcre2-posix.so.3]=libpcre2-posix3
    )
    local f
    for f in "${!need[@]}"; do [ -e "$f" ] || echo "${need[$f]}"; done | sort -u
}

zoo_ports() { # every zoo port, comma-separated, ascending
    local d
    for d in "${ZOO_DAEMONS[@]}"; do echo "${d##*:}"; done | tr , '\n' | sort -n | paste -sd, -
}

# Runs a daemon in the foreground inside mstarget, detached, its output in
# $ZOO_DIR/NAME.log, its pid in $ZOO_DIR/NAME.pid.
zoo_run() { # name cmd...
    local name=$1
    shift
    ip netns exec "$TGT_NS" setsid "$@" </dev/null >>"$ZOO_DIR/$name.log" 2>&1 &
    echo $! >"$ZOO_DIR/$name.pid"
}

# As zoo_run, for a daemon that keeps a lock or a socket at a fixed path
# under /run (rpcbind's /run/rpcbind.lock and /run/rpcbind.sock): /run is
# shared by every network namespace, so another copy on the host (NFS tools,
# a second lab) would make it refuse to start. It gets a /run of its own, a
# tmpfs in the mount namespace "ip netns exec" makes for it, with the lab's
# state folder ($STATE) mounted back in.
zoo_run_private_run() { # name cmd...
    local name=$1
    shift
    zoo_run "$name" sh -c 'set -e
        mount --make-rprivate /
        mount --rbind "$0" /mnt
        mount -t tmpfs -o mode=755 moonscan-lab-run /run
        mkdir -p "$0"
        mount --move /mnt "$0"
        exec "$@"' "$STATE" "$@"
}

# The FTP daemons that conflict with vsftpd as packages: downloaded once,
# unpacked into $ZOO_CACHE/PACKAGE.
zoo_unpacked() { # package -> prints the root it is unpacked in
    local pkg=$1 root=$ZOO_CACHE/$1 deb
    if [ ! -d "$root/usr" ]; then
        mkdir -p "$ZOO_CACHE"
        # As root into a root-only directory: apt's sandbox user could not write there.
        if ! (cd "$ZOO_CACHE" && apt-get download -q -o APT::Sandbox::User=root "$pkg" >&2); then
            apt-get -q -o DPkg::Lock::Timeout=300 update >&2 || true
            (cd "$ZOO_CACHE" && apt-get download -q -o APT::Sandbox::User=root "$pkg" >&2) ||
                die "cannot download $pkg"
        fi
        deb=$(ls -t "$ZOO_CACHE/${pkg}"_*.deb | head -n 1)
        dpkg -x "$deb" "$root" || die "cannot unpack $deb"
    fi
    echo "$root"
}

zoo_start_apache2() {
    mkdir -p "$ZOO_DIR/apache2"
    cat >"$ZOO_DIR/apache2.conf" <<EOF
ServerRoot /etc/apache2
DefaultRuntimeDir $ZOO_DIR/apache2
Mutex file:$ZOO_DIR/apache2 default
PidFile $ZOO_DIR/apache2/httpd.pid
Include /etc/apache2/mods-enabled/*.load
Include /etc/apache2/mods-enabled/*.conf
User www-data
Group www-data
Listen $ZOO:8080
ServerName lab.moonscan.test
ErrorLog $ZOO_DIR/apache2.log
DocumentRoot $STATE/www
EOF
    zoo_run apache2 /usr/sbin/apache2 -f "$ZOO_DIR/apache2.conf" -DFOREGROUND
}

zoo_start_lighttpd() {
    cat >"$ZOO_DIR/lighttpd.conf" <<EOF
server.document-root = "$STATE/www"
server.bind = "$ZOO"
server.port = 8081
server.errorlog = "$ZOO_DIR/lighttpd.log"
EOF
    zoo_run lighttpd /usr/sbin/lighttpd -D -f "$ZOO_DIR/lighttpd.conf"
}

zoo_start_proftpd() {
    local root
    root=$(zoo_unpacked proftpd-core)
    cat >"$ZOO_DIR/proftpd.conf" <<EOF
ServerName "moonscan lab"
ServerType standalone
DefaultServer on
DefaultAddress $ZOO
SocketBindTight on
Port 21
UseIPv6 off
User nobody
Group nogroup
PidFile $ZOO_DIR/proftpd.pid.own
ScoreboardFile $ZOO_DIR/proftpd.scoreboard
DelayTable none
WtmpLog off
RequireValidShell off
EOF
    zoo_run proftpd "$root/usr/sbin/proftpd" -n -c "$ZOO_DIR/proftpd.conf"
}

zoo_start_pure-ftpd() {
    local root
    root=$(zoo_unpacked pure-ftpd)
    # -S address,port; -H: no reverse lookups; -A: chroot everyone.
    zoo_run pure-ftpd "$root/usr/sbin/pure-ftpd" -S "$ZOO,2121" -H -A
}

zoo_start_dovecot() {
    mkdir -p "$ZOO_DIR/dovecot"
    cat >"$ZOO_DIR/dovecot.conf" <<EOF
protocols = imap pop3
listen = $ZOO
base_dir = $ZOO_DIR/dovecot
state_dir = $ZOO_DIR/dovecot
log_path = $ZOO_DIR/dovecot.log
ssl = yes
ssl_cert = <$STATE/tls.crt
ssl_key = <$STATE/tls.key
passdb {
  driver = static
  args = password=moonscan-lab-nobody-logs-in
}
userdb {
  driver = static
  args = uid=nobody gid=nogroup home=$ZOO_DIR/dovecot
}
EOF
    zoo_run dovecot /usr/sbin/dovecot -F -c "$ZOO_DIR/dovecot.conf"
}

zoo_start_mariadb() {
    local data=$ZOO_DIR/mariadb
    tls_files_for mysql
    if [ ! -d "$data/mysql" ]; then
        install -d -o mysql -g mysql -m 750 "$data"
        /usr/bin/mariadb-install-db --no-defaults --user=mysql --datadir="$data" \
            --skip-test-db --auth-root-authentication-method=socket >"$ZOO_DIR/mariadb-init.log" 2>&1 ||
            die "mariadb-install-db failed (see $ZOO_DIR/mariadb-init.log)"
    fi
    zoo_run mariadb /usr/sbin/mariadbd --no-defaults --user=mysql --datadir="$data" \
        --bind-address="$ZOO" --port=3306 --socket="$data/mysqld.sock" --skip-name-resolve \
        --pid-file="$data/mysqld.pid" --innodb-buffer-pool-size=16M \
        --ssl-cert="$STATE/tls-mysql.crt" --ssl-key="$STATE/tls-mysql.key"
}

zoo_start_slapd() {
    install -d -o openldap -g openldap "$ZOO_DIR/ldap"
    cat >"$ZOO_DIR/slapd.conf" <<EOF
include /etc/ldap/schema/core.schema
pidfile $ZOO_DIR/ldap/slapd.pid
argsfile $ZOO_DIR/ldap/slapd.args
modulepath /usr/lib/ldap
moduleload back_mdb
database mdb
suffix "dc=lab,dc=moonscan,dc=test"
directory $ZOO_DIR/ldap
TLSCertificateFile $STATE/tls-openldap.crt
TLSCertificateKeyFile $STATE/tls-openldap.key
EOF
    chown openldap:openldap "$ZOO_DIR/slapd.conf"
    tls_files_for openldap
    # -d: stay in the foreground (level 0: log nothing).
    zoo_run slapd /usr/sbin/slapd -d 0 -u openldap -g openldap -h "ldap://$ZOO:389/" -f "$ZOO_DIR/slapd.conf"
}

zoo_start_named() {
    install -d -o bind -g bind "$ZOO_DIR/named"
    cat >"$ZOO_DIR/named.conf" <<EOF
options {
  directory "$ZOO_DIR/named";
  pid-file none;
  listen-on port 53 { $ZOO; };
  listen-on-v6 { none; };
  recursion no;
};
zone "lab.moonscan.test" { type primary; file "$ZOO_DIR/named/lab.zone"; };
EOF
    cat >"$ZOO_DIR/named/lab.zone" <<EOF
\$TTL 300
@ IN SOA ns.lab.moonscan.test. admin.lab.moonscan.test. 1 3600 600 86400 300
@ IN NS ns.lab.moonscan.test.
ns IN A $ZOO
EOF
    zoo_run named /usr/sbin/named -f -u bind -c "$ZOO_DIR/named.conf"
}

zoo_start_smbd() {
    local s=$ZOO_DIR/samba
    mkdir -p "$s/private" "$s/lock" "$s/state" "$s/cache" "$s/pid" "$s/share"
    cat >"$s/smb.conf" <<EOF
[global]
  workgroup = MOONSCAN
  netbios name = MSLAB
  server role = standalone server
  interfaces = $ZOO
  bind interfaces only = yes
  smb ports = 445 139
  private dir = $s/private
  lock directory = $s/lock
  state directory = $s/state
  cache directory = $s/cache
  pid directory = $s/pid
  ncalrpc dir = $s/ncalrpc
  log file = $ZOO_DIR/smbd.log
  load printers = no
  printing = bsd
  printcap name = /dev/null
  disable spoolss = yes
  map to guest = bad user
[lab]
  path = $s/share
  read only = yes
  guest ok = yes
EOF
    zoo_run smbd /usr/sbin/smbd --foreground --no-process-group -s "$s/smb.conf"
}

zoo_start_squid() {
    cat >"$ZOO_DIR/squid.conf" <<EOF
http_port $ZOO:3128
http_access allow all
cache deny all
cache_dir null /tmp
pid_filename $ZOO_DIR/squid.pid.own
access_log none
cache_log $ZOO_DIR/squid-cache.log
coredump_dir $ZOO_DIR
# No ICMP pinger helper: it runs apart from squid and outlives it.
pinger_enable off
EOF
    zoo_run squid /usr/sbin/squid -N -f "$ZOO_DIR/squid.conf"
}

zoo_start_tinyproxy() {
    cat >"$ZOO_DIR/tinyproxy.conf" <<EOF
Port 8888
Listen $ZOO
Timeout 60
MaxClients 20
Allow 198.18.0.0/16
EOF
    zoo_run tinyproxy /usr/bin/tinyproxy -d -c "$ZOO_DIR/tinyproxy.conf"
}

zoo_start_cupsd() {
    local c=$ZOO_DIR/cups
    mkdir -p "$c/spool" "$c/tmp" "$c/cache" "$c/state" "$c/ppd"
    cat >"$c/cupsd.conf" <<EOF
Listen $ZOO:631
# cupsd insists on a local listener too (mstarget's own loopback).
Listen 127.0.0.1:631
LogLevel warn
<Location />
  Order allow,deny
  Allow all
</Location>
EOF
    cat >"$c/cups-files.conf" <<EOF
ServerRoot $c
RequestRoot $c/spool
TempDir $c/tmp
CacheDir $c/cache
StateDir $c/state
ErrorLog $ZOO_DIR/cupsd.log
AccessLog $c/access_log
PageLog $c/page_log
EOF
    zoo_run cupsd /usr/sbin/cupsd -f -c "$c/cupsd.conf" -s "$c/cups-files.conf"
}

zoo_start_mosquitto() {
    cat >"$ZOO_DIR/mosquitto.conf" <<EOF
user root
listener 1883 $ZOO
allow_anonymous true
listener 8883 $ZOO
certfile $STATE/tls.crt
keyfile $STATE/tls.key
EOF
    zoo_run mosquitto /usr/sbin/mosquitto -c "$ZOO_DIR/mosquitto.conf"
}

zoo_start_ngircd() {
    cat >"$ZOO_DIR/ngircd.conf" <<EOF
[Global]
Name = irc.lab.moonscan.test
Info = moonscan lab IRC
Listen = $ZOO
Ports = 6667
ServerUID = nobody
ServerGID = nogroup
MotdPhrase = moonscan lab
[Options]
PAM = no
DNS = no
Ident = no
EOF
    zoo_run ngircd /usr/sbin/ngircd -n -f "$ZOO_DIR/ngircd.conf"
}

zoo_start_epmd() {
    # Loopback too: RabbitMQ's node registers through 127.0.0.1.
    ERL_EPMD_ADDRESS=$ZOO,127.0.0.1 zoo_run epmd /usr/bin/epmd
}

zoo_start_rabbitmq() {
    local r=$ZOO_DIR/rabbitmq
    install -d -o rabbitmq -g rabbitmq "$r" "$r/log" "$r/mnesia"
    cat >"$r/rabbitmq.conf" <<EOF
listeners.tcp.default = $ZOO:5672
management.tcp.port = 15672
EOF
    cat >"$r/rabbitmq-env.conf" <<EOF
NODENAME=rabbit@localhost
EOF
    # The node's distribution listener stays on loopback.
    zoo_run rabbitmq setpriv --reuid rabbitmq --regid rabbitmq --init-groups env HOME="$r" RABBITMQ_CONFIG_FILE="$r/rabbitmq.conf" \
        RABBITMQ_CONF_ENV_FILE="$r/rabbitmq-env.conf" RABBITMQ_MNESIA_BASE="$r/mnesia" \
        RABBITMQ_LOG_BASE="$r/log" RABBITMQ_ENABLED_PLUGINS_FILE="$r/enabled_plugins" \
        RABBITMQ_ENABLED_PLUGINS= RABBITMQ_NODENAME=rabbit@localhost \
        ERL_EPMD_ADDRESS=127.0.0.1 RABBITMQ_DIST_PORT=25672 \
        RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}" \
        /usr/lib/rabbitmq/bin/rabbitmq-server
}

zoo_start_tor() {
    install -d -o debian-tor -g debian-tor -m 700 "$ZOO_DIR/tor"
    cat >"$ZOO_DIR/torrc" <<EOF
User debian-tor
DataDirectory $ZOO_DIR/tor
SocksPort 0
ORPort $ZOO:9001
Address $ZOO
AssumeReachable 1
PublishServerDescriptor 0
ExitRelay 0
Nickname moonscanlab
ContactInfo moonscan lab
Log notice file $ZOO_DIR/tor/notice.log
EOF
    zoo_run tor /usr/sbin/tor -f "$ZOO_DIR/torrc"
}

zoo_start_xrdp() {
    local x=$ZOO_DIR/xrdp
    mkdir -p "$x"
    cat >"$x/xrdp.ini" <<EOF
[Globals]
ini_version=1
port=tcp://$ZOO:3389
security_layer=negotiate
certificate=/etc/xrdp/cert.pem
key_file=/etc/xrdp/key.pem
[Logging]
LogFile=$ZOO_DIR/xrdp/xrdp.log
LogLevel=WARNING
EnableSyslog=false
[Xvnc]
name=Xvnc
lib=libvnc.so
username=ask
password=ask
ip=127.0.0.1
port=-1
EOF
    # xrdp keeps its pid file in /var/run/xrdp, which nothing else here uses.
    mkdir -p /var/run/xrdp
    zoo_run xrdp /usr/sbin/xrdp --nodaemon --config "$x/xrdp.ini"
}

zoo_start_xvnc() {
    # Display 77: its lock and socket in /tmp must not meet a real X server's.
    rm -f /tmp/.X77-lock /tmp/.X11-unix/X77
    zoo_run xvnc /usr/bin/Xvnc :77 -rfbport 5901 -interface "$ZOO" -BlacklistThreshold 1000000 -SecurityTypes VncAuth \
        -PasswordFile "$ZOO_DIR/vncpasswd" -nolisten tcp -nolisten unix -localhost no
}

zoo_start_openvpn() {
    # Server mode (many clients, as a real VPN concentrator; point-to-point
    # mode restarts after each client and closes the port meanwhile). Its tun
    # interface and pool live inside mstarget only.
    zoo_run openvpn /usr/sbin/openvpn --mode server --tls-server --dev tun --topology subnet \
        --server 198.18.200.0 255.255.255.0 --proto tcp-server --local "$ZOO" --port 1194 \
        --ca "$STATE/tls.crt" --cert "$STATE/tls.crt" --key "$STATE/tls.key" --dh none --verb 1
}

zoo_start_svnserve() {
    [ -d "$ZOO_DIR/svn/lab" ] || { mkdir -p "$ZOO_DIR/svn" && svnadmin create "$ZOO_DIR/svn/lab"; }
    zoo_run svnserve /usr/bin/svnserve -d --foreground --listen-host "$ZOO" --listen-port 3690 -r "$ZOO_DIR/svn"
}

zoo_start_git-daemon() {
    # Owned by the user git-daemon runs as, or git refuses it ("dubious ownership").
    [ -d "$ZOO_DIR/git/lab.git" ] || { /usr/bin/git init -q --bare "$ZOO_DIR/git/lab.git" && chown -R nobody:nogroup "$ZOO_DIR/git"; }
    zoo_run git-daemon /usr/lib/git-core/git-daemon --listen="$ZOO" --port=9418 --reuseaddr \
        --base-path="$ZOO_DIR/git" --export-all --user=nobody --group=nogroup
}

zoo_start_munin-node() {
    cat >"$ZOO_DIR/munin-node.conf" <<EOF
log_level 4
log_file $ZOO_DIR/munin-node.log
pid_file $ZOO_DIR/munin-node.pid.own
background 0
setsid 0
user root
group root
host_name target.lab.moonscan.test
allow ^.*\$
host $ZOO
port 4949
EOF
    zoo_run munin-node /usr/sbin/munin-node --config "$ZOO_DIR/munin-node.conf"
}

zoo_start_dictd() {
    # One entry: word, offset and length (base64 digits: A=0, N=13) in lab.dict.
    printf 'moonscan lab\n' >"$ZOO_DIR/lab.dict"
    printf '00-database-short\tA\tN\n' >"$ZOO_DIR/lab.index"
    cat >"$ZOO_DIR/dictd.conf" <<EOF
global { listen_to $ZOO port 2628 pid_file $ZOO_DIR/dictd.pid.own }
database lab { data "$ZOO_DIR/lab.dict" index "$ZOO_DIR/lab.index" }
EOF
    zoo_run dictd /usr/sbin/dictd -d nodetach -c "$ZOO_DIR/dictd.conf" --locale C.UTF-8
}

zoo_start_mpd() {
    mkdir -p "$ZOO_DIR/mpd/music"
    cat >"$ZOO_DIR/mpd.conf" <<EOF
music_directory "$ZOO_DIR/mpd/music"
db_file "$ZOO_DIR/mpd/db"
log_file "$ZOO_DIR/mpd/log"
state_file "$ZOO_DIR/mpd/state"
bind_to_address "$ZOO"
port "6600"
audio_output {
  type "null"
  name "null"
}
EOF
    zoo_run mpd /usr/bin/mpd --no-daemon "$ZOO_DIR/mpd.conf"
}

zoo_start_gearmand() {
    zoo_run gearmand /usr/sbin/gearmand --listen="$ZOO" --port=4730 --user=gearman \
        --log-file="$ZOO_DIR/gearmand-own.log"
}

zoo_start_beanstalkd() {
    zoo_run beanstalkd /usr/bin/beanstalkd -l "$ZOO" -p 11300 -u nobody
}

zoo_start_distccd() {
    zoo_run distccd /usr/bin/distccd --daemon --no-detach --listen "$ZOO" --port 3632 \
        --allow 198.18.0.0/16 --user nobody --log-file "$ZOO_DIR/distccd-own.log"
}

zoo_start_danted() {
    cat >"$ZOO_DIR/danted.conf" <<EOF
logoutput: $ZOO_DIR/danted-own.log
internal: $ZOO port = 1080
external: $ZOO
socksmethod: none
clientmethod: none
user.privileged: root
user.unprivileged: nobody
client pass { from: 0.0.0.0/0 to: 0.0.0.0/0 }
socks block { from: 0.0.0.0/0 to: 0.0.0.0/0 }
EOF
    zoo_run danted /usr/sbin/danted -f "$ZOO_DIR/danted.conf" -p "$ZOO_DIR/danted.pid.own"
}

zoo_start_spamd() {
    zoo_run spamd /usr/sbin/spamd --listen="$ZOO:783" --allowed-ips=198.18.0.0/16 \
        --username=nobody --max-children=2 --syslog=stderr
}

zoo_start_tomcat() {
    local t=$ZOO_DIR/tomcat
    mkdir -p "$t/conf" "$t/logs" "$t/temp" "$t/webapps" "$t/work"
    cp /usr/share/tomcat10/etc/web.xml "$t/conf/" 2>/dev/null || cp /etc/tomcat10/web.xml "$t/conf/"
    cat >"$t/conf/server.xml" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<Server port="-1" shutdown="SHUTDOWN">
  <Service name="Catalina">
    <Connector address="$ZOO" port="8180" protocol="HTTP/1.1" connectionTimeout="20000"/>
    <Connector address="$ZOO" port="8009" protocol="AJP/1.3" secretRequired="false"/>
    <Engine name="Catalina" defaultHost="localhost">
      <Host name="localhost" appBase="webapps" unpackWARs="false" autoDeploy="false"/>
    </Engine>
  </Service>
</Server>
EOF
    zoo_run tomcat env CATALINA_HOME=/usr/share/tomcat10 CATALINA_BASE="$t" CATALINA_TMPDIR="$t/temp" \
        JAVA_OPTS="-Xmx128m -Djava.awt.headless=true" /usr/share/tomcat10/bin/catalina.sh run
}

zoo_start_prosody() {
    # XMPP: client (5222) and server (5269) streams, STARTTLS required, for
    # the names zoo.lab.moonscan.test and 198.18.0.5 (a scanner that asks for
    # the address gets the features). Run as its user: prosody refuses root.
    local p=$ZOO_DIR/prosody
    install -d -o prosody -g prosody "$p"
    tls_files_for prosody
    cat >"$p/prosody.cfg.lua" <<EOF
pidfile = "$p/prosody.pid.own"
data_path = "$p"
certificates = "$p"
log = { info = "$ZOO_DIR/prosody-own.log" }
interfaces = { "$ZOO" }
c2s_ports = { 5222 }
s2s_ports = { 5269 }
c2s_direct_tls_ports = { }
s2s_direct_tls_ports = { }
legacy_ssl_ports = { }
modules_enabled = { "roster", "saslauth", "tls", "dialback", "disco", "ping", "register", "time", "version", "uptime" }
allow_registration = false
c2s_require_encryption = true
s2s_require_encryption = true
authentication = "internal_hashed"
ssl = { certificate = "$STATE/tls-prosody.crt", key = "$STATE/tls-prosody.key" }
VirtualHost "zoo.lab.moonscan.test"
VirtualHost "$ZOO"
EOF
    chmod 644 "$p/prosody.cfg.lua"
    touch "$ZOO_DIR/prosody-own.log"
    chown prosody:prosody "$ZOO_DIR/prosody-own.log"
    zoo_run prosody setpriv --reuid prosody --regid prosody --init-groups /usr/bin/prosody \
        --config "$p/prosody.cfg.lua" -F
}

zoo_start_rpcbind() {
    # rpcbind binds TCP (and IPv6) to every address whatever -h says, so it
    # gets its sockets as systemd would hand them over (LISTEN_FDS): TCP and
    # UDP 111 on the zoo's address, IPv6 on mstarget's loopback only.
    zoo_run_private_run rpcbind /usr/bin/python3 -c '
import os, socket, sys
socks, fds = [], []
for fam, addr in ((socket.AF_INET, sys.argv[1]), (socket.AF_INET6, "::1")):
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        s = socket.socket(fam, kind)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if fam == socket.AF_INET6:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        s.bind((addr, 111))
        if kind == socket.SOCK_STREAM:
            s.listen(64)
        socks.append(s)
        fds.append(os.dup2(s.fileno(), 100 + len(fds), inheritable=False))
for i, fd in enumerate(fds):
    os.dup2(fd, 3 + i)
os.environ.update(LISTEN_FDS=str(len(fds)), LISTEN_PID=str(os.getpid()))
os.execv("/usr/sbin/rpcbind", ["rpcbind", "-f"])
' "$ZOO"
}

zoo_start_xinetd() {
    # xinetd's built-in RFC 868 time service, TCP and UDP 37.
    cat >"$ZOO_DIR/xinetd.conf" <<EOF
defaults
{
  log_type = FILE $ZOO_DIR/xinetd-own.log
}
service time
{
  type = INTERNAL
  id = time-stream
  socket_type = stream
  protocol = tcp
  user = root
  wait = no
  bind = $ZOO
  port = 37
}
service time
{
  type = INTERNAL
  id = time-dgram
  socket_type = dgram
  protocol = udp
  user = root
  wait = yes
  bind = $ZOO
  port = 37
}
EOF
    zoo_run xinetd /usr/sbin/xinetd -dontfork -f "$ZOO_DIR/xinetd.conf"
}

# Runs daemons that expect inetd (fingerd, telnetd, CVS's pserver,
# micro-httpd, inetutils' ftpd) from an xinetd of their own: one xinetd per
# daemon, its services (xinetd "service" blocks on stdin) bound to the
# zoo's address.
zoo_xinetd() { # name < service blocks
    {
        printf 'defaults\n{\n  log_type = FILE %s\n}\n' "$ZOO_DIR/$1-xinetd.log"
        cat
    } >"$ZOO_DIR/$1-xinetd.conf"
    zoo_run "$1" /usr/sbin/xinetd -dontfork -f "$ZOO_DIR/$1-xinetd.conf"
}

zoo_start_fingerd() {
    zoo_xinetd fingerd <<EOF
service finger
{
  socket_type = stream
  protocol = tcp
  wait = no
  user = nobody
  bind = $ZOO
  port = 79
  server = /usr/sbin/in.fingerd
}
EOF
}

zoo_start_telnetd() {
    # GNU inetutils' telnetd (Debian's "telnetd"); nobody logs in.
    zoo_xinetd telnetd <<EOF
service telnet
{
  socket_type = stream
  protocol = tcp
  wait = no
  user = root
  bind = $ZOO
  port = 23
  server = /usr/sbin/telnetd
}
EOF
}

zoo_start_cvs() {
    # CVS's password server on an empty repository.
    [ -d "$ZOO_DIR/cvs/CVSROOT" ] || /usr/bin/cvs -d "$ZOO_DIR/cvs" init
    zoo_xinetd cvs <<EOF
service cvspserver
{
  socket_type = stream
  protocol = tcp
  wait = no
  user = root
  bind = $ZOO
  port = 2401
  server = /usr/bin/cvs
  server_args = -f --allow-root=$ZOO_DIR/cvs pserver
}
EOF
}

zoo_start_dropbear() {
    [ -s "$ZOO_DIR/dropbear-ed25519" ] ||
        /usr/bin/dropbearkey -t ed25519 -f "$ZOO_DIR/dropbear-ed25519" >/dev/null 2>&1
    zoo_run dropbear /usr/sbin/dropbear -F -E -p "$ZOO:2222" -r "$ZOO_DIR/dropbear-ed25519" \
        -P "$ZOO_DIR/dropbear.pid.own"
}

zoo_start_inspircd() {
    local i=$ZOO_DIR/inspircd
    install -d -o irc -g irc "$i"
    cat >"$i/inspircd.conf" <<EOF
<server name="irc2.lab.moonscan.test" description="moonscan lab InspIRCd" network="MoonscanLab">
<admin name="lab" nick="lab" email="lab@lab.moonscan.test">
<bind address="$ZOO" port="7000" type="clients">
<connect allow="*" timeout="60" pingfreq="120" sendq="262144" recvq="8192" localmax="100" globalmax="100">
<pid file="$i/inspircd.pid.own">
<log method="file" type="* -USERINPUT -USEROUTPUT" level="default" target="$i/inspircd.log">
<options allowzerolimit="no">
<security hidesplits="no">
<performance netbuffersize="10240" softlimit="128">
<dns timeout="1">
EOF
    chown irc:irc "$i/inspircd.conf"
    zoo_run inspircd setpriv --reuid irc --regid irc --init-groups /usr/sbin/inspircd --nofork \
        --config="$i/inspircd.conf"
}

zoo_start_bitlbee() {
    local b=$ZOO_DIR/bitlbee
    install -d -o bitlbee -g bitlbee "$b"
    cat >"$b/bitlbee.conf" <<EOF
[settings]
RunMode = ForkDaemon
User = bitlbee
DaemonInterface = $ZOO
DaemonPort = 6668
ConfigDir = $b
PidFile = $b/bitlbee.pid.own
HostName = im.lab.moonscan.test
EOF
    zoo_run bitlbee /usr/sbin/bitlbee -F -n -c "$b/bitlbee.conf" -d "$b"
}

zoo_start_icecast2() {
    local c=$ZOO_DIR/icecast
    install -d -o icecast2 -g icecast "$c"
    cat >"$c/icecast.xml" <<EOF
<icecast>
  <location>moonscan lab</location>
  <admin>lab@lab.moonscan.test</admin>
  <limits><clients>20</clients><sources>2</sources></limits>
  <authentication>
    <source-password>moonscan-lab-no-source</source-password>
    <admin-user>admin</admin-user>
    <admin-password>moonscan-lab-no-admin</admin-password>
  </authentication>
  <hostname>zoo.lab.moonscan.test</hostname>
  <listen-socket><port>8000</port><bind-address>$ZOO</bind-address></listen-socket>
  <fileserve>1</fileserve>
  <paths>
    <basedir>/usr/share/icecast2</basedir>
    <logdir>$c</logdir>
    <webroot>/usr/share/icecast2/web</webroot>
    <adminroot>/usr/share/icecast2/admin</adminroot>
  </paths>
  <logging><accesslog>access.log</accesslog><errorlog>error.log</errorlog><loglevel>2</loglevel></logging>
</icecast>
EOF
    zoo_run icecast2 setpriv --reuid icecast2 --regid icecast --init-groups /usr/bin/icecast2 -c "$c/icecast.xml"
}

# MIT Kerberos: a KDC (88) and its admin server (kadmind: 749, and kpasswd
# on 464) for the realm LAB.MOONSCAN.TEST, from a database made once.
zoo_krb5_env() {
    local k=$ZOO_DIR/krb5
    mkdir -p "$k"
    # Each file is written whole beside its place and renamed over it: the
    # KDC and kadmind both call this, and one starting daemon reading a
    # file the other's call has just truncated fails to initialise its realm.
    cat >"$k/krb5.conf.new" <<EOF
[libdefaults]
  default_realm = LAB.MOONSCAN.TEST
[realms]
  LAB.MOONSCAN.TEST = {
    kdc = $ZOO
    admin_server = $ZOO
  }
EOF
    mv -f "$k/krb5.conf.new" "$k/krb5.conf"
    cat >"$k/kdc.conf.new" <<EOF
[kdcdefaults]
  kdc_ports = 88
  kdc_tcp_ports = 88
[realms]
  LAB.MOONSCAN.TEST = {
    database_name = $k/principal
    key_stash_file = $k/stash
    acl_file = $k/kadm5.acl
    kdc_listen = $ZOO:88
    kdc_tcp_listen = $ZOO:88
    kadmind_listen = $ZOO:749
    kpasswd_listen = $ZOO:464
  }
[logging]
  kdc = FILE:$ZOO_DIR/krb5kdc-own.log
  admin_server = FILE:$ZOO_DIR/kadmind-own.log
EOF
    mv -f "$k/kdc.conf.new" "$k/kdc.conf"
    [ -e "$k/kadm5.acl" ] || : >"$k/kadm5.acl"
    [ -e "$k/principal" ] || KRB5_CONFIG="$k/krb5.conf" KRB5_KDC_PROFILE="$k/kdc.conf" \
        /usr/sbin/kdb5_util -r LAB.MOONSCAN.TEST create -s -P moonscan-lab-master >/dev/null 2>&1 ||
        die "kdb5_util create failed"
    echo "KRB5_CONFIG=$k/krb5.conf KRB5_KDC_PROFILE=$k/kdc.conf"
}

zoo_start_krb5kdc() {
    local env
    env=$(zoo_krb5_env)
    # shellcheck disable=SC2086 # two assignments
    zoo_run krb5kdc env $env /usr/sbin/krb5kdc -n -r LAB.MOONSCAN.TEST -P "$ZOO_DIR/krb5kdc.pid.own"
}

zoo_start_kadmind() {
    local env
    env=$(zoo_krb5_env)
    # shellcheck disable=SC2086 # two assignments
    zoo_run kadmind env $env /usr/sbin/kadmind -nofork -r LAB.MOONSCAN.TEST -P "$ZOO_DIR/kadmind.pid.own"
}

zoo_start_upsd() {
    # Network UPS Tools' upsd with one UPS whose driver never runs: upsd
    # serves (and says the UPS is stale) all the same.
    local n=$ZOO_DIR/nut
    install -d -o nut -g nut -m 770 "$n" "$n/state"
    printf '[lab]\n  driver = dummy-ups\n  port = lab.dev\n  desc = "moonscan lab"\n' >"$n/ups.conf"
    printf 'LISTEN %s 3493\nSTATEPATH %s\n' "$ZOO" "$n/state" >"$n/upsd.conf"
    printf '[monuser]\n  password = moonscan-lab\n  upsmon secondary\n' >"$n/upsd.users"
    printf 'MODE=netserver\n' >"$n/nut.conf"
    chown nut:nut "$n"/*.conf "$n/upsd.users"
    chmod 640 "$n"/*.conf "$n/upsd.users"
    zoo_run upsd env NUT_CONFPATH="$n" NUT_STATEPATH="$n/state" /lib/nut/upsd -F -u nut
}

zoo_start_webfs() {
    zoo_run webfs /usr/bin/webfsd -F -i "$ZOO" -p 8083 -r "$STATE/www" -u nobody -g nogroup
}

zoo_start_mini-httpd() {
    zoo_run mini-httpd /usr/sbin/mini_httpd -D -h "$ZOO" -p 8084 -d "$STATE/www" -u nobody \
        -l "$ZOO_DIR/mini-httpd-own.log" -i "$ZOO_DIR/mini-httpd.pid.own"
}

zoo_start_caddy() {
    mkdir -p "$ZOO_DIR/caddy"
    cat >"$ZOO_DIR/caddy/Caddyfile" <<EOF
{
  admin off
  auto_https off
}
http://:8085 {
  bind $ZOO
  root * $STATE/www
  file_server
}
EOF
    zoo_run caddy env HOME="$ZOO_DIR/caddy" XDG_DATA_HOME="$ZOO_DIR/caddy" XDG_CONFIG_HOME="$ZOO_DIR/caddy" \
        /usr/bin/caddy run --config "$ZOO_DIR/caddy/Caddyfile" --adapter caddyfile
}

zoo_start_unbound() {
    cat >"$ZOO_DIR/unbound.conf" <<EOF
server:
  interface: $ZOO@5300
  port: 5300
  do-ip6: no
  do-daemonize: no
  chroot: ""
  username: "unbound"
  pidfile: ""
  use-syslog: no
  logfile: ""
  access-control: 198.18.0.0/16 allow
  hide-version: no
remote-control:
  control-enable: no
EOF
    zoo_run unbound /usr/sbin/unbound -d -c "$ZOO_DIR/unbound.conf"
}

zoo_start_nsd() {
    local n=$ZOO_DIR/nsd
    install -d -o nsd -g nsd "$n"
    cat >"$n/nsd.conf" <<EOF
server:
  ip-address: $ZOO
  port: 5301
  do-ip6: no
  username: nsd
  zonesdir: "$n"
  database: ""
  zonelistfile: "$n/zone.list"
  xfrdfile: "$n/xfrd.state"
  xfrdir: "$n"
  pidfile: "$n/nsd.pid.own"
  logfile: "$ZOO_DIR/nsd-own.log"
  hide-version: no
remote-control:
  control-enable: no
EOF
    zoo_run nsd /usr/sbin/nsd -d -c "$n/nsd.conf"
}

zoo_start_knot() {
    local k=$ZOO_DIR/knot
    install -d -o knot -g knot "$k" "$k/storage"
    cat >"$k/knot.conf" <<EOF
server:
  rundir: "$k"
  user: knot:knot
  listen: $ZOO@5302
log:
  - target: stderr
    any: warning
database:
  storage: "$k/storage"
EOF
    zoo_run knot /usr/sbin/knotd -c "$k/knot.conf"
}

zoo_start_pdns() {
    local p=$ZOO_DIR/pdns
    install -d -o pdns -g pdns "$p"
    : >"$p/named.conf"
    cat >"$p/pdns.conf" <<EOF
launch=bind
bind-config=$p/named.conf
local-address=$ZOO
local-port=5303
socket-dir=$p
setuid=pdns
setgid=pdns
daemon=no
guardian=no
webserver=no
api=no
EOF
    zoo_run pdns /usr/sbin/pdns_server --config-dir="$p"
}

zoo_start_transmission() {
    # Transmission's web and RPC interface; no peer port, no DHT, no local
    # peer discovery, no UPnP: it sends nothing of its own.
    local t=$ZOO_DIR/transmission
    install -d -o debian-transmission -g debian-transmission "$t"
    cat >"$t/settings.json" <<EOF
{
  "rpc-bind-address": "$ZOO",
  "rpc-port": 9091,
  "rpc-whitelist-enabled": false,
  "rpc-host-whitelist-enabled": false,
  "rpc-authentication-required": false,
  "bind-address-ipv4": "$ZOO",
  "bind-address-ipv6": "::1",
  "peer-port": 51413,
  "peer-port-random-on-start": false,
  "dht-enabled": false,
  "lpd-enabled": false,
  "pex-enabled": false,
  "utp-enabled": false,
  "port-forwarding-enabled": false,
  "download-dir": "$t",
  "incomplete-dir-enabled": false,
  "message-level": 1
}
EOF
    chown debian-transmission:debian-transmission "$t/settings.json"
    zoo_run transmission setpriv --reuid debian-transmission --regid debian-transmission --init-groups \
        /usr/bin/transmission-daemon -f -g "$t"
}

zoo_start_rsyncd() {
    mkdir -p "$ZOO_DIR/rsync"
    cat >"$ZOO_DIR/rsyncd.conf" <<EOF
uid = nobody
gid = nogroup
use chroot = no
pid file = $ZOO_DIR/rsyncd.pid.own
log file = $ZOO_DIR/rsyncd-own.log
[lab]
  path = $ZOO_DIR/rsync
  read only = yes
EOF
    zoo_run rsyncd /usr/bin/rsync --daemon --no-detach --address="$ZOO" --port=873 --config="$ZOO_DIR/rsyncd.conf"
}

zoo_start_supervisord() {
    # supervisord's web interface (Medusa), with no program to supervise.
    cat >"$ZOO_DIR/supervisord.conf" <<EOF
[supervisord]
nodaemon = true
pidfile = $ZOO_DIR/supervisord.pid.own
logfile = $ZOO_DIR/supervisord-own.log
user = root
[inet_http_server]
port = $ZOO:9002
[rpcinterface:supervisor]
supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface
EOF
    zoo_run supervisord /usr/bin/supervisord -n -c "$ZOO_DIR/supervisord.conf"
}

zoo_start_micro-httpd() {
    zoo_xinetd micro-httpd <<EOF
service micro-httpd
{
  type = UNLISTED
  socket_type = stream
  protocol = tcp
  wait = no
  user = nobody
  bind = $ZOO
  port = 8088
  server = /usr/sbin/micro-httpd
  server_args = $STATE/www
}
EOF
}

zoo_start_twistd() {
    # Twisted's web server (twistd web) serving the lab's pages.
    zoo_run twistd /usr/bin/twistd3 --nodaemon --pidfile= --logfile="$ZOO_DIR/twistd-own.log" \
        web --listen "tcp:8087:interface=$ZOO" --path "$STATE/www"
}

zoo_start_inetutils-ftpd() {
    # GNU inetutils' ftpd, unpacked (it conflicts with vsftpd as a package).
    local root
    root=$(zoo_unpacked inetutils-ftpd)
    zoo_xinetd inetutils-ftpd <<EOF
service inetutils-ftpd
{
  type = UNLISTED
  socket_type = stream
  protocol = tcp
  wait = no
  user = root
  bind = $ZOO
  port = 2100
  server = $root/usr/sbin/ftpd
}
EOF
}

zoo_start_apt-cacher-ng() {
    # Its status pages only: nothing asks it for a package, so it fetches nothing.
    local a=$ZOO_DIR/apt-cacher-ng
    install -d -o apt-cacher-ng -g apt-cacher-ng "$a" "$a/cache" "$a/log"
    zoo_run apt-cacher-ng setpriv --reuid apt-cacher-ng --regid apt-cacher-ng --init-groups \
        /usr/sbin/apt-cacher-ng -c /etc/apt-cacher-ng ForeGround=1 BindAddress="$ZOO" Port=3142 \
        CacheDir="$a/cache" LogDir="$a/log" PidFile= SocketPath="$a/socket"
}

zoo_start_kamailio() {
    # A SIP server over TCP that relays nothing: every request gets 403.
    local k=$ZOO_DIR/kamailio
    install -d -o kamailio -g kamailio "$k"
    cat >"$k/kamailio.cfg" <<EOF
#!KAMAILIO
debug=1
log_stderror=yes
children=1
tcp_children=1
disable_tcp=no
listen=tcp:$ZOO:5060
mpath="/usr/lib/x86_64-linux-gnu/kamailio/modules/"
loadmodule "sl.so"
request_route {
  sl_send_reply("403", "Not relaying");
  exit;
}
EOF
    zoo_run kamailio /usr/sbin/kamailio -DD -E -f "$k/kamailio.cfg" -Y "$k" -P "$k/kamailio.pid.own" \
        -u kamailio -g kamailio
}

zoo_start_inetd-small() {
    # xinetd's own "small services" over TCP: echo (7), daytime (13) and
    # chargen (19), as an old Unix host runs them from inetd.
    local svc
    for svc in echo:7 daytime:13 chargen:19; do
        cat <<EOF
service ${svc%%:*}
{
  type = INTERNAL
  id = ${svc%%:*}-stream
  socket_type = stream
  protocol = tcp
  user = root
  wait = no
  bind = $ZOO
  port = ${svc##*:}
}
EOF
    done | zoo_xinetd inetd-small
}

zoo_start_yaws() {
    # Yaws, the Erlang web server, as "yaws --daemon" runs it but in the
    # foreground (no distribution: it registers with no epmd).
    local y=$ZOO_DIR/yaws
    mkdir -p "$y/log"
    cat >"$y/yaws.conf" <<EOF
logdir = $y/log
<server zoo.lab.moonscan.test>
  port = 8089
  listen = $ZOO
  docroot = $STATE/www
</server>
EOF
    zoo_run yaws env HOME="$y" /usr/bin/erl -noshell -noinput -pa /usr/lib/yaws/ebin \
        -run yaws -conf "$y/yaws.conf" -yaws id lab
}

zoo_start_pdns-recursor() {
    # PowerDNS's resolver, for the lab's addresses only. It resolves
    # nothing: no root hints and no security poll (mstarget has no route
    # out anyway); a scanner asks it version.bind, which it answers itself.
    local r=$ZOO_DIR/pdns-recursor
    install -d -o pdns -g pdns "$r"
    : >"$r/recursor.conf"
    zoo_run pdns-recursor /usr/sbin/pdns_recursor --config-dir="$r" --socket-dir="$r" \
        --local-address="$ZOO" --local-port=5304 --allow-from=198.18.0.0/16 --daemon=no \
        --setuid=pdns --setgid=pdns --threads=1 --disable-syslog=yes --hint-file=no --security-poll-suffix=
}

zoo_start_gdnsd() {
    # gdnsd, an authoritative server, with one zone.
    local g=$ZOO_DIR/gdnsd
    mkdir -p "$g/zones" "$g/run" "$g/state"
    cat >"$g/config" <<EOF
options => {
  listen => [ $ZOO:5305 ]
  run_dir => $g/run
  state_dir => $g/state
  username => nobody
}
EOF
    cat >"$g/zones/lab.moonscan.test" <<EOF
@ SOA ns admin 1 3600 600 86400 300
@ NS ns
ns A $ZOO
EOF
    zoo_run gdnsd /usr/sbin/gdnsd -c "$g" start
}

# Daemons that look up their client's name (dictd, spamd) drop the client
# when the lookup fails for want of a resolver, as it does in a namespace
# with no route to the host's one. "ip netns exec" mounts
# /etc/netns/mstarget/* over /etc: lab names for the lab's addresses, and no
# resolver at all (nothing listens on mstarget's own port 53 of loopback).
ZOO_ETC=/etc/netns/$TGT_NS
zoo_etc() {
    if [ ! -e "$ZOO_ETC/hosts" ] || head -n 1 "$ZOO_ETC/hosts" | grep -q '^# moonscan lab'; then
        mkdir -p "$ZOO_ETC"
        cat >"$ZOO_ETC/hosts" <<EOF
# moonscan lab (scripts/lab-daemons.sh): removed by "lab.sh down"
127.0.0.1 localhost
198.18.0.1 scanner.lab.moonscan.test
198.18.0.2 target.lab.moonscan.test
198.18.0.3 target2.lab.moonscan.test
$ZOO zoo.lab.moonscan.test
EOF
        printf '# moonscan lab\nnameserver 127.0.0.1\n' >"$ZOO_ETC/resolv.conf"
    fi
}

zoo_start() {
    local d name
    mkdir -p "$ZOO_DIR"
    chmod 755 "$ZOO_DIR"
    zoo_etc
    ip -n "$TGT_NS" addr replace "$ZOO/24" dev "$TGT_IF"
    # Xvnc's password file (VNC authentication, as a real desktop asks).
    [ -s "$ZOO_DIR/vncpasswd" ] || echo moonscan | vncpasswd -f >"$ZOO_DIR/vncpasswd"
    chmod 600 "$ZOO_DIR/vncpasswd"
    for d in "${ZOO_DAEMONS[@]}"; do
        name=${d%%:*}
        zoo_alive "$d" && continue
        log "starting $name"
        "zoo_start_$name"
    done
}

zoo_addr() { echo "$ZOO"; } # name:comm:ports -> address

# Wait (up to SECS in all) until "CHECK ADDRESS PORT" succeeds on every port
# of every "name:...:ports" entry, ADDRESS_OF giving an entry's address. Every
# port that never answers is named (logs in LOGS), and then it fails: the
# tests compare every port of the lab with nmap's view of it.
wait_answering() { # secs check address_of logs entries...
    local check=$2 address_of=$3 logs=$4 deadline=$((SECONDS + $1)) d p addr failed=()
    shift 4
    for d in "$@"; do
        addr=$("$address_of" "$d")
        for p in $(echo "${d##*:}" | tr , ' '); do
            until "$check" "$addr" "$p"; do
                if ((SECONDS >= deadline)); then
                    log "error: ${d%%:*} is not answering on $addr:$p (logs in $logs)"
                    failed+=("${d%%:*}")
                    break
                fi
                sleep 0.5
            done
        done
    done
    [ ${#failed[@]} -eq 0 ] || die "did not come up: ${failed[*]} (logs in $logs; 'scripts/lab.sh status' tells the rest)"
}

zoo_alive() { # name:comm:ports
    local rest=${1#*:}
    pid_alive "$ZOO_DIR/${1%%:*}.pid" "${rest%%:*}"
}

# Wait until every zoo port answers (RabbitMQ and Tomcat take seconds); a
# daemon that does not come up fails the lab, naming it.
zoo_wait() {
    # Generous: a first start on a fresh machine (RabbitMQ, Tomcat) is slow,
    # and a daemon that misses it fails the lab; the wait ends as soon as
    # every port answers.
    local deadline=$((SECONDS + 240))
    wait_answering 240 port_open zoo_addr "$ZOO_DIR" "${ZOO_DAEMONS[@]}"
    # spamd listens long before its children answer (it compiles its rules
    # first): wait until it answers a PING.
    until zoo_spamd_ready; do
        if ((SECONDS >= deadline)); then
            die "did not come up: spamd is not answering PING on $ZOO:783 (logs in $ZOO_DIR)"
        fi
        sleep 0.5
    done
}

zoo_spamd_ready() {
    ip netns exec "$SCAN_NS" timeout 2 bash -c \
        "exec 3<>/dev/tcp/$ZOO/783 && printf 'PING SPAMC/1.5\r\n\r\n' >&3 && head -c 16 <&3" 2>/dev/null |
        grep -q PONG
}

zoo_stop() {
    local d rest
    for d in "${ZOO_DAEMONS[@]}"; do
        rest=${d#*:}
        stop_service "$ZOO_DIR/${d%%:*}.pid" "${rest%%:*}"
    done
    rm -f /tmp/.X77-lock /tmp/.X11-unix/X77
    if head -n 1 "$ZOO_ETC/hosts" 2>/dev/null | grep -q '^# moonscan lab'; then
        rm -f "$ZOO_ETC/hosts" "$ZOO_ETC/resolv.conf"
        rmdir "$ZOO_ETC" "$(dirname "$ZOO_ETC")" 2>/dev/null || true
    fi
}

zoo_status() {
    local d p ok=0
    for d in "${ZOO_DAEMONS[@]}"; do
        for p in $(echo "${d##*:}" | tr , ' '); do
            if port_open "$ZOO" "$p"; then
                echo "port $ZOO:$p (${d%%:*}): open"
            else
                echo "port $ZOO:$p (${d%%:*}): CLOSED"
                ok=1
            fi
        done
    done
    return $ok
}

