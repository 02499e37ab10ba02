/* Number formatting and parsing for the console, without a C library. */
#ifndef CM3FW_FMT_H
#define CM3FW_FMT_H

#include <stdbool.h>
#include <stdint.h>

void put_dec(uint32_t value);

/* "0x" and exactly `digits` upper-case hex digits. */
void put_hex(uint32_t value, unsigned digits);

/* Decimal, or hex after "0x"; the whole of `text` must be the number and fit in 32 bits. */
bool parse_u32(const char *text, uint32_t *value);

#endif
