/* bmcctl: the BMC's control utility. State lives in small files under the state directory
 * (-s DIR, default /var/lib/bmcctl), so every call is a fresh process, as over SSH. Replies go
 * to stdout; errors go to stderr as "ERR ..." with exit status 1, usage errors with 2. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fan.h"
#include "sel.h"
#include "sensor.h"

#define VERSION "1.0"
#define PATH_MAX_CHARS 4096
#define VALUE_MAX_CHARS 32

static const char *state_dir = "/var/lib/bmcctl";

static int usage(void)
{
    fputs("usage: bmcctl [-s STATE_DIR] version | power status|on|off | fan get|set <percent>"
          " | sensor temp <raw> | sel list|clear|add <text>\n",
          stderr);
    return 2;
}

static int error(const char *what, const char *detail)
{
    fprintf(stderr, "ERR %s: %s\n", what, detail);
    return 1;
}

static void state_path(char *path, const char *name)
{
    snprintf(path, PATH_MAX_CHARS, "%s/%s", state_dir, name);
}

/* The first line of a state file, or `fallback` when the file does not exist yet. */
static bool read_value(const char *name, char *value, const char *fallback)
{
    char path[PATH_MAX_CHARS];
    state_path(path, name);
    FILE *file = fopen(path, "r");
    if (file == NULL) {
        snprintf(value, VALUE_MAX_CHARS, "%s", fallback);
        return errno == ENOENT;
    }
    bool ok = fgets(value, VALUE_MAX_CHARS, file) != NULL;
    fclose(file);
    value[strcspn(value, "\n")] = '\0';
    return ok;
}

static bool write_value(const char *name, const char *value)
{
    char path[PATH_MAX_CHARS];
    state_path(path, name);
    FILE *file = fopen(path, "w");
    if (file == NULL) {
        return false;
    }
    fprintf(file, "%s\n", value);
    return fclose(file) == 0;
}

/* Decimal, or hex after "0x" (a leading 0 is not octal); all of `text`, at most `max`. */
static bool parse_uint(const char *text, uint32_t max, uint32_t *value)
{
    char *end;
    int base = text[0] == '0' && (text[1] == 'x' || text[1] == 'X') ? 16 : 10;
    errno = 0;
    unsigned long parsed = strtoul(text, &end, base);
    if (text[0] < '0' || text[0] > '9' || *end != '\0' || errno != 0 || parsed > max) {
        return false;
    }
    *value = (uint32_t)parsed;
    return true;
}

static int cmd_power(int argc, char **argv)
{
    char state[VALUE_MAX_CHARS];
    if (argc != 1) {
        return usage();
    }
    if (strcmp(argv[0], "on") == 0 || strcmp(argv[0], "off") == 0) {
        return write_value("power", argv[0]) ? 0 : error("cannot write state", state_dir);
    }
    if (strcmp(argv[0], "status") != 0) {
        return usage();
    }
    if (!read_value("power", state, "off")) {
        return error("cannot read state", state_dir);
    }
    printf("Chassis Power is %s\n", state);
    return 0;
}

static int cmd_fan(int argc, char **argv)
{
    char duty[VALUE_MAX_CHARS];
    uint32_t percent;
    if (argc == 1 && strcmp(argv[0], "get") == 0) {
        if (!read_value("fan_pwm", duty, "0")) {
            return error("cannot read state", state_dir);
        }
        printf("pwm %s/%u\n", duty, FAN_PWM_MAX);
        return 0;
    }
    if (argc != 2 || strcmp(argv[0], "set") != 0) {
        return usage();
    }
    if (!parse_uint(argv[1], 100u, &percent)) {
        return error("percent out of range 0..100", argv[1]);
    }
    snprintf(duty, sizeof duty, "%u", fan_percent_to_duty(percent));
    return write_value("fan_pwm", duty) ? 0 : error("cannot write state", state_dir);
}

static int cmd_sensor(int argc, char **argv)
{
    uint32_t raw;
    if (argc != 2 || strcmp(argv[0], "temp") != 0) {
        return usage();
    }
    if (!parse_uint(argv[1], TMP102_MAX_RAW, &raw)) {
        return error("raw reading out of range 0..0xFFF", argv[1]);
    }
    int32_t value = tmp102_to_decimillidegrees(raw);
    int32_t magnitude = value < 0 ? -value : value;
    printf("%s%d.%04d C\n", value < 0 ? "-" : "", magnitude / 10000, magnitude % 10000);
    return 0;
}

static int cmd_sel(int argc, char **argv)
{
    char path[PATH_MAX_CHARS];
    char text[SEL_TEXT_MAX + 1] = "";
    state_path(path, "sel");
    if (argc == 1 && strcmp(argv[0], "list") == 0) {
        return sel_list(path) ? 0 : error("cannot read the event log", path);
    }
    if (argc == 1 && strcmp(argv[0], "clear") == 0) {
        return sel_clear(path) ? 0 : error("cannot clear the event log", path);
    }
    if (argc < 2 || strcmp(argv[0], "add") != 0) {
        return usage();
    }
    for (int i = 1; i < argc; i++) {
        size_t used = strlen(text);
        snprintf(text + used, sizeof text - used, "%s%s", i > 1 ? " " : "", argv[i]);
    }
    return sel_add(path, text) ? 0 : error("cannot write the event log", path);
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "-s") == 0) {
        state_dir = argv[2];
        argc -= 2;
        argv += 2;
    }
    if (argc < 2) {
        return usage();
    }
    const char *command = argv[1];
    if (strcmp(command, "version") == 0 && argc == 2) {
        puts("bmcctl " VERSION);
        return 0;
    }
    if (strcmp(command, "power") == 0) {
        return cmd_power(argc - 2, argv + 2);
    }
    if (strcmp(command, "fan") == 0) {
        return cmd_fan(argc - 2, argv + 2);
    }
    if (strcmp(command, "sensor") == 0) {
        return cmd_sensor(argc - 2, argv + 2);
    }
    if (strcmp(command, "sel") == 0) {
        return cmd_sel(argc - 2, argv + 2);
    }
    return usage();
}
