/* Numbers and byte strings as the console reads and prints them. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "gateway.h"

int hex_nibble(char c)
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

/* "01 a0ff" and "01a0ff" both read as three bytes; an odd digit count is an error. */
size_t parse_hex_bytes(const char *text, uint8_t *out, size_t capacity, bool *ok)
{
    size_t count = 0;
    int high = -1;
    *ok = true;
    for (; *text != '\0'; text++) {
        if (*text == ' ' || *text == ':') {
            if (high >= 0) {
                *ok = false;
                return count;
            }
            continue;
        }
        int nibble = hex_nibble(*text);
        if (nibble < 0) {
            *ok = false;
            return count;
        }
        if (high < 0) {
            high = nibble;
            continue;
        }
        if (count == capacity) {
            *ok = false;
            return count;
        }
        out[count++] = (uint8_t)((high << 4) | nibble);
        high = -1;
    }
    if (high >= 0) {
        *ok = false;
    }
    return count;
}

bool parse_long(const char *text, long *value)
{
    char *end = NULL;
    if (text == NULL || *text == '\0') {
        return false;
    }
    errno = 0;
    long parsed = strtol(text, &end, 0);
    if (errno == ERANGE || end == text || *end != '\0') {
        return false;
    }
    *value = parsed;
    return true;
}

bool parse_u32(const char *text, uint32_t *value)
{
    long parsed = 0;
    if (!parse_long(text, &parsed) || parsed < 0 || (unsigned long)parsed > 0xFFFFFFFFul) {
        return false;
    }
    *value = (uint32_t)parsed;
    return true;
}

void format_hex(const uint8_t *data, size_t len, char *out, size_t capacity)
{
    static const char digits[] = "0123456789abcdef";
    size_t at = 0;
    for (size_t i = 0; i < len && at + 2 < capacity; i++) {
        out[at++] = digits[data[i] >> 4];
        out[at++] = digits[data[i] & 0x0f];
    }
    out[at] = '\0';
}
