/* The output latch of a 32-pin GPIO port (kept in RAM: the board has no such port). */
#ifndef CM3FW_GPIO_H
#define CM3FW_GPIO_H

#include <stdbool.h>
#include <stdint.h>

#define GPIO_PINS 32u

/* Drive `pin` high or low; false (and nothing changes) when there is no such pin. */
bool gpio_set(uint32_t pin);
bool gpio_clear(uint32_t pin);

/* The latch, pin 0 in bit 0. */
uint32_t gpio_read(void);

#endif
