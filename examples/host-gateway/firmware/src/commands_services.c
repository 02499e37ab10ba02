/* The console's commands of the gateway's services: the event log, the uplink's rate
 * limiter, the task scheduler, the settings file and the settings records in flash, the
 * conditioning of the inputs, and the quoted-argument tokenizer. */
#include <string.h>

#include "gateway.h"

#define MAX_BYTES CONSOLE_MAX_BYTES
#define MAX_SAMPLES 64

static bool number_upto(const char *text, uint32_t limit, uint32_t *value)
{
    return parse_u32(text, value) && *value <= limit;
}

static void cmd_logadd(char **words, size_t n)
{
    uint32_t time = 0;
    uint32_t code = 0;
    long value = 0;
    uint32_t seq = 0;
    if (n != 4 || !parse_u32(words[1], &time) || !number_upto(words[2], 0xFFFF, &code) ||
        !parse_long(words[3], &value) || value < INT32_MIN || value > INT32_MAX) {
        usage("logadd TIME CODE VALUE");
        return;
    }
    if (!evlog_append(time, (uint16_t)code, (int32_t)value, &seq)) {
        reply("ERR time before the last event");
        return;
    }
    reply("OK %lu", (unsigned long)seq);
}

static void cmd_logrange(char **words, size_t n)
{
    uint32_t from = 0;
    uint32_t to = 0;
    size_t first = 0;
    struct reply_line line;
    if (n != 3 || !parse_u32(words[1], &from) || !parse_u32(words[2], &to)) {
        usage("logcount|logrange FROM TO");
        return;
    }
    size_t count = evlog_range(from, to, &first);
    if (strcmp(words[0], "logcount") == 0) {
        reply("%zu", count);
        return;
    }
    if (count == 0) {
        reply("none");
        return;
    }
    reply_line_init(&line);
    for (size_t i = first; i < first + count; i++) {
        const struct event_record *record = evlog_at(i);
        reply_line_add(&line, "#%lu@%lu", (unsigned long)record->seq, (unsigned long)record->time);
    }
    reply_line_send(&line);
}

static void cmd_log(char **words, size_t n)
{
    uint32_t seq = 0;
    if (strcmp(words[0], "logget") == 0 && n == 2 && parse_u32(words[1], &seq)) {
        bool gone = false;
        const struct event_record *record = evlog_find(seq, &gone);
        if (record == NULL) {
            reply(gone ? "ERR overwritten" : "ERR no such event");
        } else {
            reply("time %lu code %u value %ld", (unsigned long)record->time, record->code,
                  (long)record->value);
        }
    } else if (strcmp(words[0], "loginfo") == 0 && n == 1) {
        size_t count = evlog_count();
        if (count == 0) {
            reply("count 0 overwritten %lu", (unsigned long)evlog_overwritten());
            return;
        }
        reply("count %zu overwritten %lu first #%lu last #%lu", count,
              (unsigned long)evlog_overwritten(), (unsigned long)evlog_at(0)->seq,
              (unsigned long)evlog_at(count - 1)->seq);
    } else if (strcmp(words[0], "logclear") == 0 && n == 1) {
        evlog_clear();
        reply("OK");
    } else {
        usage("logget SEQ | loginfo | logclear");
    }
}

static struct token_bucket uplink;

static void reply_tokens(const char *prefix, uint32_t milli)
{
    reply("%s%lu.%03lu", prefix, (unsigned long)(milli / 1000), (unsigned long)(milli % 1000));
}

static void cmd_bucket(char **words, size_t n)
{
    uint32_t a = 0;
    uint32_t b = 0;
    uint32_t now = 0;
    if (strcmp(words[0], "tbinit") == 0 && (n == 3 || n == 4) && parse_u32(words[1], &a) &&
        parse_u32(words[2], &b) && (n == 3 || parse_u32(words[3], &now))) {
        tb_init(&uplink, a, b, now);
        reply("OK");
        return;
    }
    if (strcmp(words[0], "tbinit") == 0 || n < 2 || n > 3 || !parse_u32(words[1], &now)) {
        usage("tbinit TOKENS PER_SECOND [NOW] | tbtake|tbwait NOW [COST] | tblevel NOW");
        return;
    }
    uint32_t cost = 1;
    if (n == 3 && !parse_u32(words[2], &cost)) {
        usage("tbtake|tbwait NOW [COST]");
        return;
    }
    if (strcmp(words[0], "tblevel") == 0 && n == 2) {
        reply_tokens("", tb_level(&uplink, now));
    } else if (strcmp(words[0], "tbtake") == 0) {
        if (tb_take(&uplink, now, cost)) {
            reply_tokens("OK ", tb_level(&uplink, now));
        } else {
            uint32_t wait = tb_wait(&uplink, now, cost);
            if (wait == TB_NEVER) {
                reply("DENY never");
            } else {
                reply("DENY wait %lu", (unsigned long)wait);
            }
        }
    } else if (strcmp(words[0], "tbwait") == 0) {
        uint32_t wait = tb_wait(&uplink, now, cost);
        reply(wait == TB_NEVER ? "never" : "%lu", (unsigned long)wait);
    } else {
        usage("tblevel NOW");
    }
}

