#!/usr/bin/env python3
"""nmap_hostscripts.py NMAP.xml MOONSCAN.xml ID[,ID...] [--mask KEY,...]
Compares the <hostscript> result of each script id in both files:
the output text and the structured <elem>/
<table> tree (keys, values, order). Values of the keys named by --mask
(clocks) are compared by shape only (digits replaced by 9). Exit 1 on a
difference."""
import re, sys
import xml.etree.ElementTree as ET

def mask(s, keys):
    for k in keys:
        s = re.sub(r'(%s: )([^\n]*)' % re.escape(k), lambda m: m.group(1) + re.sub(r'\d', '9', m.group(2)), s)
    return s

def tree(e, keys):
    out = []
    for c in e:
        k = c.get('key')
        if c.tag == 'elem':
            v = c.text or ''
            if k in keys:
                v = re.sub(r'\d', '9', v)
            out.append(('elem', k, v))
        elif c.tag == 'table':
            out.append(('table', k, tree(c, keys)))
    return out

def results(path, where):
    r = {}
    for host in ET.parse(path).getroot().iter('host'):
        for s in host.findall(where):
            r[s.get('id')] = s
    return r

nmap_xml, ms_xml, ids = sys.argv[1], sys.argv[2], sys.argv[3].split(',')
keys = sys.argv[5].split(',') if len(sys.argv) > 5 and sys.argv[4] == '--mask' else []
n = results(nmap_xml, './hostscript/script')
m = results(ms_xml, './hostscript/script')
bad = 0
for i in ids:
    if i not in n or i not in m:
        print(f'{i}: missing in {"nmap" if i not in n else "moonscan"}'); bad += 1; continue
    to, tm = mask(n[i].get('output'), keys), mask(m[i].get('output'), keys)
    so, sm = tree(n[i], keys), tree(m[i], keys)
    ok = to == tm and so == sm
    print(f'{i}: text {"match" if to == tm else "DIFFER"}, structure {"match" if so == sm else "DIFFER"}'
          + (f' (masked: {",".join(keys)})' if keys else ''))
    if not ok:
        bad += 1
        print('  nmap:    ', repr(n[i].get('output')), so)
        print('  moonscan:', repr(m[i].get('output')), sm)
sys.exit(1 if bad else 0)
