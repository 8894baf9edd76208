#!/usr/bin/env python3
"""Relay → direct times of the 5-host reach lab's easy pair (hosts b and c), from the node logs
that HUDDLE_LAB_LOGS=DIR keeps (Tests/hosts/HostLab.swift), one set per lab run:

    HUDDLE_LAB_LOGS=/tmp/labs .build/release/HuddlePackageTests.xctest --testing-library swift-testing \
        --filter fiveHostsBehindPublicEasyAndHardRoutersFormOneSession      # as many times as wanted
    scripts/reach-upgrade-times.py /tmp/labs

Per run: from both members known (each logged the other `joined`) and from the first `path relayed`
at either end, to `path direct` at both ends; the first punch dial; and when each end saw the
other's record change (`updated`, with its reach addresses). Then the medians and maxima."""
import sys, re, glob, os
from datetime import datetime

def t(line):
    s = line.split(' ', 1)[0].rstrip('Z')
    h, m, rest = s.split(':')
    return int(h) * 3600 + int(m) * 60 + float(rest)

def events(path, other):
    out = {'joined': None, 'relayed': None, 'direct': [], 'punched': [], 'updated': []}
    for line in open(path, errors='replace'):
        if f'({other} at ' in line and line.rstrip().endswith(' joined') and out['joined'] is None: out['joined'] = t(line)
        elif f'({other}) path: path relayed' in line and out['relayed'] is None: out['relayed'] = t(line)
        elif f'({other}) path: path direct' in line: out['direct'].append(t(line))
        elif f'({other}) updated' in line: out['updated'].append((t(line), line.split('reach', 1)[-1].strip()))
        elif 'punched through' in line: out['punched'].append(t(line))
    return out

d = sys.argv[1]
tags = sorted({os.path.basename(p).rsplit('-', 1)[0] for p in glob.glob(f'{d}/*-b.log')})
rows = []
for tag in tags:
    b, c = f'{d}/{tag}-b.log', f'{d}/{tag}-c.log'
    if not os.path.exists(c): continue
    eb, ec = events(b, 'c'), events(c, 'b')
    if None in (eb['joined'], ec['joined']) or (eb['relayed'] is None and ec['relayed'] is None):
        print(tag, 'incomplete', eb, ec); continue
    known = max(eb['joined'], ec['joined'])
    relayed = min(x for x in (eb['relayed'], ec['relayed']) if x is not None)
    ends = []
    for e in (eb, ec):
        after = [x for x in e['direct'] if x > relayed]
        ends.append(after[0] if after else None)
    if None in ends: print(tag, 'no direct', eb, ec); continue
    direct = max(ends)
    punched = sorted(eb['punched'] + ec['punched'])
    rows.append((tag, direct - known, direct - relayed))
    print(f'{tag}: known→direct {direct-known:.2f} s, relayed→direct {direct-relayed:.2f} s; relayed at +{relayed-known:.2f} s after known; '
          f'first punch dial +{(punched[0]-relayed) if punched else float("nan"):.2f} s after relayed; '
          f'b saw c updated at {[round(x-relayed,2) for x,_ in eb["updated"]]}, c saw b updated at {[round(x-relayed,2) for x,_ in ec["updated"]]} (s after relayed)')
if rows:
    k = sorted(r[1] for r in rows); r = sorted(r[2] for r in rows)
    print(f'{len(rows)} runs: known→direct median {k[len(k)//2]:.2f} max {k[-1]:.2f}; relayed→direct median {r[len(r)//2]:.2f} max {r[-1]:.2f}')
