/* The gateway firmware's modules, one header: each module's functions in one block. */
#ifndef GATEWAY_H
#define GATEWAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* hexparse.c: numbers and byte strings as the console reads and prints them */
int hex_nibble(char c);
size_t parse_hex_bytes(const char *text, uint8_t *out, size_t capacity, bool *ok);
bool parse_long(const char *text, long *value);
bool parse_u32(const char *text, uint32_t *value);
void format_hex(const uint8_t *data, size_t len, char *out, size_t capacity);

/* crc.c: the checksums of the gateway's links */
uint8_t crc8_atm(const uint8_t *data, size_t len);
uint16_t crc16_ccitt(const uint8_t *data, size_t len);
uint32_t crc32_ieee(const uint8_t *data, size_t len);

/* base64.c */
size_t base64_encode(const uint8_t *data, size_t len, char *out, size_t capacity);
size_t base64_decode(const char *text, uint8_t *out, size_t capacity, bool *ok);

/* cobs.c: consistent overhead byte stuffing of serial frames */
size_t cobs_encode(const uint8_t *data, size_t len, uint8_t *out, size_t capacity);
size_t cobs_decode(const uint8_t *data, size_t len, uint8_t *out, size_t capacity, bool *ok);

/* fixed.c: Q16.16 fixed point */
typedef int32_t q16_t;
#define Q16_ONE 65536
q16_t q16_from_int(long value);
q16_t q16_mul(q16_t a, q16_t b);
q16_t q16_div(q16_t a, q16_t b, bool *ok);
q16_t q16_sqrt(q16_t a);
bool q16_parse(const char *text, q16_t *value);
void q16_format(q16_t value, char *out, size_t capacity);

/* sort.c */
void sort_values(long *values, size_t count);
void insertion_sort(long *values, size_t count);
void quicksort(long *values, size_t low, size_t high);
size_t partition(long *values, size_t low, size_t high);

/* stats.c: statistics of sensor readings */
long stats_min(const long *values, size_t count);
long stats_max(const long *values, size_t count);
q16_t stats_mean(const long *values, size_t count);
q16_t stats_variance(const long *values, size_t count);
q16_t stats_stddev(const long *values, size_t count);
q16_t stats_median(const long *values, size_t count);

/* date.c: calendar dates of the event log */
struct civil_date {
    long year;
    int month;
    int day;
};
bool is_leap_year(long year);
int days_in_month(long year, int month);
bool parse_date(const char *text, struct civil_date *date);
long days_since_epoch(const struct civil_date *date);
struct civil_date date_from_days(long days);
int date_weekday(const struct civil_date *date);
int day_of_year(const struct civil_date *date);
void format_date(const struct civil_date *date, char *out, size_t capacity);

/* bits.c */
int bits_popcount(uint32_t x);
uint8_t bits_reverse8(uint8_t x);
uint32_t bits_reverse32(uint32_t x);
int bits_parity(uint32_t x);
int bits_clz(uint32_t x);

/* kvstore.c: the gateway's settings */
#define KV_SLOTS 16
#define KV_KEY_MAX 15
#define KV_VALUE_MAX 31
void kv_clear(void);
bool kv_set(const char *key, const char *value);
const char *kv_get(const char *key);
bool kv_delete(const char *key);
size_t kv_count(void);

/* ringbuf.c: the uplink queue */
#define RING_CAPACITY 8
void ring_clear(void);
bool ring_push(long value);
bool ring_pop(long *value);
size_t ring_length(void);

/* filter.c: smoothing of sensor readings */
void moving_average(const long *values, size_t count, size_t window, q16_t *out);
q16_t ema_step(q16_t previous, q16_t sample, q16_t alpha);

/* pid.c: the fan controller */
struct pid_state {
    q16_t kp, ki, kd;
    q16_t integral;
    q16_t previous_error;
    q16_t out_min, out_max;
};
void pid_init(struct pid_state *pid, q16_t kp, q16_t ki, q16_t kd);
q16_t pid_update(struct pid_state *pid, q16_t setpoint, q16_t measured);

