#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

static struct timespec boot_time;

void log_boot(void)
{
    clock_gettime(CLOCK_MONOTONIC, &boot_time);
}

static long since_boot_ms(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - boot_time.tv_sec) * 1000L + (now.tv_nsec - boot_time.tv_nsec) / 1000000L;
}

void log_line(char level, const char *tag, const char *fmt, ...)
{
    va_list args;
    printf("%c (%ld) %s: ", level, since_boot_ms(), tag);
    va_start(args, fmt);
    vprintf(fmt, args);
    va_end(args);
    printf("\n");
    fflush(stdout);
}
