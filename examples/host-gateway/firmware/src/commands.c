/* The console's commands: one line in, one reply line out. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "gateway.h"

#define MAX_WORDS 70
#define MAX_BYTES CONSOLE_MAX_BYTES

static const char *const weekdays[7] = {"mon", "tue", "wed", "thu", "fri", "sat", "sun"};

void reply(const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vprintf(format, args);
    va_end(args);
    putchar('\n');
    fflush(stdout);
}

void usage(const char *what)
{
    reply("ERR usage: %s", what);
}

/* words[1..n-1] joined back with single spaces, as hex byte groups are written. */
bool bytes_of(char **words, size_t n, uint8_t *bytes, size_t *len)
{
    char joined[256] = "";
    for (size_t i = 1; i < n; i++) {
        if (strlen(joined) + strlen(words[i]) + 2 > sizeof joined) {
            return false;
        }
        strcat(joined, words[i]);
        strcat(joined, " ");
    }
    bool ok = true;
    *len = parse_hex_bytes(joined, bytes, MAX_BYTES, &ok);
    return ok;
}

bool numbers_of(char **words, size_t n, long *values, size_t *count)
{
    *count = 0;
    for (size_t i = 1; i < n; i++) {
        if (!parse_long(words[i], &values[*count])) {
            return false;
        }
        (*count)++;
    }
    return *count > 0;
}

void reply_hex(const uint8_t *data, size_t len)
{
    char text[2 * MAX_BYTES + 1];
    format_hex(data, len, text, sizeof text);
    reply("%s", text);
}

/* The line after the command word as it was typed: split_words put a NUL over each blank
 * between the words, which go back as spaces (a tab reads back as a space). */
char *rest_of_line(char **words, size_t n)
{
    if (n < 2) {
        return words[0] + strlen(words[0]);
    }
    char *end = words[n - 1] + strlen(words[n - 1]);
    for (char *at = words[1]; at < end; at++) {
        if (*at == '\0') {
            *at = ' ';
        }
    }
    return words[1];
}

void reply_line_init(struct reply_line *line)
{
    line->text[0] = '\0';
    line->len = 0;
    line->dropped = 0;
}

/* One more piece, after a space; a piece that does not fit whole is counted, not cut. */
void reply_line_add(struct reply_line *line, const char *format, ...)
{
    char piece[2 * SLIP_FRAME_MAX + 32]; /* a whole SLIP frame in hex, as slipfeed adds it */
    va_list args;
    va_start(args, format);
    int written = vsnprintf(piece, sizeof piece, format, args);
    va_end(args);
    size_t len = written < 0 ? 0 : (size_t)written;
    size_t space = line->len > 0 ? 1 : 0;
    /* a dropped piece leaves room for the " +N more" the reply ends with */
    if (len >= sizeof piece || line->dropped > 0 ||
        line->len + space + len + 16 > sizeof line->text) {
        line->dropped++;
        return;
    }
    if (space) {
        line->text[line->len++] = ' ';
    }
    memcpy(line->text + line->len, piece, len + 1);
    line->len += len;
}

void reply_line_send(const struct reply_line *line)
{
    if (line->dropped > 0) {
        reply("%s%s+%zu more", line->text, line->len > 0 ? " " : "", line->dropped);
    } else {
        reply("%s", line->text);
    }
}

static void cmd_crc(char **words, size_t n)
{
    uint8_t bytes[MAX_BYTES];
    size_t len = 0;
    if (n < 2 || !bytes_of(words, n, bytes, &len)) {
        usage("crc8|crc16|crc32 HEX...");
        return;
    }
    if (strcmp(words[0], "crc8") == 0) {
        reply("%02x", crc8_atm(bytes, len));
    } else if (strcmp(words[0], "crc16") == 0) {
        reply("%04x", crc16_ccitt(bytes, len));
    } else {
        reply("%08lx", (unsigned long)crc32_ieee(bytes, len));
    }
}

