/* The sensor hub's console: ESP-IDF's boot log, then one command per line on the UART. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "filter.h"
#include "log.h"
#include "tmp36.h"

#define LINE_MAX 128

static void boot(void)
{
    log_boot();
    log_line('I', "boot", "sensor-hub stand-in v1.0 (ESP-IDF style log)");
    log_line('I', "boot", "chip revision: v0.0, flash 4MB");
    log_line('I', "filter", "moving average over %d samples", FILTER_WINDOW);
    filter_reset();
    log_line('I', "main_task", "Calling app_main()");
    printf("sensor> ");
    fflush(stdout);
}

void fw_reboot(void)
{
    log_line('E', "system", "abort() was called; rebooting...");
    boot();
}

static void command(char *line)
{
    char *name = strtok(line, " \t");
    char *arg = strtok(NULL, " \t");
    if (name == NULL) {
        return;
    }
    if (strcmp(name, "temp") == 0 && arg != NULL) {
        char text[16];
        tmp36_format(tmp36_decidegrees(atoi(arg)), text, sizeof text);
        printf("temp = %s C\n", text);
    } else if (strcmp(name, "filt") == 0 && arg != NULL) {
        printf("filt = %d\n", filter_push(atoi(arg)));
    } else if (strcmp(name, "reset") == 0) {
        filter_reset();
        printf("OK\n");
    } else {
        printf("ERR unknown command: %s\n", name);
    }
}

int main(void)
{
    char line[LINE_MAX];
    boot();
    while (fgets(line, sizeof line, stdin) != NULL) {
        line[strcspn(line, "\r\n")] = '\0';
        command(line);
        printf("sensor> ");
        fflush(stdout);
    }
    return 0;
}
