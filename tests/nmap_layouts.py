"""Compares the script results of two nmap XML files, nmap's and moonscan's,
as nmap's consumers read them: python-libnmap's `elements` of each script
nmap reported with an id in IDS, and nmap's XPath paths. Prints one line per
difference and exits 1 if there is any; prints what was compared otherwise.

usage: nmap_layouts.py NMAP_XML MOONSCAN_XML ID[,ID...]
"""
import re
import sys
import xml.etree.ElementTree as ET

from libnmap.parser import NmapParser


def scripts(path):
    out = {}
    for h in NmapParser.parse_fromfile(path).hosts:
        for s in h.services:
            for sc in s.scripts_results:
                out[(h.address, s.port, sc["id"])] = sc
    return out


# Values that change between two runs (times, counters, process ids):
# compared by key, not by value; their text lines are masked likewise.
VOLATILE = {
    "redis-info": {"Process ID", "Used CPU (sys)", "Used CPU (user)", "Connected clients", "Used memory"},
    "memcached-info": {"Process ID", "Uptime", "Server time", "Used CPU (user)", "Used CPU (system)",
                       "Current connections", "Total connections"},
    "http-headers": {"Date"},
    # The server's clock, read a few seconds apart (and nmap divides the
    # fraction of a second by 2^28, not 2^32, which puts it up to 16 s late).
    "ntp-info": {"receive time stamp"},
    "rdp-ntlm-info": {"System_Time"},
    # A new id for each stream.
    "xmpp-info": {"stream_id"},
}

# Counters inside text values: masked wherever they appear.
VOLATILE_TEXT = {
    "ftp-syst": [r"client count was \d+"],
    "snmp-sysdescr": [r"System uptime: [0-9dhms.]+ \(\d+ timeticks\)"],
    "rfc868-time": [r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d"],
}

# Scripts whose words nmap prints in the order of a Lua hash table (it
# changes from run to run): the same words, in any order.
UNORDERED_WORDS = {"pop3-capabilities", "imap-capabilities"}

# Scripts whose lines nmap prints in a Lua hash table's order (and moonscan
# by name): the same lines, in any order; the elements are compared as well.
UNORDERED_LINES = {"xmpp-info"}

# mqtt-subscribe's topics are the broker's live $SYS counters: the set
# changes over seconds (Mosquitto publishes $SYS every sys_interval, 10 s,
# some topics only once they changed, so what a listener sees depends on
# when it came) and the values
# always do. The same table, the same broker version, and three quarters
# of the smaller set of topics in the other.
MQTT_TABLE = "Topics and their most recent payloads"


def masked(sid, value):
    """`value` (elements or output text) with the volatile values blanked."""
    keys = VOLATILE.get(sid, set())
    if isinstance(value, str):
        for pattern in VOLATILE_TEXT.get(sid, []):
            value = re.sub(pattern, "*", value)
    if isinstance(value, dict):
        return {k: ("*" if k in keys else masked(sid, v)) for k, v in value.items()}
    if isinstance(value, list):
        return [masked(sid, v) for v in value]
    if isinstance(value, str) and keys:
        lines = []
        for line in value.split("\n"):
            k = line.strip().split(":", 1)[0]
            lines.append(line.split(":", 1)[0] + ": *" if k in keys and ":" in line else line)
        return "\n".join(lines)
    return value


def xpath(path, query):
    return sorted(e.text or "" for e in ET.parse(path).getroot().findall(query))


nmap_xml, ms_xml, ids = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
theirs, mine = scripts(nmap_xml), scripts(ms_xml)
problems, compared = [], 0
for key, sc in sorted(theirs.items()):
    if key[2] not in ids:
        continue
    # nmap reports its own script's failure as a result: nothing to compare.
    if sc["output"].startswith("ERROR: Script execution failed"):
        print(f"{key}: nmap's script failed, not compared")
        continue
    compared += 1
    got = mine.get(key)
    if got is None:
        problems.append(f"{key}: nmap has it, moonscan does not")
        continue
    want, have = masked(key[2], sc.get("elements")), masked(key[2], got.get("elements"))
    if key[2] in UNORDERED_WORDS:
        if sorted(sc["output"].split()) != sorted(got["output"].split()):
            problems.append(f"{key}: words differ:\n  nmap:     {sc['output']!r}\n  moonscan: {got['output']!r}")
        continue
    if key[2] == "mqtt-subscribe":
        a, b = (want or {}).get(MQTT_TABLE, {}), (have or {}).get(MQTT_TABLE, {})
        version = "$SYS/broker/version"
        if a.get(version) != b.get(version) or not b or len(set(a) & set(b)) < 0.75 * min(len(a), len(b)):
            problems.append(f"{key}: topics differ:\n  nmap:     {sorted(a)}\n  moonscan: {sorted(b)}")
        continue
    if key[2] == "ssh-hostkey":
        # nmap 7.93 skips RSA keys of OpenSSH >= 8.8 (it looks for "ssh-rsa"
        # in the server's list): every key nmap shows must be moonscan's.
        # libnmap gives one key-less table as a dict, several as a list.
        listed = lambda keys: keys if isinstance(keys, list) else [keys]
        missing = [k for k in listed(want[None]) if k not in listed(have.get(None, []))]
        if missing:
            problems.append(f"{key}: keys nmap shows and moonscan lacks: {missing}")
    elif want != have:
        problems.append(f"{key}: elements differ:\n  nmap:     {want}\n  moonscan: {have}")
    if key[2] in UNORDERED_LINES:
        if sorted(masked(key[2], sc["output"]).split("\n")) != sorted(masked(key[2], got["output"]).split("\n")):
            problems.append(f"{key}: lines differ:\n  nmap:     {sc['output']!r}\n  moonscan: {got['output']!r}")
    elif key[2] != "ssh-hostkey" and masked(key[2], sc["output"]).strip() != masked(key[2], got["output"]).strip():
        problems.append(f"{key}: output differs:\n  nmap:     {sc['output']!r}\n  moonscan: {got['output']!r}")
# nmap's documented XPath for a certificate's expiry finds the same dates.
q = ".//port/script[@id='ssl-cert']/table[@key='validity']/elem[@key='notAfter']"
if "ssl-cert" in ids:
    a, b = xpath(nmap_xml, q), xpath(ms_xml, q)
    if not a or a != b:
        problems.append(f"XPath {q}: nmap {a}, moonscan {b}")
for p in problems:
    print(p)
# Which of the asked scripts nmap gave no result for (a daemon that did not
# come up shows here by its script's name).
seen = {k[2] for k in theirs}
print(f"scripts nmap reported: {', '.join(sorted(seen & set(ids))) or 'none'}; "
      f"missing: {', '.join(sorted(set(ids) - seen)) or 'none'}")
print(f"compared {compared} script results")
sys.exit(1 if problems or compared == 0 else 0)
