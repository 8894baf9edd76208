#ifndef CHUDDLESYSTEM_H
#define CHUDDLESYSTEM_H

/// Marks this process not dumpable (prctl PR_SET_DUMPABLE 0): no core dump, and /proc/PID files
/// such as mem and environ become root's, so a crash or another process of the same user cannot
/// copy keys out of memory. prctl is variadic, which Swift cannot call; hence this shim.
/// Returns 0, or -1 with errno set.
int huddle_set_not_dumpable(void);

/// PR_GET_DUMPABLE for this process: 1 dumpable, 0 not.
int huddle_is_dumpable(void);

/// Linux's struct ucred (SO_PEERCRED), which glibc declares only under _GNU_SOURCE; process.c
/// checks the layout is the same.
struct huddle_peer_credentials {
    int pid;
    unsigned int uid;
    unsigned int gid;
};

#endif