/* utf8.c: labels sent by the cloud */
int utf8_sequence_length(uint8_t lead);
bool utf8_valid(const uint8_t *data, size_t len);
long utf8_codepoints(const uint8_t *data, size_t len);

/* strutil.c */
size_t split_words(char *line, char **words, size_t capacity);
void to_upper(char *text);
char *trim(char *text);

/* checksum.c: the simple sums of field buses and instruments */
uint16_t fletcher16(const uint8_t *data, size_t len);
uint32_t adler32(const uint8_t *data, size_t len);
uint16_t internet_checksum(const uint8_t *data, size_t len);
uint8_t lrc8(const uint8_t *data, size_t len);
uint8_t xor8(const uint8_t *data, size_t len);
enum nmea_status { NMEA_OK, NMEA_NO_START, NMEA_NO_CHECKSUM, NMEA_BAD_CHECKSUM };
enum nmea_status nmea_verify(const char *sentence, uint8_t *computed);

/* varint.c: LEB128 varints of the telemetry encoding, zigzag for signed values */
#define VARINT_MAX_BYTES 10
enum varint_status { VARINT_OK, VARINT_TRUNCATED, VARINT_OVERLONG };
size_t varint_encode(uint64_t value, uint8_t *out, size_t capacity);
size_t varint_decode(const uint8_t *data, size_t len, uint64_t *value, enum varint_status *status);
uint64_t zigzag_encode(int64_t value);
int64_t zigzag_decode(uint64_t value);

/* slip.c: SLIP framing (RFC 1055) of the sensor bus */
#define SLIP_END 0xC0
#define SLIP_ESC 0xDB
#define SLIP_ESC_END 0xDC
#define SLIP_ESC_ESC 0xDD
#define SLIP_FRAME_MAX 64
enum slip_status { SLIP_OK, SLIP_UNTERMINATED, SLIP_BAD_ESCAPE, SLIP_TOO_LONG, SLIP_TRAILING };
size_t slip_encode(const uint8_t *data, size_t len, uint8_t *out, size_t capacity);
size_t slip_decode(const uint8_t *data, size_t len, uint8_t *out, size_t capacity,
                   enum slip_status *status);
enum slip_event { SLIP_NONE, SLIP_FRAME, SLIP_ERROR };
struct slip_receiver {
    uint8_t frame[SLIP_FRAME_MAX];
    size_t len;       /* bytes of the frame being received */
    size_t frame_len; /* bytes of the frame the last SLIP_FRAME completed */
    bool escaped;
    bool discarding;
    uint32_t frames;
    uint32_t errors;
};
void slip_receiver_init(struct slip_receiver *rx);
enum slip_event slip_receive(struct slip_receiver *rx, uint8_t byte);

/* modbus.c: Modbus RTU on the field bus, as master (requests) and as slave (our registers) */
#define MODBUS_REGISTERS 32
#define MODBUS_ILLEGAL_FUNCTION 0x01
#define MODBUS_ILLEGAL_ADDRESS 0x02
#define MODBUS_ILLEGAL_VALUE 0x03
#define MODBUS_DEVICE_FAILURE 0x04
uint16_t modbus_crc16(const uint8_t *data, size_t len);
size_t modbus_seal(uint8_t *frame, size_t len, size_t capacity);
bool modbus_crc_ok(const uint8_t *frame, size_t len);
size_t modbus_read_request(uint8_t slave, uint16_t start, uint16_t count, uint8_t *out,
                           size_t capacity);
void modbus_slave_reset(uint8_t address);
uint8_t modbus_slave_address(void);
bool modbus_register(size_t index, uint16_t *value);
enum modbus_result { MODBUS_ANSWERED, MODBUS_BROADCAST, MODBUS_NOT_OURS, MODBUS_BAD_CRC,
                     MODBUS_TOO_SHORT };
enum modbus_result modbus_slave_handle(const uint8_t *request, size_t len, uint8_t *response,
                                       size_t capacity, size_t *response_len);