static void cmd_task(char **words, size_t n)
{
    uint32_t period = 0;
    uint32_t phase = 0;
    if (strcmp(words[0], "schedreset") == 0 && n <= 2) {
        uint32_t start = 0;
        if (n == 2 && !parse_u32(words[1], &start)) {
            usage("schedreset [START]");
            return;
        }
        sched_reset(start);
        reply("OK");
    } else if (strcmp(words[0], "taskadd") == 0 && (n == 3 || n == 4) &&
               parse_u32(words[2], &period) && (n == 3 || parse_u32(words[3], &phase))) {
        static const char *const answers[] = {"OK", "ERR duplicate", "ERR no free task",
                                              "ERR bad name"};
        reply("%s", answers[sched_add(words[1], period, phase)]);
    } else if (strcmp(words[0], "taskdel") == 0 && n == 2) {
        reply(sched_remove(words[1]) ? "OK" : "ERR no such task");
    } else if ((strcmp(words[0], "taskon") == 0 || strcmp(words[0], "taskoff") == 0) && n == 2) {
        reply(sched_set_enabled(words[1], words[0][5] == 'n') ? "OK" : "ERR no such task");
    } else if (strcmp(words[0], "taskruns") == 0 && n == 2) {
        uint32_t runs = 0;
        if (sched_runs(words[1], &runs)) {
            reply("%lu", (unsigned long)runs);
        } else {
            reply("ERR no such task");
        }
    } else if (strcmp(words[0], "tasknext") == 0 && n == 1) {
        const char *name = NULL;
        uint32_t due = 0;
        if (sched_next(&name, &due)) {
            reply("%s@%lu", name, (unsigned long)due);
        } else {
            reply("idle");
        }
    } else {
        usage("schedreset [START] | taskadd NAME PERIOD [PHASE] | taskdel|taskon|taskoff|"
              "taskruns NAME | tasknext");
    }
}

static void note_run(const char *name, uint32_t tick, void *context)
{
    reply_line_add(context, "%s@%lu", name, (unsigned long)tick);
}

static void cmd_tick(char **words, size_t n)
{
    uint32_t ticks = 0;
    struct reply_line line;
    if (n != 2 || !parse_u32(words[1], &ticks)) {
        usage("tick N");
        return;
    }
    reply_line_init(&line);
    if (sched_advance(ticks, note_run, &line) == 0) {
        reply("idle, now %lu", (unsigned long)sched_now());
    } else {
        reply_line_send(&line);
    }
}

static struct ini_parser settings_file;

static void cmd_ini(char **words, size_t n)
{
    const char *detail = "";
    if (strcmp(words[0], "inireset") == 0 && n == 1) {
        ini_reset(&settings_file);
        reply("OK");
        return;
    }
    if (strcmp(words[0], "inistat") == 0 && n == 1) {
        reply("lines %u settings %u errors %u", settings_file.line, settings_file.settings,
              settings_file.errors);
        return;
    }
    if (strcmp(words[0], "ini") != 0) {
        usage("ini LINE | inireset | inistat");
        return;
    }
    switch (ini_feed(&settings_file, rest_of_line(words, n), &detail)) {
    case INI_BLANK:
        reply("blank");
        break;
    case INI_SECTION:
        reply("section %s", detail);
        break;
    case INI_SETTING:
        reply("set %s", detail);
        break;
    case INI_ERROR:
        reply("ERR line %u: %s", settings_file.line, detail);
        break;
    }
}

static const char *const rec_errors[] = {
    [REC_OK] = "OK",
    [REC_NOT_FOUND] = "ERR no such record",
    [REC_CORRUPT] = "ERR corrupt record",
    [REC_FULL] = "ERR flash full",
    [REC_BAD_ARGUMENT] = "ERR bad record",
    [REC_WRITE_FAILED] = "ERR write failed",
};