static void cmd_b64(char **words, size_t n)
{
    if (n != 2) {
        usage("b64enc TEXT | b64dec B64");
        return;
    }
    if (strcmp(words[0], "b64enc") == 0) {
        char out[200];
        base64_encode((const uint8_t *)words[1], strlen(words[1]), out, sizeof out);
        reply("%s", out);
        return;
    }
    uint8_t out[150];
    bool ok = true;
    size_t len = base64_decode(words[1], out, sizeof out - 1, &ok);
    if (!ok) {
        reply("ERR bad base64");
        return;
    }
    out[len] = '\0';
    reply("%s", (const char *)out);
}

static void cmd_cobs(char **words, size_t n)
{
    uint8_t bytes[MAX_BYTES];
    uint8_t out[MAX_BYTES + 4];
    char text[2 * sizeof out + 1];
    size_t len = 0;
    bool ok = true;
    if (n < 2 || !bytes_of(words, n, bytes, &len)) {
        usage("cobs|uncobs HEX...");
        return;
    }
    size_t done = strcmp(words[0], "cobs") == 0
                      ? cobs_encode(bytes, len, out, sizeof out)
                      : cobs_decode(bytes, len, out, sizeof out, &ok);
    if (!ok) {
        reply("ERR bad frame");
        return;
    }
    format_hex(out, done, text, sizeof text);
    reply("%s", text);
}

static void cmd_fixed(char **words, size_t n)
{
    q16_t a = 0;
    q16_t b = 0;
    char text[32];
    bool ok = true;
    bool binary = strcmp(words[0], "fsqrt") != 0;
    if (n != (binary ? 3u : 2u) || !q16_parse(words[1], &a) || (binary && !q16_parse(words[2], &b))) {
        usage("fmul A B | fdiv A B | fsqrt A");
        return;
    }
    q16_t result = 0;
    if (strcmp(words[0], "fmul") == 0) {
        result = q16_mul(a, b);
    } else if (strcmp(words[0], "fdiv") == 0) {
        result = q16_div(a, b, &ok);
    } else {
        result = q16_sqrt(a);
    }
    if (!ok) {
        reply("ERR division by zero");
        return;
    }
    q16_format(result, text, sizeof text);
    reply("%s", text);
}

static void cmd_stats(char **words, size_t n)
{
    long values[MAX_WORDS];
    size_t count = 0;
    char text[32];
    if (!numbers_of(words, n, values, &count)) {
        usage("min|max|mean|median|stddev N...");
        return;
    }
    if (strcmp(words[0], "min") == 0) {
        reply("%ld", stats_min(values, count));
        return;
    }
    if (strcmp(words[0], "max") == 0) {
        reply("%ld", stats_max(values, count));
        return;
    }
    q16_t result = strcmp(words[0], "mean") == 0     ? stats_mean(values, count)
                   : strcmp(words[0], "median") == 0 ? stats_median(values, count)
                                                     : stats_stddev(values, count);
    q16_format(result, text, sizeof text);
    reply("%s", text);
}

static void cmd_sort(char **words, size_t n)
{
    long values[MAX_WORDS];
    size_t count = 0;
    char text[512] = "";
    if (!numbers_of(words, n, values, &count)) {
        usage("sort N...");
        return;
    }
    sort_values(values, count);
    for (size_t i = 0; i < count; i++) {
        char one[24];
        snprintf(one, sizeof one, i == 0 ? "%ld" : " %ld", values[i]);
        strncat(text, one, sizeof text - strlen(text) - 1);
    }
    reply("%s", text);
}

static void cmd_date(char **words, size_t n)
{
    struct civil_date date;
    char text[16];
    if (n < 2 || !parse_date(words[1], &date)) {
        usage("weekday|yday|epoch DATE | adddays DATE N");
        return;
    }
    if (strcmp(words[0], "weekday") == 0 && n == 2) {
        reply("%s", weekdays[date_weekday(&date)]);
    } else if (strcmp(words[0], "yday") == 0 && n == 2) {
        reply("%d", day_of_year(&date));
    } else if (strcmp(words[0], "epoch") == 0 && n == 2) {
        reply("%ld", days_since_epoch(&date));
    } else if (strcmp(words[0], "adddays") == 0 && n == 3) {
        long days = 0;
        if (!parse_long(words[2], &days)) {
            usage("adddays DATE N");
            return;
        }
        struct civil_date later = date_from_days(days_since_epoch(&date) + days);
        format_date(&later, text, sizeof text);
        reply("%s", text);
    } else {
        usage("weekday|yday|epoch DATE | adddays DATE N");
    }
}

