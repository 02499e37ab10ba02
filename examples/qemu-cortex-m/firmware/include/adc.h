/* The board's 12-bit ADC, referenced to 3.3 V. */
#ifndef CM3FW_ADC_H
#define CM3FW_ADC_H

#include <stdint.h>

#define ADC_MAX_RAW 4095u
#define ADC_VREF_MV 3300u

/* Millivolts for a raw reading 0..ADC_MAX_RAW: full scale is exactly ADC_VREF_MV, truncated. */
uint32_t adc_to_millivolts(uint32_t raw);

#endif