static void reply_flash_info(void)
{
    struct flashrec_info info;
    flashrec_info(&info);
    reply("bank %d gen %u used %zu live %zu bad %zu", info.bank, info.generation, info.used,
          info.live, info.bad);
}

static void cmd_record(char **words, size_t n)
{
    uint32_t id = 0;
    uint8_t bytes[MAX_BYTES];
    size_t len = 0;
    if (strcmp(words[0], "recput") == 0 && n >= 3 && number_upto(words[1], 0xFF, &id) &&
        bytes_of(words + 1, n - 1, bytes, &len)) {
        reply("%s", rec_errors[len > REC_PAYLOAD_MAX ? REC_BAD_ARGUMENT
                                                     : flashrec_put((uint8_t)id, bytes, len)]);
    } else if (strcmp(words[0], "recget") == 0 && n == 2 && number_upto(words[1], 0xFF, &id)) {
        enum rec_status status = flashrec_get((uint8_t)id, bytes, sizeof bytes, &len);
        if (status == REC_OK) {
            reply_hex(bytes, len);
        } else {
            reply("%s", rec_errors[status]);
        }
    } else if (strcmp(words[0], "recdel") == 0 && n == 2 && number_upto(words[1], 0xFF, &id)) {
        reply("%s", rec_errors[flashrec_delete((uint8_t)id)]);
    } else if (strcmp(words[0], "recinfo") == 0 && n == 1) {
        reply_flash_info();
    } else if (strcmp(words[0], "recmount") == 0 && n == 1) {
        flashrec_mount();
        reply_flash_info();
    } else if (strcmp(words[0], "recformat") == 0 && n == 1) {
        flashrec_format();
        reply("OK");
    } else if (strcmp(words[0], "recflip") == 0 && n == 3) {
        uint32_t offset = 0;
        uint32_t mask = 0;
        bool ok = parse_u32(words[1], &offset) && number_upto(words[2], 0xFF, &mask) &&
                  flashrec_corrupt(offset, (uint8_t)mask);
        reply(ok ? "OK" : "ERR usage: recflip OFFSET MASK");
    } else {
        usage("recput ID HEX... | recget|recdel ID | recinfo | recmount | recformat | "
              "recflip OFFSET MASK");
    }
}

/* words[first ..] as Q16.16 samples. */
static bool samples_of(char **words, size_t n, size_t first, q16_t *samples, size_t *count)
{
    *count = 0;
    if (n <= first || n - first > MAX_SAMPLES) {
        return false;
    }
    for (size_t i = first; i < n; i++) {
        if (!q16_parse(words[i], &samples[(*count)++])) {
            return false;
        }
    }
    return true;
}

static void reply_samples(const q16_t *values, size_t count)
{
    struct reply_line line;
    reply_line_init(&line);
    for (size_t i = 0; i < count; i++) {
        char one[24];
        q16_format(values[i], one, sizeof one);
        reply_line_add(&line, "%s", one);
    }
    reply_line_send(&line);
}

static void cmd_debounce(char **words, size_t n)
{
    uint32_t samples = 0;
    struct debounce d;
    char out[MAX_SAMPLES * 2 + 1];
    if (n != 3 || !number_upto(words[1], 255, &samples) || samples == 0 ||
        strlen(words[2]) > MAX_SAMPLES || strspn(words[2], "01") != strlen(words[2])) {
        usage("debounce SAMPLES BITS");
        return;
    }
    debounce_init(&d, (uint8_t)samples, false);
    size_t i = 0;
    for (; words[2][i] != '\0'; i++) {
        out[i] = debounce_step(&d, words[2][i] == '1') ? '1' : '0';
    }
    out[i] = '\0';
    reply("%s", out);
}

static void cmd_hyst(char **words, size_t n)
{
    q16_t low = 0;
    q16_t high = 0;
    q16_t samples[MAX_SAMPLES];
    size_t count = 0;
    struct hysteresis h;
    char out[MAX_SAMPLES + 1];
    if (n < 4 || !q16_parse(words[1], &low) || !q16_parse(words[2], &high) ||
        !samples_of(words, n, 3, samples, &count)) {
        usage("hyst LOW HIGH X...");
        return;
    }
    hysteresis_init(&h, low, high);
    for (size_t i = 0; i < count; i++) {
        out[i] = hysteresis_step(&h, samples[i]) ? '1' : '0';
    }
    out[count] = '\0';
    reply("%s", out);
}

