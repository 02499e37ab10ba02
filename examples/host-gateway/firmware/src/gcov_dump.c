/* The loop's coverage build only (fwloop_c_coverage = gcov, which adds FWLOOP_CFLAGS):
 * SIGUSR1 writes the counts so far and starts them again, so the loop can tell which code
 * each test ran although the firmware lives across the tests of a module. */
#ifdef FWLOOP_GCOV
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stddef.h>

extern void __gcov_dump(void);
extern void __gcov_reset(void);

static void dump_counts(int signo)
{
    (void)signo;
    __gcov_dump();
    __gcov_reset();
}

/* sigaction, not signal(): under -std=c11 signal() installs a handler that runs once. */
__attribute__((constructor)) static void install_dump_handler(void)
{
    struct sigaction action = {0};
    action.sa_handler = dump_counts;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    sigaction(SIGUSR1, &action, NULL);
}
#else
typedef int gcov_dump_unused; /* ISO C wants a translation unit to hold something */
#endif