static void cmd_bits(char **words, size_t n)
{
    uint32_t x = 0;
    if (n != 2 || !parse_u32(words[1], &x)) {
        usage("popcount|parity|clz|rev8|rev32 X");
        return;
    }
    if (strcmp(words[0], "popcount") == 0) {
        reply("%d", bits_popcount(x));
    } else if (strcmp(words[0], "parity") == 0) {
        reply("%d", bits_parity(x));
    } else if (strcmp(words[0], "clz") == 0) {
        reply("%d", bits_clz(x));
    } else if (strcmp(words[0], "rev8") == 0) {
        reply("0x%02x", bits_reverse8((uint8_t)x));
    } else {
        reply("0x%08lx", (unsigned long)bits_reverse32(x));
    }
}

static void cmd_kv(char **words, size_t n)
{
    if (strcmp(words[0], "set") == 0 && n == 3) {
        reply(kv_set(words[1], words[2]) ? "OK" : "ERR full");
    } else if (strcmp(words[0], "get") == 0 && n == 2) {
        const char *value = kv_get(words[1]);
        reply("%s", value != NULL ? value : "ERR no such key");
    } else if (strcmp(words[0], "del") == 0 && n == 2) {
        reply(kv_delete(words[1]) ? "OK" : "ERR no such key");
    } else if (strcmp(words[0], "keys") == 0 && n == 1) {
        reply("%zu", kv_count());
    } else if (strcmp(words[0], "wipe") == 0 && n == 1) {
        kv_clear();
        reply("OK");
    } else {
        usage("set K V | get K | del K | keys | wipe");
    }
}

static void cmd_queue(char **words, size_t n)
{
    long value = 0;
    if (strcmp(words[0], "push") == 0 && n == 2 && parse_long(words[1], &value)) {
        reply(ring_push(value) ? "OK" : "ERR queue full");
    } else if (strcmp(words[0], "pop") == 0 && n == 1) {
        if (ring_pop(&value)) {
            reply("%ld", value);
        } else {
            reply("ERR queue empty");
        }
    } else if (strcmp(words[0], "qlen") == 0 && n == 1) {
        reply("%zu", ring_length());
    } else if (strcmp(words[0], "qclear") == 0 && n == 1) {
        ring_clear();
        reply("OK");
    } else {
        usage("push N | pop | qlen | qclear");
    }
}

static void cmd_smooth(char **words, size_t n)
{
    long values[MAX_WORDS];
    q16_t out[MAX_WORDS];
    size_t count = 0;
    long window = 0;
    char text[600] = "";
    if (n < 3 || !parse_long(words[1], &window) || window < 1 ||
        !numbers_of(words + 1, n - 1, values, &count)) {
        usage("movavg WINDOW N...");
        return;
    }
    moving_average(values, count, (size_t)window, out);
    for (size_t i = 0; i < count; i++) {
        char one[24];
        q16_format(out[i], one, sizeof one);
        if (i > 0) {
            strncat(text, " ", sizeof text - strlen(text) - 1);
        }
        strncat(text, one, sizeof text - strlen(text) - 1);
    }
    reply("%s", text);
}

static void cmd_ema(char **words, size_t n)
{
    q16_t alpha = 0;
    q16_t value = 0;
    char text[32];
    if (n < 3 || !q16_parse(words[1], &alpha)) {
        usage("ema ALPHA X...");
        return;
    }
    for (size_t i = 2; i < n; i++) {
        q16_t sample = 0;
        if (!q16_parse(words[i], &sample)) {
            usage("ema ALPHA X...");
            return;
        }
        value = i == 2 ? sample : ema_step(value, sample, alpha);
    }
    q16_format(value, text, sizeof text);
    reply("%s", text);
}

