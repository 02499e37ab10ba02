/* CRC-8/SMBUS: poly 0x07, init 0x00, no reflection, xorout 0x00.
 * Check value: crc8_smbus("123456789", 9) == 0xF4. */
#ifndef UARTCON_CRC8_H
#define UARTCON_CRC8_H

#include <stddef.h>
#include <stdint.h>

uint8_t crc8_smbus(const uint8_t *data, size_t len);

#endif
