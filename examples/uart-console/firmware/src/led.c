#include "led.h"

static bool led_state;

void led_init(void)
{
    led_state = false;
}

void led_set(bool on)
{
    led_state = on;
}

bool led_is_on(void)
{
    return led_state;
}
