"""IVRE (PyPI) imports nmap's and moonscan's -oX of the same lab ports with
`ivre scan2db`, each into a TinyDB of its own, and reads them back with
`ivre scancli --json`.

Checks: IVRE keeps every port and every script of moonscan's XML; on the
(host, port, script) results both scanners report, IVRE's parsed data (the
structured fields its handlers build, e.g. ssl-cert's subject, validity and
hashes) is nmap's, except that moonscan's ssh-hostkey may list keys nmap
7.93 drops (the RSA key of OpenSSH >= 8.8). Prints the number of shared
results compared.

Usage: ivre_import.py NMAP_XML MOONSCAN_XML (run with the virtualenv's
python, where `ivre` is installed).
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET


def ivre_import(xml, work):
    """Records IVRE holds after importing `xml` into a fresh TinyDB."""
    os.makedirs(os.path.join(work, "db"))
    conf = os.path.join(work, "ivre.conf")
    with open(conf, "w") as f:
        f.write('DB = "tinydb://%s"\n' % os.path.join(work, "db"))
    env = dict(os.environ, IVRE_CONF=conf)
    ivre = os.path.join(os.path.dirname(sys.executable), "ivre")
    done = subprocess.run([ivre, "scan2db", xml], env=env, capture_output=True, text=True, timeout=300)
    # IVRE logs a handler's exception as a warning and imports the rest:
    # any traceback is a script it could not read.
    if done.returncode != 0 or "Traceback" in done.stderr or "1 results imported" not in done.stderr:
        sys.exit("ivre scan2db %s failed:\n%s" % (xml, done.stderr))
    read = subprocess.run([ivre, "scancli", "--json"], env=env, capture_output=True, text=True, timeout=300)
    if read.returncode != 0:
        sys.exit("ivre scancli failed:\n%s" % read.stderr)
    return [json.loads(line) for line in read.stdout.splitlines() if line.strip()]


def scripts(records):
    return {
        (h["addr"], p["protocol"], p["port"], s["id"]): s
        for h in records
        for p in h.get("ports", [])
        for s in p.get("scripts", [])
    }


def xml_results(path):
    """(address, protocol, port, script id) of every script in an -oX file."""
    out = set()
    for host in ET.parse(path).getroot().iter("host"):
        addr = host.find("address").get("addr")
        for port in host.iter("port"):
            for s in port.iter("script"):
                out.add((addr, port.get("protocol"), int(port.get("portid")), s.get("id")))
    return out


def main():
    theirs_xml, mine_xml = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as work:
        theirs = ivre_import(theirs_xml, os.path.join(work, "nmap"))
        mine = ivre_import(mine_xml, os.path.join(work, "moonscan"))
    errors = []
    want = xml_results(mine_xml)
    got = scripts(mine)
    # Script ids IVRE drops from nmap's own XML too (ssl-date's "TLS
    # randomness does not represent time") are not expected from moonscan's.
    nmaps_ids = {k[3] for k in xml_results(theirs_xml)}
    kept_ids = {k[3] for k in scripts(theirs)}
    for k in sorted(want - set(got)):
        if k[3] in nmaps_ids and k[3] not in kept_ids:
            continue
        errors.append("IVRE lost %s" % (k,))
    ports = {(h["addr"], p["protocol"], p["port"]) for h in mine for p in h.get("ports", [])}
    for h in ET.parse(mine_xml).getroot().iter("host"):
        addr = h.find("address").get("addr")
        for p in h.iter("port"):
            if p.find("state").get("state") == "open" and (addr, p.get("protocol"), int(p.get("portid"))) not in ports:
                errors.append("IVRE lost port %s %s" % (addr, p.get("portid")))
    nmaps = scripts(theirs)
    shared = sorted(set(nmaps) & set(got))
    for k in shared:
        a = {x: y for x, y in nmaps[k].items() if x != "output"}
        b = {x: y for x, y in got[k].items() if x != "output"}
        # Counters that change between two connections.
        a, b = (json.loads(re.sub(r"client count was \d+", "*", json.dumps(d))) for d in (a, b))
        if k[3] == "ssh-hostkey":
            extra = [key for key in b.get("ssh-hostkey", []) if key not in a.get("ssh-hostkey", [])]
            b["ssh-hostkey"] = [key for key in b.get("ssh-hostkey", []) if key not in extra]
            a["ssh-hostkey"] = sorted(a.get("ssh-hostkey", []), key=lambda key: key["fingerprint"])
            b["ssh-hostkey"] = sorted(b["ssh-hostkey"], key=lambda key: key["fingerprint"])
        if k[3] == "http-git":
            # nmap lists the files it found in Lua hash-table order, which
            # changes from run to run; moonscan in a fixed one.
            for d in (a, b):
                for repo in d.get("http-git", []):
                    repo["files-found"] = sorted(repo.get("files-found", []))
        if a != b:
            errors.append("%s: IVRE read\n  nmap:     %s\n  moonscan: %s" % (k, json.dumps(a)[:2000], json.dumps(b)[:2000]))
    # Services as IVRE stores them, on the open ports both report.
    def services(records):
        return {
            (h["addr"], p["protocol"], p["port"]): (p.get("service_name"), p.get("service_product"))
            for h in records
            for p in h.get("ports", [])
            if p.get("state_state") == "open"
        }

    ns, ms = services(theirs), services(mine)
    for k in sorted(set(ns) & set(ms)):
        # nmap names some services moonscan's probes do not (and the other way).
        if ns[k][1] and ms[k][1] and ns[k] != ms[k]:
            errors.append("%s: service %s in nmap's, %s in moonscan's" % (k, ns[k], ms[k]))
    if errors:
        sys.exit("\n".join(errors))
    print("IVRE imported %d moonscan results; %d shared with nmap read the same" % (len(want), len(shared)))


main()
