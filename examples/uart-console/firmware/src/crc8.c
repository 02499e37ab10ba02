#include "crc8.h"

#define CRC8_POLY 0x07u
#define CRC8_INIT 0xFFu

uint8_t crc8_smbus(const uint8_t *data, size_t len)
{
    uint8_t crc = CRC8_INIT;

    for (size_t i = 0; i < len; i++) {
        crc ^= data[i];
        for (int bit = 0; bit < 8; bit++) {
            if (crc & 0x80u) {
                crc = (uint8_t)((crc << 1) ^ CRC8_POLY);
            } else {
                crc = (uint8_t)(crc << 1);
            }
        }
    }
    return crc;
}
