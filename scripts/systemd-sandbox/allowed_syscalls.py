#!/usr/bin/env python3
# Writes OUT.names and OUT.nrs: the system calls examples/systemd/huddle.service allows
# (SystemCallFilter=@system-service minus @privileged), by name and by x86-64 number, from this
# machine's `systemd-analyze syscall-filter` and <asm/unistd_64.h>. Usage: allowed_syscalls.py OUT
import subprocess,re,sys
out=subprocess.run(['systemd-analyze','syscall-filter'],capture_output=True,text=True).stdout
groups={};cur=None
for line in out.splitlines():
    if line.startswith('@'): cur=line.strip(); groups[cur]=[]
    elif cur and line.strip() and not line.strip().startswith('#'): groups[cur].append(line.strip())
def exp(g,seen=None):
    r=set()
    for m in groups[g]:
        if m.startswith('@'): r|=exp(m)
        else: r.add(m)
    return r
allow=exp('@system-service')-exp('@privileged')
nrs={}
for l in open('/usr/include/x86_64-linux-gnu/asm/unistd_64.h'):
    m=re.match(r'#define __NR_(\w+) (\d+)',l)
    if m: nrs[m.group(1)]=int(m.group(2))
open(sys.argv[1] + '.names','w').write('\n'.join(sorted(allow))+'\n')
open(sys.argv[1] + '.nrs','w').write('\n'.join(str(nrs[n]) for n in sorted(allow) if n in nrs)+'\n')
print(len(allow), sum(1 for n in allow if n in nrs))
