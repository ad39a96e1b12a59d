/* stop.h - the stop request: SIGTERM and SIGINT only set a flag, read at the next step boundary
 * (the trainer all-reduces it, saves, commits and exits 75; docs/reliability.md). */
#ifndef ZT_STOP_H
#define ZT_STOP_H

#include "zerotrain/zerotrain.h"

/* Installs the handlers for SIGTERM and SIGINT in this process: the first signal sets the flag.
 * A second SIGINT ends the process at once with the default action (a user pressing Ctrl-C
 * twice); repeated SIGTERMs are absorbed (preemption machinery often sends TERM to every process
 * of a job as well as to the launcher, which forwards it). */
void zt_stop_install(void);

/* The signal that asked to stop (SIGTERM, SIGINT), or 0. Async-signal-safe. */
int zt_stop_requested(void);

/* "SIGTERM", "SIGKILL", ...: the name of signal sig (a static string; "signal N" past the table). */
const char *zt_signal_name(int sig);

#endif