enum modbus_reply { MODBUS_REPLY_VALUES, MODBUS_REPLY_EXCEPTION, MODBUS_REPLY_BAD_CRC,
                    MODBUS_REPLY_MALFORMED };
enum modbus_reply modbus_parse_read_reply(const uint8_t *frame, size_t len, uint16_t *values,
                                          size_t capacity, size_t *count, uint8_t *exception);

/* tlv.c: type-length-value records of the provisioning blobs, and the config blob */
enum tlv_status { TLV_OK, TLV_END, TLV_TRUNCATED, TLV_BAD_LENGTH };
struct tlv_item {
    uint8_t type;
    size_t length;
    const uint8_t *value;
};
struct tlv_reader {
    const uint8_t *data;
    size_t len;
    size_t at;
};
void tlv_reader_init(struct tlv_reader *reader, const uint8_t *data, size_t len);
enum tlv_status tlv_next(struct tlv_reader *reader, struct tlv_item *item);
size_t tlv_put(uint8_t *out, size_t capacity, size_t at, uint8_t type, const uint8_t *value,
               size_t length);
enum tlv_status tlv_count(const uint8_t *data, size_t len, size_t *count);
enum tlv_status tlv_find(const uint8_t *data, size_t len, uint8_t type, struct tlv_item *item);
enum config_status { CONFIG_OK, CONFIG_MALFORMED, CONFIG_BAD_FIELD, CONFIG_STORE_FULL,
                     CONFIG_NO_ROOM };
struct config_report {
    size_t applied;
    size_t skipped;
    uint8_t bad_type;
};
enum config_status config_blob_apply(const uint8_t *blob, size_t len, struct config_report *report);
enum config_status config_blob_build(uint8_t *out, size_t capacity, size_t *len,
                                     struct config_report *report);

/* flashrec.c: settings records in two banks of (simulated) NOR flash, CRC-protected */
#define FLASH_BANK_SIZE 128
#define REC_IDS 32
#define REC_PAYLOAD_MAX 32
enum rec_status { REC_OK, REC_NOT_FOUND, REC_CORRUPT, REC_FULL, REC_BAD_ARGUMENT,
                  REC_WRITE_FAILED };
struct flashrec_info {
    int bank;
    uint8_t generation;
    size_t used;
    size_t live;
    size_t bad;
};
void flashrec_format(void);
void flashrec_mount(void);
enum rec_status flashrec_put(uint8_t id, const uint8_t *payload, size_t len);
enum rec_status flashrec_get(uint8_t id, uint8_t *payload, size_t capacity, size_t *len);
enum rec_status flashrec_delete(uint8_t id);
void flashrec_info(struct flashrec_info *info);
bool flashrec_corrupt(size_t offset, uint8_t mask);

/* eventlog.c: the last EVLOG_CAPACITY events, timestamped, found by sequence or time range */
#define EVLOG_CAPACITY 16
struct event_record {
    uint32_t seq;
    uint32_t time;
    uint16_t code;
    int32_t value;
};
void evlog_clear(void);
bool evlog_append(uint32_t time, uint16_t code, int32_t value, uint32_t *seq);
size_t evlog_count(void);
uint32_t evlog_overwritten(void);
const struct event_record *evlog_at(size_t index);
const struct event_record *evlog_find(uint32_t seq, bool *overwritten);
size_t evlog_range(uint32_t from, uint32_t to, size_t *first);

/* tokenbucket.c: the uplink's rate limiter, ticks in milliseconds */
struct token_bucket {
    uint32_t capacity; /* milli-tokens */
    uint32_t level;    /* milli-tokens */
    uint32_t rate;     /* tokens a second, which is milli-tokens a tick */
    uint32_t last;     /* the tick of the last refill */
};
#define TB_MAX_TOKENS 1000000u
#define TB_NEVER UINT32_MAX
void tb_init(struct token_bucket *tb, uint32_t tokens, uint32_t per_second, uint32_t now);
bool tb_take(struct token_bucket *tb, uint32_t now, uint32_t cost);
uint32_t tb_wait(struct token_bucket *tb, uint32_t now, uint32_t cost);
uint32_t tb_level(struct token_bucket *tb, uint32_t now);

