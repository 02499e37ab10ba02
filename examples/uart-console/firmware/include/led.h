/* The board's status LED (a variable on the host). */
#ifndef UARTCON_LED_H
#define UARTCON_LED_H

#include <stdbool.h>

void led_init(void);
void led_set(bool on);
bool led_is_on(void);

#endif