static void cmd_pid(char **words, size_t n)
{
    q16_t k[4];
    struct pid_state pid;
    char text[600] = "";
    if (n < 6) {
        usage("pid KP KI KD SETPOINT X...");
        return;
    }
    for (size_t i = 0; i < 4; i++) {
        if (!q16_parse(words[i + 1], &k[i])) {
            usage("pid KP KI KD SETPOINT X...");
            return;
        }
    }
    pid_init(&pid, k[0], k[1], k[2]);
    for (size_t i = 5; i < n; i++) {
        q16_t measured = 0;
        char one[24];
        if (!q16_parse(words[i], &measured)) {
            usage("pid KP KI KD SETPOINT X...");
            return;
        }
        q16_format(pid_update(&pid, k[3], measured), one, sizeof one);
        if (i > 5) {
            strncat(text, " ", sizeof text - strlen(text) - 1);
        }
        strncat(text, one, sizeof text - strlen(text) - 1);
    }
    reply("%s", text);
}

static void cmd_utf8(char **words, size_t n)
{
    uint8_t bytes[MAX_BYTES];
    size_t len = 0;
    if (n < 2 || !bytes_of(words, n, bytes, &len)) {
        usage("utf8len HEX...");
        return;
    }
    long points = utf8_codepoints(bytes, len);
    if (points < 0) {
        reply("ERR not utf-8");
    } else {
        reply("%ld", points);
    }
}

static void cmd_text(char **words, size_t n)
{
    if (n < 2) {
        usage("upper WORD...");
        return;
    }
    char text[256] = "";
    for (size_t i = 1; i < n; i++) {
        to_upper(words[i]);
        if (i > 1) {
            strncat(text, " ", sizeof text - strlen(text) - 1);
        }
        strncat(text, words[i], sizeof text - strlen(text) - 1);
    }
    reply("%s", text);
}

static void cmd_version(char **words, size_t n)
{
    (void)words;
    (void)n;
    reply("GATEWAY 2.4.1");
}

struct command {
    const char *name;
    void (*run)(char **words, size_t n);
};

static const struct command table[] = {
    {"version", cmd_version}, {"crc8", cmd_crc},       {"crc16", cmd_crc},
    {"crc32", cmd_crc},       {"b64enc", cmd_b64},     {"b64dec", cmd_b64},
    {"cobs", cmd_cobs},       {"uncobs", cmd_cobs},    {"fmul", cmd_fixed},
    {"fdiv", cmd_fixed},      {"fsqrt", cmd_fixed},    {"min", cmd_stats},
    {"max", cmd_stats},       {"mean", cmd_stats},     {"median", cmd_stats},
    {"stddev", cmd_stats},    {"sort", cmd_sort},      {"weekday", cmd_date},
    {"yday", cmd_date},       {"epoch", cmd_date},     {"adddays", cmd_date},
    {"popcount", cmd_bits},   {"parity", cmd_bits},    {"clz", cmd_bits},
    {"rev8", cmd_bits},       {"rev32", cmd_bits},     {"set", cmd_kv},
    {"get", cmd_kv},          {"del", cmd_kv},         {"keys", cmd_kv},
    {"wipe", cmd_kv},         {"push", cmd_queue},     {"pop", cmd_queue},
    {"qlen", cmd_queue},      {"qclear", cmd_queue},   {"movavg", cmd_smooth},
    {"ema", cmd_ema},         {"pid", cmd_pid},        {"utf8len", cmd_utf8},
    {"upper", cmd_text},
};

void commands_execute(char *line)
{
    char *words[MAX_WORDS];
    size_t n = split_words(line, words, MAX_WORDS);
    if (n == 0) {
        return;
    }
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcmp(words[0], table[i].name) == 0) {
            table[i].run(words, n);
            return;
        }
    }
    if (commands_links_execute(words, n) || commands_services_execute(words, n)) {
        return;
    }
    reply("ERR unknown command: %s", words[0]);
}