/* scheduler.c: the main loop's periodic tasks in ticks */
#define SCHED_TASKS 8
#define SCHED_NAME_MAX 11
enum sched_add_status { SCHED_ADDED, SCHED_DUPLICATE, SCHED_FULL, SCHED_BAD_NAME };
typedef void (*sched_hook)(const char *name, uint32_t tick, void *context);
void sched_reset(uint32_t start);
uint32_t sched_now(void);
enum sched_add_status sched_add(const char *name, uint32_t period, uint32_t phase);
bool sched_remove(const char *name);
bool sched_set_enabled(const char *name, bool enabled);
size_t sched_advance(uint32_t ticks, sched_hook hook, void *context);
bool sched_runs(const char *name, uint32_t *runs);
bool sched_next(const char **name, uint32_t *due);

/* ini.c: the settings file, a line at a time, into the kvstore */
enum ini_result { INI_BLANK, INI_SECTION, INI_SETTING, INI_ERROR };
struct ini_parser {
    char section[KV_KEY_MAX + 1];
    char key[KV_KEY_MAX + 1]; /* the full key of the last setting */
    unsigned line;
    unsigned settings;
    unsigned errors;
};
void ini_reset(struct ini_parser *parser);
enum ini_result ini_feed(struct ini_parser *parser, char *line, const char **detail);

/* inputs.c: conditioning of the field inputs */
struct debounce {
    uint8_t samples;
    uint8_t count;
    bool state;
};
void debounce_init(struct debounce *d, uint8_t samples, bool initial);
bool debounce_step(struct debounce *d, bool raw);
struct hysteresis {
    q16_t low, high;
    bool state;
};
void hysteresis_init(struct hysteresis *h, q16_t low, q16_t high);
bool hysteresis_step(struct hysteresis *h, q16_t x);
struct despike {
    q16_t window[3];
    size_t at;
    size_t filled;
};
void despike_init(struct despike *s);
q16_t despike_step(struct despike *s, q16_t x);
struct slew {
    q16_t max_step;
    q16_t out;
    bool started;
};
void slew_init(struct slew *s, q16_t max_step);
q16_t slew_step(struct slew *s, q16_t x);
struct calibration {
    uint16_t raw_lo, raw_hi;
    q16_t eng_lo, eng_hi;
};
bool calibration_init(struct calibration *c, uint16_t raw_lo, q16_t eng_lo, uint16_t raw_hi,
                      q16_t eng_hi);
q16_t calibration_apply(const struct calibration *c, uint16_t raw);

/* tokenizer.c: quoted console arguments */
enum tok_status { TOK_OK, TOK_UNTERMINATED, TOK_BAD_ESCAPE, TOK_TOO_MANY, TOK_TOO_LONG };
enum tok_status tokenize(const char *line, char *storage, size_t storage_size, char **tokens,
                         size_t capacity, size_t *count);

/* commands.c: the console's command table, and what the other command files share */
#define CONSOLE_MAX_BYTES 96
void commands_execute(char *line);
void reply(const char *format, ...);
void usage(const char *what);
bool bytes_of(char **words, size_t n, uint8_t *bytes, size_t *len);
bool numbers_of(char **words, size_t n, long *values, size_t *count);
void reply_hex(const uint8_t *data, size_t len);
char *rest_of_line(char **words, size_t n);
struct reply_line {
    char text[480];
    size_t len;
    size_t dropped; /* pieces that did not fit */
};
void reply_line_init(struct reply_line *line);
void reply_line_add(struct reply_line *line, const char *format, ...);
void reply_line_send(const struct reply_line *line);

/* commands_links.c: the commands of the framing, field-bus and provisioning modules */
bool commands_links_execute(char **words, size_t n);

/* commands_services.c: the commands of the log, limiter, scheduler, settings and inputs */
bool commands_services_execute(char **words, size_t n);

#endif
