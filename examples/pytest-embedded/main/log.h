/* ESP-IDF style log lines: "I (ms) tag: message", the ms counted from boot. */
#ifndef SENSOR_LOG_H
#define SENSOR_LOG_H

void log_boot(void);
void log_line(char level, const char *tag, const char *fmt, ...);

/* The firmware's assert: like ESP-IDF's, it prints the failed expression and reboots. */
#define FW_ASSERT(expr)                                                                      \
    do {                                                                                     \
        if (!(expr)) {                                                                       \
            log_line('E', "assert", "assert failed: %s %s:%d (%s)", __func__, __FILE__,     \
                     __LINE__, #expr);                                                       \
            fw_reboot();                                                                     \
        }                                                                                    \
    } while (0)

void fw_reboot(void);

#endif
