// Runs a command under what examples/systemd/huddle.service asks of systemd, as far as a process can
// do it to itself: NoNewPrivileges, MemoryDenyWriteExecute (PR_SET_MDWE), RestrictAddressFamilies
// (socket() of other families fails EAFNOSUPPORT) and SystemCallFilter=@system-service ~@privileged
// (any other system call kills the process: stricter than the unit's EPERM, so nothing is missed).
// env: NETLINK=0 leaves AF_NETLINK out; FILTER=0 skips the system-call allow list; ALLOWED=FILE.nrs
// (from allowed_syscalls.py); ACTION=eperm fails a call outside the list with EPERM, as the unit does.
//
//   python3 scripts/systemd-sandbox/allowed_syscalls.py /tmp/allowed
//   gcc -O2 -o /tmp/sandbox scripts/systemd-sandbox/sandbox.c
//   printf '#!/bin/sh\nALLOWED=/tmp/allowed.nrs ACTION=eperm exec /tmp/sandbox %s/.build/release/huddle "$@"\n' "$PWD" > /tmp/huddle-sandboxed
//   chmod +x /tmp/huddle-sandboxed
//   HUDDLE_BIN=/tmp/huddle-sandboxed swift test -c release -Xswiftc -enable-testing --skip-build --filter 'SystemdNotifyProcessTests|RestartProcessTests|AttachmentProcessTests'
//
// Running as root, SQLite calls fchown (in @chown, so outside the list) on its WAL files: ACTION=eperm
// is then needed (SQLite ignores the failure); as the unit's user huddle it never calls it.
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#ifndef PR_SET_MDWE
#define PR_SET_MDWE 65
#define PR_MDWE_REFUSE_EXEC_GAIN 1
#endif
static struct sock_filter prog[4096];
static int n;
static void add(struct sock_filter f) { prog[n++] = f; }
static int install(void) {
    struct sock_fprog p = { .len = (unsigned short)n, .filter = prog };
    return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &p);
}
int main(int argc, char **argv) {
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) { perror("no_new_privs"); return 1; }
    if (prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0)) { perror("mdwe"); return 1; }
    int netlink = !getenv("NETLINK") || strcmp(getenv("NETLINK"), "0");
    // Address families.
    n = 0;
    add((struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
    add((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_socket, 1, 0));
    add((struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    add((struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])));
    add((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_UNIX, 4, 0));
    add((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET, 3, 0));
    add((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET6, 2, 0));
    add((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, netlink ? AF_NETLINK : AF_UNIX, 1, 0));
    add((struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EAFNOSUPPORT));
    add((struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    if (install()) { perror("seccomp families"); return 1; }
    if (!getenv("FILTER") || strcmp(getenv("FILTER"), "0")) {
        FILE *f = fopen(getenv("ALLOWED") ? getenv("ALLOWED") : "/tmp/allowed.nrs", "r");
        if (!f) { perror("allowed.nrs"); return 1; }
        int nrs[1024], count = 0, x;
        while (count < 1024 && fscanf(f, "%d", &x) == 1) nrs[count++] = x;
        fclose(f);
        n = 0;
        add((struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)));
        add((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0));
        add((struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
        add((struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
        // execve itself must pass (the exec of the node below).
        for (int i = 0; i < count; i++) add((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nrs[i], (unsigned char)(count - i), 0));
        add((struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
        add((struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
        if (count > 250) {
            // Jump offsets are 8 bits: chain in blocks instead.
            n = 4;
            for (int i = 0; i < count; i++) {
                add((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nrs[i], 0, 1));
                add((struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
            }
            // ACTION=eperm: what the unit does (SystemCallErrorNumber=EPERM); else kill, to see every one.
            add((struct sock_filter)BPF_STMT(BPF_RET | BPF_K, getenv("ACTION") && !strcmp(getenv("ACTION"), "eperm") ? (SECCOMP_RET_ERRNO | EPERM) : SECCOMP_RET_KILL_PROCESS));
        }
        if (install()) { perror("seccomp syscalls"); return 1; }
    }
    execv(argv[1], argv + 1);
    perror("execv");
    return 127;
}
