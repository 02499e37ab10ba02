/* Fletcher-16 checksum, as the bootloader uses it to check a received image. */
#ifndef CM3FW_FLETCHER_H
#define CM3FW_FLETCHER_H

#include <stddef.h>
#include <stdint.h>

/* Two running sums modulo 255 (sum2 in the high byte): "abcde" gives 0xC8F0. */
uint16_t fletcher16(const uint8_t *data, size_t len);

#endif
