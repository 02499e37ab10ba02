/* TMP36 analog temperature sensor: 500 mV at 0 °C, 10 mV per °C. */
#ifndef SENSOR_TMP36_H
#define SENSOR_TMP36_H

#include <stddef.h>

/* The temperature for a reading in millivolts, in tenths of a degree Celsius. */
int tmp36_decidegrees(int millivolts);
/* Formats tenths of a degree as "-0.5", "25.0": one decimal, the sign in front. */
void tmp36_format(int decidegrees, char *out, size_t size);

#endif
