#include "numparse.h"

#include <stdbool.h>

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

enum num_status parse_i32(const char *text, int32_t *out)
{
    const char *p = text;
    bool negative = false;
    /* The magnitude is accumulated in 64 bits and checked against the limit of its sign,
     * which is one larger for negative numbers (INT32_MIN has no positive twin). */
    int64_t magnitude = 0;
    int64_t limit;

    if (*p == '+' || *p == '-') {
        p++;
        negative = (*p == '-');
    }
    if (*p == '\0') {
        return NUM_INVALID;
    }
    limit = negative ? -(int64_t)INT32_MIN : (int64_t)INT32_MAX;
    for (; *p != '\0'; p++) {
        if (*p < '0' || *p > '9') {
            return NUM_INVALID;
        }
        if (magnitude <= limit) {
            magnitude = magnitude * 10 + (*p - '0');
        }
    }
    if (magnitude > limit) {
        return NUM_RANGE;
    }
    *out = (int32_t)(negative ? -magnitude : magnitude);
    return NUM_OK;
}

enum num_status parse_hex_bytes(const char *text, uint8_t *out, size_t cap, size_t *len)
{
    size_t n = 0;

    if (*text == '\0') {
        return NUM_INVALID;
    }
    for (const char *p = text; *p != '\0'; p += 2) {
        int hi = hex_digit(p[0]);
        int lo = (p[1] == '\0') ? -1 : hex_digit(p[1]);
        if (hi < 0 || lo < 0) {
            return NUM_INVALID;
        }
        if (n == cap) {
            return NUM_RANGE;
        }
        out[n++] = (uint8_t)(hi << 4 | lo);
    }
    *len = n;
    return NUM_OK;
}
