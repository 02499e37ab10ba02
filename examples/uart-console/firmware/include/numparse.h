/* Strict number parsing for console arguments: the whole token must be a number. */
#ifndef UARTCON_NUMPARSE_H
#define UARTCON_NUMPARSE_H

#include <stddef.h>
#include <stdint.h>

enum num_status {
    NUM_OK,
    NUM_INVALID, /* empty, stray characters, or a sign without digits */
    NUM_RANGE,   /* well-formed, but outside the target type */
};

/* Decimal with an optional leading '+' or '-', range INT32_MIN..INT32_MAX. */
enum num_status parse_i32(const char *text, int32_t *out);

/* An even number of hex digits ("0a1B"), two per byte; stores at most cap bytes. */
enum num_status parse_hex_bytes(const char *text, uint8_t *out, size_t cap, size_t *len);

#endif
