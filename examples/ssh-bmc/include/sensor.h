/* The board's TMP102 temperature sensor. */
#ifndef BMCCTL_SENSOR_H
#define BMCCTL_SENSOR_H

#include <stdint.h>

#define TMP102_MAX_RAW 0xFFFu

/* A raw 12-bit TMP102 reading (two's complement, 0.0625 degC per LSB) in 1/10000 degC:
 * 0x190 is 25.0 degC (250000), 0xE70 is -25.0 degC (-250000). */
int32_t tmp102_to_decimillidegrees(uint32_t raw);

#endif
