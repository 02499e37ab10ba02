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

/* commands.c: the console's command table */
void commands_execute(char *line);
void reply(const char *format, ...);

#endif