static void cmd_filter(char **words, size_t n)
{
    q16_t samples[MAX_SAMPLES];
    size_t count = 0;
    bool slewed = strcmp(words[0], "slew") == 0;
    q16_t step = 0;
    if ((slewed && (n < 2 || !q16_parse(words[1], &step))) ||
        !samples_of(words, n, slewed ? 2 : 1, samples, &count)) {
        usage("despike X... | slew STEP X...");
        return;
    }
    if (slewed) {
        struct slew s;
        slew_init(&s, step);
        for (size_t i = 0; i < count; i++) {
            samples[i] = slew_step(&s, samples[i]);
        }
    } else {
        struct despike s;
        despike_init(&s);
        for (size_t i = 0; i < count; i++) {
            samples[i] = despike_step(&s, samples[i]);
        }
    }
    reply_samples(samples, count);
}

static void cmd_calib(char **words, size_t n)
{
    uint32_t raw_lo = 0;
    uint32_t raw_hi = 0;
    q16_t eng_lo = 0;
    q16_t eng_hi = 0;
    q16_t out[MAX_SAMPLES];
    struct calibration c;
    if (n < 6 || n - 5 > MAX_SAMPLES || !number_upto(words[1], 0xFFFF, &raw_lo) ||
        !q16_parse(words[2], &eng_lo) || !number_upto(words[3], 0xFFFF, &raw_hi) ||
        !q16_parse(words[4], &eng_hi)) {
        usage("calib RAW_LO ENG_LO RAW_HI ENG_HI RAW...");
        return;
    }
    if (!calibration_init(&c, (uint16_t)raw_lo, eng_lo, (uint16_t)raw_hi, eng_hi)) {
        reply("ERR the two points have the same reading");
        return;
    }
    for (size_t i = 5; i < n; i++) {
        uint32_t raw = 0;
        if (!number_upto(words[i], 0xFFFF, &raw)) {
            usage("calib RAW_LO ENG_LO RAW_HI ENG_HI RAW...");
            return;
        }
        out[i - 5] = calibration_apply(&c, (uint16_t)raw);
    }
    reply_samples(out, n - 5);
}

static void cmd_tokens(char **words, size_t n)
{
    static const char *const errors[] = {
        [TOK_UNTERMINATED] = "ERR unterminated quote",
        [TOK_BAD_ESCAPE] = "ERR backslash at the end",
        [TOK_TOO_MANY] = "ERR too many tokens",
        [TOK_TOO_LONG] = "ERR line too long",
    };
    char storage[256];
    char *tokens[16];
    size_t count = 0;
    struct reply_line line;
    enum tok_status status =
        tokenize(rest_of_line(words, n), storage, sizeof storage, tokens, 16, &count);
    if (status != TOK_OK) {
        reply("%s", errors[status]);
        return;
    }
    reply_line_init(&line);
    reply_line_add(&line, "%zu", count);
    for (size_t i = 0; i < count; i++) {
        reply_line_add(&line, "[%s]", tokens[i]);
    }
    reply_line_send(&line);
}

struct command {
    const char *name;
    void (*run)(char **words, size_t n);
};

static const struct command table[] = {
    {"logadd", cmd_logadd},    {"logcount", cmd_logrange}, {"logrange", cmd_logrange},
    {"logget", cmd_log},       {"loginfo", cmd_log},       {"logclear", cmd_log},
    {"tbinit", cmd_bucket},    {"tbtake", cmd_bucket},     {"tbwait", cmd_bucket},
    {"tblevel", cmd_bucket},   {"schedreset", cmd_task},   {"taskadd", cmd_task},
    {"taskdel", cmd_task},     {"taskon", cmd_task},       {"taskoff", cmd_task},
    {"taskruns", cmd_task},    {"tasknext", cmd_task},     {"tick", cmd_tick},
    {"ini", cmd_ini},          {"inireset", cmd_ini},      {"inistat", cmd_ini},
    {"recput", cmd_record},    {"recget", cmd_record},     {"recdel", cmd_record},
    {"recinfo", cmd_record},   {"recmount", cmd_record},   {"recformat", cmd_record},
    {"recflip", cmd_record},   {"debounce", cmd_debounce}, {"hyst", cmd_hyst},
    {"despike", cmd_filter},   {"slew", cmd_filter},       {"calib", cmd_calib},
    {"tokens", cmd_tokens},
};

/* False when words[0] is none of this file's commands. */
bool commands_services_execute(char **words, size_t n)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcmp(words[0], table[i].name) == 0) {
            table[i].run(words, n);
            return true;
        }
    }
    return false;
}
